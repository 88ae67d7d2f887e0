//! Every API object `kubestrap init` creates, plus the kubelet's files, built as values exactly
//! as kubeadm builds them. Pure: no I/O and no HTTP; the phases send what these functions return.
//!
//! Objects are `serde_json::Value`s. serde_json's map is ordered by key (the `preserve_order`
//! feature is off), so YAML rendered from them has sorted keys, as Go's sigs.k8s.io/yaml writes.

pub mod configmaps;
pub mod coredns;
pub(crate) mod goyaml;
pub mod kubeadm_certs;
pub mod kubelet;
pub mod node;
pub mod proxy;
mod proxy_zero;
pub mod rbac;
pub mod tokens;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ring::digest::{Context, SHA256};
use serde_json::{Map, Value, json};

/// One of our own values could not be rendered as YAML. serde_yaml does not fail on JSON values
/// or string-keyed mappings, but if it ever does, this is returned instead of an empty file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rendering {what} as YAML: {detail}")]
pub struct RenderError {
    /// The object ("ConfigMap kube-system/kubeadm-config", "the KubeletConfiguration").
    pub what: String,
    pub detail: String,
}

pub use crate::constants::BOOTSTRAP_GROUP;
/// Namespaces kubeadm writes to.
pub(crate) const KUBE_SYSTEM: &str = "kube-system";
pub(crate) const KUBE_PUBLIC: &str = "kube-public";
/// Annotation kubeadm puts on component-config ConfigMaps it generated itself.
pub(crate) const COMPONENT_CONFIG_HASH_ANNOTATION: &str = "kubeadm.kubernetes.io/component-config.hash";
/// API group of every RBAC roleRef and of User/Group subjects.
pub(crate) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// `metadata` with a name and, when not empty, a namespace.
pub(crate) fn meta(name: &str, namespace: &str) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(name));
    if !namespace.is_empty() {
        m.insert("namespace".into(), json!(namespace));
    }
    Value::Object(m)
}

/// A ConfigMap with string data.
pub(crate) fn config_map(name: &str, namespace: &str, data: &[(&str, &str)]) -> Value {
    // Inserts rather than collect(): each collect() into a map instantiates its own sort.
    let mut map = Map::new();
    for (k, v) in data {
        map.insert(k.to_string(), json!(v));
    }
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(name, namespace), "data": map})
}

/// kubeadm's ChecksumForConfigMap: SHA-256 over the `data` values concatenated in key order
/// (then `binaryData`, which we never use), as `sha256:<hex>`. A ConfigMap without data hashes
/// the empty input.
pub fn config_map_checksum(cm: &Value) -> String {
    let mut h = Context::new(&SHA256);
    if let Some(data) = cm["data"].as_object() {
        // serde_json's map iterates in key order, which is Go's sort.Strings order for ASCII keys.
        for v in data.values() {
            h.update(v.as_str().unwrap_or_default().as_bytes());
        }
    }
    format!("sha256:{}", crate::fsutil::hex(h.finish().as_ref()))
}

/// kubeadm's SignConfigMap: adds the component-config hash annotation.
pub(crate) fn sign_config_map(cm: &mut Value) {
    let sum = config_map_checksum(cm);
    if let Some(m) = cm.get_mut("metadata").and_then(Value::as_object_mut) {
        let ann = m.entry("annotations").or_insert_with(|| json!({}));
        if let Some(a) = ann.as_object_mut() {
            a.insert(COMPONENT_CONFIG_HASH_ANNOTATION.into(), json!(sum));
        }
    }
}

pub(crate) fn b64(bytes: impl AsRef<[u8]>) -> String {
    B64.encode(bytes)
}

pub(crate) fn group_subject(name: &str) -> Value {
    json!({"apiGroup": RBAC_GROUP, "kind": "Group", "name": name})
}

pub(crate) fn user_subject(name: &str) -> Value {
    json!({"apiGroup": RBAC_GROUP, "kind": "User", "name": name})
}

pub(crate) fn service_account_subject(name: &str, namespace: &str) -> Value {
    json!({"kind": "ServiceAccount", "name": name, "namespace": namespace})
}

pub(crate) fn role_ref(kind: &str, name: &str) -> Value {
    json!({"apiGroup": RBAC_GROUP, "kind": kind, "name": name})
}

/// One rule: `get` on the named ConfigMap(s)/Secret(s) in the core group.
pub(crate) fn get_rule(resource: &str, names: &[&str]) -> Value {
    json!({"apiGroups": [""], "resources": [resource], "resourceNames": names, "verbs": ["get"]})
}

pub(crate) fn service_account(name: &str, namespace: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(name, namespace)})
}

/// YAML of a JSON value: keys sorted (see the module doc), as kubeadm's marshalling writes them.
pub fn to_yaml(v: &Value) -> Result<String, RenderError> {
    serde_yaml::to_string(v).map_err(|e| RenderError { what: crate::kube::paths::describe(v), detail: e.to_string() })
}

/// A YAML value with every mapping's keys sorted (string keys by text; others by their YAML),
/// so passthrough documents render in the same order Go would write them.
pub(crate) fn sort_yaml(v: serde_yaml::Value) -> serde_yaml::Value {
    use serde_yaml::Value as Y;
    match v {
        Y::Mapping(m) => {
            let mut entries: Vec<(Y, Y)> = m.into_iter().map(|(k, v)| (k, sort_yaml(v))).collect();
            entries.sort_by_key(|(k, _)| yaml_key_text(k));
            Y::Mapping(entries.into_iter().collect())
        }
        Y::Sequence(s) => Y::Sequence(s.into_iter().map(sort_yaml).collect()),
        Y::Tagged(t) => {
            let t = *t;
            Y::Tagged(Box::new(serde_yaml::value::TaggedValue { tag: t.tag, value: sort_yaml(t.value) }))
        }
        other => other,
    }
}

fn yaml_key_text(k: &serde_yaml::Value) -> String {
    match k {
        serde_yaml::Value::String(s) => s.clone(),
        other => serde_yaml::to_string(other).unwrap_or_default(),
    }
}

/// Renders a mapping (a component config) as kubeadm writes it: sorted keys, Go's quoting.
pub(crate) fn mapping_yaml(m: &serde_yaml::Mapping) -> Result<String, RenderError> {
    let text = serde_yaml::to_string(&sort_yaml(serde_yaml::Value::Mapping(m.clone()))).map_err(|e| RenderError {
        what: format!("the {}", m.get("kind").and_then(serde_yaml::Value::as_str).unwrap_or("component configuration")),
        detail: e.to_string(),
    })?;
    Ok(goyaml::go_quotes(&text))
}

/// Sets `path` in a YAML mapping to `value` unless the user already gave a non-empty value there
/// (kubeadm's "set only if empty" component-config defaulting). Missing intermediate mappings are
/// created; an intermediate that is not a mapping is the user's (invalid) choice and is left alone.
pub(crate) fn default_at(m: &mut serde_yaml::Mapping, path: &[&str], value: serde_yaml::Value) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut cur = m;
    for p in parents {
        let entry = cur.entry((*p).into()).or_insert_with(|| serde_yaml::Value::Mapping(Default::default()));
        if entry.is_null() {
            *entry = serde_yaml::Value::Mapping(Default::default());
        }
        match entry.as_mapping_mut() {
            Some(next) => cur = next,
            None => return,
        }
    }
    let empty = match cur.get(*last) {
        None | Some(serde_yaml::Value::Null) => true,
        Some(serde_yaml::Value::String(s)) => s.is_empty(),
        Some(_) => false,
    };
    if empty {
        cur.insert((*last).into(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_concatenates_values_in_key_order() {
        // sha256("ab"): the value of key "a" then key "b", whatever order they were inserted in.
        let cm = json!({"data": {"b": "b", "a": "a"}});
        assert_eq!(config_map_checksum(&cm), "sha256:fb8e20fc2e4c3f248c60c39bd652f3c1347298bb977b8b4d5903b85055620603");
        assert_eq!(
            config_map_checksum(&json!({})),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn default_at_sets_only_empty_values() {
        let mut m: serde_yaml::Mapping = serde_yaml::from_str("a: {b: keep}\nc: ''\nd: null\ne: 5").unwrap();
        default_at(&mut m, &["a", "b"], "new".into());
        default_at(&mut m, &["a", "x"], "new".into());
        default_at(&mut m, &["c"], "new".into());
        default_at(&mut m, &["d"], "new".into());
        default_at(&mut m, &["e", "f"], "new".into());
        default_at(&mut m, &["g", "h", "i"], 1.into());
        assert_eq!(m["a"]["b"], "keep");
        assert_eq!(m["a"]["x"], "new");
        assert_eq!(m["c"], "new");
        assert_eq!(m["d"], "new");
        assert_eq!(m["e"], 5, "a non-mapping intermediate is left alone");
        assert_eq!(m["g"]["h"]["i"], 1);
    }

    #[test]
    fn yaml_keys_are_sorted() {
        let m: serde_yaml::Mapping = serde_yaml::from_str("z: 1\na: {y: 1, b: 2}\n").unwrap();
        assert_eq!(mapping_yaml(&m).unwrap(), "a:\n  b: 2\n  y: 1\nz: 1\n");
    }

    #[test]
    fn render_error_names_the_object() {
        let e =
            RenderError { what: crate::kube::paths::describe(&config_map("c", KUBE_SYSTEM, &[])), detail: "x".into() };
        assert_eq!(e.to_string(), "rendering ConfigMap kube-system/c as YAML: x");
        assert_eq!(to_yaml(&json!({"a": 1})).unwrap(), "a: 1\n");
    }
}

/// Builds resolved configs for the unit tests of every object module.
#[cfg(test)]
pub(crate) mod test_support {
    use crate::config::{HostFacts, InitConfig, parse_documents, resolve_init};

    /// A control-plane node `cp-1` at 10.0.0.10, Kubernetes v1.37.0.
    pub const BASE: &str = "\
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration:
  name: cp-1
localAPIEndpoint:
  advertiseAddress: 10.0.0.10
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.37.0
";

    /// BASE with `extra` appended to its ClusterConfiguration (it may start further documents).
    pub fn cfg(extra: &str) -> InitConfig {
        cfg_from(&format!("{BASE}{extra}"))
    }

    pub fn cfg_from(text: &str) -> InitConfig {
        let docs = parse_documents("test", text).unwrap();
        resolve_init("test", docs, &HostFacts { hostname: "cp-1".into(), default_address: None }).unwrap()
    }
}
