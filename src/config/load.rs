//! Splits a kubeadm config file into its documents and decodes each strictly, like kubeadm's
//! SplitConfigDocuments + strict unmarshalling: a missing apiVersion/kind or a kind given twice is
//! an error; documents of unknown groups are ignored with a warning.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::types::{ClusterConfiguration, InitConfiguration, JoinConfiguration};
use crate::constants::{KUBEADM_API_VERSION, KUBELET_API_VERSION, KUBEPROXY_API_VERSION};

/// A config file's documents, decoded.
///
/// Serializable only so a boot plan can carry them between the boot stages (see
/// `userdata::NodePlan`); user input always goes through [`parse_documents`], which checks each
/// document's apiVersion and kind.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Documents {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<InitConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterConfiguration>,
    /// KubeletConfiguration, kept as given and passed through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<serde_yaml::Mapping>,
    /// KubeProxyConfiguration, kept as given and passed through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_proxy: Option<serde_yaml::Mapping>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<JoinConfiguration>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

#[derive(Deserialize)]
struct TypeMeta {
    #[serde(rename = "apiVersion")]
    api_version: Option<serde_yaml::Value>,
    kind: Option<serde_yaml::Value>,
}

/// Hard limit on config size: user-data is small, and this bounds memory on hostile input.
pub const MAX_CONFIG_BYTES: usize = 1 << 20;

pub fn parse_documents(source: &str, text: &str) -> Result<Documents, ConfigError> {
    if text.len() > MAX_CONFIG_BYTES {
        return Err(ConfigError::file(source, format!("is {} bytes; the limit is {MAX_CONFIG_BYTES}", text.len())));
    }
    let mut docs = Documents::default();
    let mut seen: Vec<String> = Vec::new();
    for (index, de) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let label = format!("document {}", index + 1);
        // Only apiVersion/kind here; the typed second pass reports everything else with its path.
        let meta = Option::<TypeMeta>::deserialize(de).map_err(|e| {
            let m = with_location(&e);
            let m = if m.contains("expected struct TypeMeta") {
                "is not a mapping with apiVersion and kind".into()
            } else {
                m
            };
            ConfigError::doc(source, &label, "", m)
        })?;
        let Some(meta) = meta else { continue };
        let api_version = required_string(source, &label, "apiVersion", meta.api_version)?;
        let kind = required_string(source, &label, "kind", meta.kind)?;
        let label = format!("{kind} ({label})");
        if seen.contains(&kind) {
            return Err(ConfigError::doc(
                source,
                &label,
                "kind",
                format!("{kind} appears twice; merge the two documents"),
            ));
        }
        seen.push(kind.clone());
        let group = api_version.split('/').next().unwrap_or_default();
        match (group, api_version.as_str(), kind.as_str()) {
            ("kubeadm.k8s.io", KUBEADM_API_VERSION, "InitConfiguration") => {
                docs.init = Some(decode_typed(source, &label, text, index)?);
            }
            ("kubeadm.k8s.io", KUBEADM_API_VERSION, "ClusterConfiguration") => {
                docs.cluster = Some(decode_typed(source, &label, text, index)?);
            }
            ("kubeadm.k8s.io", KUBEADM_API_VERSION, "JoinConfiguration") => {
                docs.join = Some(decode_typed(source, &label, text, index)?);
            }
            ("kubeadm.k8s.io", KUBEADM_API_VERSION, "ResetConfiguration" | "UpgradeConfiguration") => {
                docs.warnings.push(format!("{source}: {label}: ignored, kubestrap does not reset or upgrade"));
            }
            ("kubeadm.k8s.io", KUBEADM_API_VERSION, _) => {
                return Err(ConfigError::doc(
                    source,
                    &label,
                    "kind",
                    format!("{kind:?} is not a kubeadm {KUBEADM_API_VERSION} kind"),
                ));
            }
            ("kubeadm.k8s.io", _, _) => {
                return Err(ConfigError::doc(
                    source,
                    &label,
                    "apiVersion",
                    format!(
                        "{api_version:?} is not supported; use {KUBEADM_API_VERSION} (`kubeadm config migrate` converts older files)"
                    ),
                ));
            }
            ("kubelet.config.k8s.io", KUBELET_API_VERSION, "KubeletConfiguration") => {
                docs.kubelet = Some(decode_typed(source, &label, text, index)?);
            }
            ("kubeproxy.config.k8s.io", KUBEPROXY_API_VERSION, "KubeProxyConfiguration") => {
                docs.kube_proxy = Some(decode_typed(source, &label, text, index)?);
            }
            ("kubelet.config.k8s.io" | "kubeproxy.config.k8s.io", _, _) => {
                return Err(ConfigError::doc(
                    source,
                    &label,
                    "apiVersion",
                    format!(
                        "{api_version:?}/{kind} is not supported; use {KUBELET_API_VERSION} KubeletConfiguration or {KUBEPROXY_API_VERSION} KubeProxyConfiguration"
                    ),
                ));
            }
            _ => docs.warnings.push(format!(
                "{source}: ignored configuration document with GroupVersionKind {api_version}, Kind={kind}"
            )),
        }
    }
    Ok(docs)
}

fn required_string(
    source: &str,
    label: &str,
    field: &str,
    v: Option<serde_yaml::Value>,
) -> Result<String, ConfigError> {
    match v {
        Some(serde_yaml::Value::String(s)) if !s.is_empty() => Ok(s),
        Some(other) => {
            Err(ConfigError::doc(source, label, field, format!("must be a non-empty string, got {}", short(&other))))
        }
        None => {
            Err(ConfigError::doc(source, label, field, "is missing; every document needs apiVersion and kind".into()))
        }
    }
}

/// Decodes document `index` again, this time into its type, so errors carry the field path
/// and the line/column of the bad value.
fn decode_typed<T: DeserializeOwned>(source: &str, label: &str, text: &str, index: usize) -> Result<T, ConfigError> {
    let de = serde_yaml::Deserializer::from_str(text)
        .nth(index)
        .ok_or_else(|| ConfigError::doc(source, label, "", "document vanished on second read".into()))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        // serde_yaml already prefixes nested errors with the path; say it once.
        let msg = with_location(e.inner());
        let msg = match msg.split_once(": ") {
            Some((p, rest))
                if path == p || path.starts_with(&format!("{p}.")) || path.starts_with(&format!("{p}[")) =>
            {
                rest.to_string()
            }
            _ => msg,
        };
        ConfigError::doc(source, label, &path, msg)
    })
}

fn short(v: &serde_yaml::Value) -> String {
    let s = serde_yaml::to_string(v).unwrap_or_default();
    let s = s.trim();
    if s.len() > 60 { format!("{}…", &s[..s.floor_char_boundary(60)]) } else { s.to_string() }
}

/// serde_yaml's message, with the line and column when it did not already say them.
fn with_location(e: &serde_yaml::Error) -> String {
    let m = e.to_string();
    match e.location() {
        Some(l) if !m.contains(" at line ") => format!("{m} at line {} column {}", l.line(), l.column()),
        _ => m,
    }
}
