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
    pub apply: Option<UpgradeApplyConfiguration>,
    #[serde(default)]
    pub diff: Option<UpgradeDiffConfiguration>,
    #[serde(default)]
    pub node: Option<UpgradeNodeConfiguration>,
    #[serde(default)]
    pub plan: Option<UpgradePlanConfiguration>,
    #[serde(default)]
    pub timeouts: Option<Timeouts>,
}

/// `apply:`, kubeadm's UpgradeApplyConfiguration.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpgradeApplyConfiguration {
    #[serde(default)]
    pub kubernetes_version: Option<String>,
    #[serde(default)]
    pub allow_experimental_upgrades: Option<bool>,
    #[serde(default, rename = "allowRCUpgrades")]
    pub allow_rc_upgrades: Option<bool>,
    #[serde(default)]
    pub certificate_renewal: Option<bool>,
    #[serde(default)]
    pub dry_run: Option<bool>,
    #[serde(default)]
    pub etcd_upgrade: Option<bool>,
    #[serde(default)]
    pub force_upgrade: Option<bool>,
    #[serde(default)]
    pub ignore_preflight_errors: Vec<String>,
    #[serde(default)]
    pub patches: Option<Patches>,
    #[serde(default)]
    pub print_config: Option<bool>,
    #[serde(default)]
    pub skip_phases: Vec<String>,
    #[serde(default)]
    pub image_pull_policy: Option<String>,
    #[serde(default)]
    pub image_pull_serial: Option<bool>,
}

/// `plan:`, kubeadm's UpgradePlanConfiguration.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpgradePlanConfiguration {
    #[serde(default)]
    pub kubernetes_version: Option<String>,
    #[serde(default)]
    pub allow_experimental_upgrades: Option<bool>,
    #[serde(default, rename = "allowRCUpgrades")]
    pub allow_rc_upgrades: Option<bool>,
    #[serde(default)]
    pub dry_run: Option<bool>,
    #[serde(default)]
    pub etcd_upgrade: Option<bool>,
    #[serde(default)]
    pub ignore_preflight_errors: Vec<String>,
    #[serde(default)]
    pub print_config: Option<bool>,
}

/// `diff:`, kubeadm's UpgradeDiffConfiguration.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UpgradeDiffConfiguration {
    #[serde(default)]
    pub kubernetes_version: Option<String>,
    #[serde(default)]
    pub context_lines: Option<u64>,
}

/// `imagePullPolicy` of `apply:` or `node:`, as kubeadm validates it (empty is the default,
/// IfNotPresent).
pub fn image_pull_policy(section: &str, value: Option<&str>) -> Result<String, String> {
    match value.unwrap_or("") {
        "" => Ok("IfNotPresent".into()),
        p @ ("Always" | "IfNotPresent" | "Never") => Ok(p.into()),
        other => Err(format!("{section}.imagePullPolicy: Invalid value: {other:?}: invalid pull policy")),
    }
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
