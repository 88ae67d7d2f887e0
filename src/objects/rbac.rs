//! The RBAC objects of reference §5, as data. Every roleRef is in rbac.authorization.k8s.io;
//! User/Group subjects carry that apiGroup explicitly (it is what the API server defaults them to,
//! so the stored objects equal kubeadm's).

use serde_json::{Value, json};

use super::{BOOTSTRAP_GROUP, KUBE_PUBLIC, KUBE_SYSTEM, get_rule, group_subject, meta, role_ref, user_subject};
use crate::constants::{CLUSTER_ADMINS_GROUP, NODES_GROUP};

const RBAC_V1: &str = "rbac.authorization.k8s.io/v1";

/// Names of the objects below, for phases that log or check them.
pub(crate) const GET_NODES: &str = "kubeadm:get-nodes";
pub(crate) const KUBELET_BOOTSTRAP: &str = "kubeadm:kubelet-bootstrap";
pub(crate) const NODE_AUTOAPPROVE_BOOTSTRAP: &str = "kubeadm:node-autoapprove-bootstrap";
pub(crate) const NODE_AUTOAPPROVE_ROTATION: &str = "kubeadm:node-autoapprove-certificate-rotation";
pub(crate) const CLUSTER_INFO_ROLE: &str = "kubeadm:bootstrap-signer-clusterinfo";
pub(crate) const NODES_KUBEADM_CONFIG: &str = "kubeadm:nodes-kubeadm-config";
pub(crate) const KUBELET_CONFIG_ROLE: &str = "kubeadm:kubelet-config";
pub(crate) const CLUSTER_ADMINS: &str = "kubeadm:cluster-admins";
pub(crate) const APISERVER_KUBELET_CLIENT: &str = "kubeadm:apiserver-kubelet-client";
/// The built-in role for full kubelet API access, and the apiserver-kubelet-client cert's CN.
const KUBELET_API_ADMIN: &str = "system:kubelet-api-admin";
const APISERVER_KUBELET_CLIENT_CN: &str = "kube-apiserver-kubelet-client";

pub(crate) fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": RBAC_V1, "kind": "ClusterRole", "metadata": meta(name, ""), "rules": rules})
}

pub(crate) fn cluster_role_binding(name: &str, cluster_role: &str, subjects: Vec<Value>) -> Value {
    json!({
        "apiVersion": RBAC_V1,
        "kind": "ClusterRoleBinding",
        "metadata": meta(name, ""),
        "roleRef": role_ref("ClusterRole", cluster_role),
        "subjects": subjects,
    })
}

pub(crate) fn role(name: &str, namespace: &str, rules: Value) -> Value {
    json!({"apiVersion": RBAC_V1, "kind": "Role", "metadata": meta(name, namespace), "rules": rules})
}

/// A RoleBinding to the Role of the same name in the same namespace (kubeadm's only pattern).
pub(crate) fn role_binding(name: &str, namespace: &str, subjects: Vec<Value>) -> Value {
    json!({
        "apiVersion": RBAC_V1,
        "kind": "RoleBinding",
        "metadata": meta(name, namespace),
        "roleRef": role_ref("Role", name),
        "subjects": subjects,
    })
}

/// The bootstrap-token phase's RBAC, in kubeadm's order: get-nodes (ClusterRole, binding), then
/// kubelet-bootstrap, node-autoapprove-bootstrap, node-autoapprove-certificate-rotation, and
/// (kubeadm 1.37, AllowAPIServerToAccessKubeletAPI) apiserver-kubelet-client, which lets the
/// API server's kubelet client cert (no longer in kubeadm:cluster-admins) reach every kubelet.
/// Only init creates it; join does not.
pub fn bootstrap_token_rbac() -> Vec<Value> {
    vec![
        cluster_role(GET_NODES, json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}])),
        cluster_role_binding(GET_NODES, GET_NODES, vec![group_subject(BOOTSTRAP_GROUP)]),
        cluster_role_binding(KUBELET_BOOTSTRAP, "system:node-bootstrapper", vec![group_subject(BOOTSTRAP_GROUP)]),
        cluster_role_binding(
            NODE_AUTOAPPROVE_BOOTSTRAP,
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            vec![group_subject(BOOTSTRAP_GROUP)],
        ),
        cluster_role_binding(
            NODE_AUTOAPPROVE_ROTATION,
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            vec![group_subject(NODES_GROUP)],
        ),
        cluster_role_binding(
            APISERVER_KUBELET_CLIENT,
            KUBELET_API_ADMIN,
            vec![user_subject(APISERVER_KUBELET_CLIENT_CN)],
        ),
    ]
}

/// Lets anonymous joiners read `kube-public/cluster-info` (and nothing else).
pub fn cluster_info_rbac() -> Vec<Value> {
    vec![
        role(CLUSTER_INFO_ROLE, KUBE_PUBLIC, json!([get_rule("configmaps", &["cluster-info"])])),
        role_binding(CLUSTER_INFO_ROLE, KUBE_PUBLIC, vec![user_subject("system:anonymous")]),
    ]
}

/// The upload-config phase's RBAC: joiners (bootstrap group) and nodes may read `kubeadm-config`
/// and `kubelet-config`. Subject order follows kubeadm's code for each binding.
pub fn upload_config_rbac() -> Vec<Value> {
    vec![
        role(NODES_KUBEADM_CONFIG, KUBE_SYSTEM, json!([get_rule("configmaps", &["kubeadm-config"])])),
        role_binding(
            NODES_KUBEADM_CONFIG,
            KUBE_SYSTEM,
            vec![group_subject(BOOTSTRAP_GROUP), group_subject(NODES_GROUP)],
        ),
        role(KUBELET_CONFIG_ROLE, KUBE_SYSTEM, json!([get_rule("configmaps", &["kubelet-config"])])),
        role_binding(
            KUBELET_CONFIG_ROLE,
            KUBE_SYSTEM,
            vec![group_subject(NODES_GROUP), group_subject(BOOTSTRAP_GROUP)],
        ),
    ]
}

/// The upload-certs phase's RBAC: a joining control plane reads `kubeadm-certs` with its
/// bootstrap token (kubeadm's `kubeadm:kubeadm-certs` Role and RoleBinding).
pub(crate) fn kubeadm_certs_rbac() -> Vec<Value> {
    let name = crate::pki::copycerts::RBAC_NAME;
    vec![
        role(name, KUBE_SYSTEM, json!([get_rule("secrets", &[crate::pki::copycerts::SECRET_NAME])])),
        role_binding(name, KUBE_SYSTEM, vec![group_subject(BOOTSTRAP_GROUP)]),
    ]
}

/// `kubeadm:cluster-admins` → `cluster-admin`, so admin.conf (O=kubeadm:cluster-admins) is
/// admin without being in system:masters.
pub fn cluster_admins_binding() -> Value {
    cluster_role_binding(CLUSTER_ADMINS, "cluster-admin", vec![group_subject(CLUSTER_ADMINS_GROUP)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(objs: &[Value]) -> Vec<(String, String)> {
        objs.iter()
            .map(|o| (o["kind"].as_str().unwrap().to_string(), o["metadata"]["name"].as_str().unwrap().to_string()))
            .collect()
    }

    fn subjects(o: &Value) -> Vec<(String, String)> {
        o["subjects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["kind"].as_str().unwrap().to_string(), s["name"].as_str().unwrap().to_string()))
            .collect()
    }

    fn pair(k: &str, n: &str) -> (String, String) {
        (k.to_string(), n.to_string())
    }

    #[test]
    fn bootstrap_token_rbac_order_refs_and_subjects() {
        let objs = bootstrap_token_rbac();
        assert_eq!(
            names(&objs),
            vec![
                pair("ClusterRole", "kubeadm:get-nodes"),
                pair("ClusterRoleBinding", "kubeadm:get-nodes"),
                pair("ClusterRoleBinding", "kubeadm:kubelet-bootstrap"),
                pair("ClusterRoleBinding", "kubeadm:node-autoapprove-bootstrap"),
                pair("ClusterRoleBinding", "kubeadm:node-autoapprove-certificate-rotation"),
                pair("ClusterRoleBinding", "kubeadm:apiserver-kubelet-client"),
            ]
        );
        assert_eq!(objs[0]["rules"], json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]));
        let refs: Vec<&str> = objs[1..].iter().map(|o| o["roleRef"]["name"].as_str().unwrap()).collect();
        assert_eq!(
            refs,
            vec![
                "kubeadm:get-nodes",
                "system:node-bootstrapper",
                "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
                "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
                "system:kubelet-api-admin",
            ]
        );
        for o in &objs[1..] {
            assert_eq!(o["roleRef"]["kind"], "ClusterRole");
            assert_eq!(o["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
            assert!(o["metadata"].get("namespace").is_none(), "cluster-scoped");
        }
        for o in &objs[1..4] {
            assert_eq!(subjects(o), vec![pair("Group", "system:bootstrappers:kubeadm:default-node-token")]);
        }
        assert_eq!(subjects(&objs[4]), vec![pair("Group", "system:nodes")]);
        assert_eq!(subjects(&objs[5]), vec![pair("User", "kube-apiserver-kubelet-client")]);
        assert_eq!(objs[5]["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
    }

    #[test]
    fn cluster_info_rbac_is_anonymous_get_of_one_configmap() {
        let objs = cluster_info_rbac();
        assert_eq!(
            names(&objs),
            vec![
                pair("Role", "kubeadm:bootstrap-signer-clusterinfo"),
                pair("RoleBinding", "kubeadm:bootstrap-signer-clusterinfo"),
            ]
        );
        for o in &objs {
            assert_eq!(o["metadata"]["namespace"], "kube-public");
        }
        assert_eq!(
            objs[0]["rules"],
            json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cluster-info"], "verbs": ["get"]}])
        );
        assert_eq!(
            objs[1]["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kubeadm:bootstrap-signer-clusterinfo"})
        );
        assert_eq!(subjects(&objs[1]), vec![pair("User", "system:anonymous")]);
    }

    #[test]
    fn upload_config_rbac_subjects() {
        let objs = upload_config_rbac();
        assert_eq!(
            names(&objs),
            vec![
                pair("Role", "kubeadm:nodes-kubeadm-config"),
                pair("RoleBinding", "kubeadm:nodes-kubeadm-config"),
                pair("Role", "kubeadm:kubelet-config"),
                pair("RoleBinding", "kubeadm:kubelet-config"),
            ]
        );
        assert_eq!(objs[0]["rules"][0]["resourceNames"], json!(["kubeadm-config"]));
        assert_eq!(objs[2]["rules"][0]["resourceNames"], json!(["kubelet-config"]));
        let bootstrap = pair("Group", BOOTSTRAP_GROUP);
        let nodes = pair("Group", "system:nodes");
        assert_eq!(subjects(&objs[1]), vec![bootstrap.clone(), nodes.clone()]);
        assert_eq!(subjects(&objs[3]), vec![nodes, bootstrap]);
        for o in &objs {
            assert_eq!(o["metadata"]["namespace"], "kube-system");
        }
        assert_eq!(objs[1]["roleRef"]["name"], "kubeadm:nodes-kubeadm-config");
        assert_eq!(objs[3]["roleRef"]["name"], "kubeadm:kubelet-config");
    }

    #[test]
    fn cluster_admins() {
        let b = cluster_admins_binding();
        assert_eq!(b["kind"], "ClusterRoleBinding");
        assert_eq!(b["metadata"]["name"], "kubeadm:cluster-admins");
        assert_eq!(b["roleRef"]["name"], "cluster-admin");
        assert_eq!(b["roleRef"]["kind"], "ClusterRole");
        assert_eq!(subjects(&b), vec![pair("Group", "kubeadm:cluster-admins")]);
        assert_eq!(b["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
    }
}
