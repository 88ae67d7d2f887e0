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

/// `/api/v1` or `/apis/<group>/<version>`.
fn prefix(api_version: &str) -> String {
    if api_version.contains('/') { format!("/apis/{api_version}") } else { format!("/api/{api_version}") }
}

/// The collection URL an object is created in.
pub fn collection(obj: &Value) -> Result<String, String> {
    let api_version = obj["apiVersion"].as_str().ok_or("object has no apiVersion")?;
    let kind = obj["kind"].as_str().ok_or("object has no kind")?;
    let (_, plural, namespaced) =
        KINDS.iter().find(|(k, _, _)| *k == kind).ok_or_else(|| format!("unknown kind {kind}"))?;
    if *namespaced {
        let ns = obj["metadata"]["namespace"].as_str().ok_or_else(|| format!("{kind} has no namespace"))?;
        Ok(format!("{}/namespaces/{ns}/{plural}", prefix(api_version)))
    } else {
        Ok(format!("{}/{plural}", prefix(api_version)))
    }
}

/// The object's own URL.
pub fn object(obj: &Value) -> Result<String, String> {
    let name = obj["metadata"]["name"].as_str().ok_or("object has no name")?;
    Ok(format!("{}/{name}", collection(obj)?))
}

/// "ClusterRoleBinding kubeadm:get-nodes" or "ConfigMap kube-public/cluster-info".
pub fn describe(obj: &Value) -> String {
    let kind = obj["kind"].as_str().unwrap_or("object");
    let name = obj["metadata"]["name"].as_str().unwrap_or("?");
    match obj["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
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
        assert!(collection(&json!({"apiVersion": "v1", "kind": "Pod"})).is_err());
        assert_eq!(describe(&cm), "ConfigMap kube-public/cluster-info");
    }
}
