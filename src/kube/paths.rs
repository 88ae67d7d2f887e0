//! REST paths for the kinds kubestrap creates: apiVersion + kind + namespace → URL.

use serde_json::Value;

/// (kind, plural, namespaced) for every kind we send.
const KINDS: &[(&str, &str, bool)] = &[
    ("Namespace", "namespaces", false),
    ("Node", "nodes", false),
    ("Secret", "secrets", true),
    ("ConfigMap", "configmaps", true),
    ("ServiceAccount", "serviceaccounts", true),
    ("Service", "services", true),
    ("Deployment", "deployments", true),
    ("DaemonSet", "daemonsets", true),
    ("Role", "roles", true),
    ("RoleBinding", "rolebindings", true),
    ("ClusterRole", "clusterroles", false),
    ("ClusterRoleBinding", "clusterrolebindings", false),
    ("CertificateSigningRequest", "certificatesigningrequests", false),
];

/// Why an object has no REST path: it lacks what the URL is made of. Names the object as far
/// as it is known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("{object} has no apiVersion")]
    NoApiVersion { object: String },
    #[error("{object} has no kind")]
    NoKind { object: String },
    #[error("unknown kind {kind} (of {object})")]
    UnknownKind { kind: String, object: String },
    #[error("{object} has no namespace")]
    NoNamespace { object: String },
    #[error("{object} has no name")]
    NoName { object: String },
}

/// `/api/v1` or `/apis/<group>/<version>`.
fn prefix(api_version: &str) -> String {
    if api_version.contains('/') { format!("/apis/{api_version}") } else { format!("/api/{api_version}") }
}

/// The collection URL an object is created in.
pub fn collection(obj: &Value) -> Result<String, PathError> {
    let object = || describe(obj);
    let api_version = obj["apiVersion"].as_str().ok_or_else(|| PathError::NoApiVersion { object: object() })?;
    let kind = obj["kind"].as_str().ok_or_else(|| PathError::NoKind { object: object() })?;
    let (_, plural, namespaced) = KINDS
        .iter()
        .find(|(k, _, _)| *k == kind)
        .ok_or_else(|| PathError::UnknownKind { kind: kind.to_string(), object: object() })?;
    if *namespaced {
        let ns = obj["metadata"]["namespace"].as_str().ok_or_else(|| PathError::NoNamespace { object: object() })?;
        Ok(format!("{}/namespaces/{ns}/{plural}", prefix(api_version)))
    } else {
        Ok(format!("{}/{plural}", prefix(api_version)))
    }
}

/// The object's own URL.
pub fn object(obj: &Value) -> Result<String, PathError> {
    let name = obj["metadata"]["name"].as_str().ok_or_else(|| PathError::NoName { object: describe(obj) })?;
    Ok(format!("{}/{name}", collection(obj)?))
}

/// "ClusterRoleBinding kubeadm:get-nodes" or "ConfigMap kube-public/cluster-info".
/// "ClusterConfiguration" for an object without metadata.
pub(crate) fn describe(obj: &Value) -> String {
    let kind = obj["kind"].as_str().unwrap_or("object");
    let meta = &obj["metadata"];
    match (meta["namespace"].as_str(), meta["name"].as_str()) {
        (None, None) => kind.to_string(),
        (Some(ns), name) => format!("{kind} {ns}/{}", name.unwrap_or("?")),
        (None, Some(name)) => format!("{kind} {name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cluster-info", "namespace": "kube-public"}});
        assert_eq!(object(&cm).unwrap(), "/api/v1/namespaces/kube-public/configmaps/cluster-info");
        let crb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "x"}});
        assert_eq!(collection(&crb).unwrap(), "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings");
        let e = collection(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})).unwrap_err();
        assert_eq!(e.to_string(), "unknown kind Pod (of Pod p)");
        let e = collection(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}})).unwrap_err();
        assert_eq!(e.to_string(), "Secret s has no namespace");
        assert_eq!(describe(&cm), "ConfigMap kube-public/cluster-info");
    }
}
