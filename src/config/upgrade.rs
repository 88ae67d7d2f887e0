//! kubeadm's `UpgradeConfiguration` (kubeadm.k8s.io/v1beta4): what `upgrade` reads from
//! `--config`. Every field kubeadm 1.37 has is accepted (a file written for kubeadm works here);
//! the ones `upgrade node` acts on are listed in docs/upgrades.md.

use serde::{Deserialize, Serialize};

use super::types::{Patches, Timeouts};

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpgradeConfiguration {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub apply: Option<serde_yaml::Mapping>,
    #[serde(default)]
    pub diff: Option<serde_yaml::Mapping>,
    #[serde(default)]
    pub node: Option<UpgradeNodeConfiguration>,
    #[serde(default)]
    pub plan: Option<serde_yaml::Mapping>,
    #[serde(default)]
    pub timeouts: Option<Timeouts>,
}

/// `node:`, kubeadm's UpgradeNodeConfiguration.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpgradeNodeConfiguration {
    #[serde(default)]
    pub certificate_renewal: Option<bool>,
    #[serde(default)]
    pub dry_run: Option<bool>,
    #[serde(default)]
    pub etcd_upgrade: Option<bool>,
    #[serde(default)]
    pub ignore_preflight_errors: Vec<String>,
    #[serde(default)]
    pub skip_phases: Vec<String>,
    #[serde(default)]
    pub patches: Option<Patches>,
    #[serde(default)]
    pub image_pull_policy: Option<String>,
    #[serde(default)]
    pub image_pull_serial: Option<bool>,
}
