//! init then join against the real components: the control plane runs from kubestrap's
//! manifests, both kubelets run from kubestrap's files, both Nodes go Ready, the objects read
//! back with the real kubectl.

use super::cluster::*;
use crate::common::*;

#[test]
fn init_and_join_bring_up_real_ready_nodes() {
    let mut c = Cluster::init("24h");
    let root = c.root();
    // Every probe in kubestrap's manifests answers on the real components.
    c.wait_probes(0);

    // The control plane's kubelet talks to its own API server (kubeadm 1.35+).
    let kubelet_conf = std::fs::read_to_string(at(&root, "/etc/kubernetes/kubelet.conf")).unwrap();
    assert!(kubelet_conf.contains(&format!("server: https://{CP_ADDR}:{}", c.port)), "{kubelet_conf}");

    // Labels and taints from mark-control-plane, as the real API server stored them.
    let node = c.get(&["node", "cp-1"]);
    assert_eq!(node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"], "");
    assert_eq!(node["metadata"]["labels"]["node.kubernetes.io/exclude-from-external-load-balancers"], "");
    let taints = node["spec"]["taints"].as_array().expect("taints");
    assert!(
        taints.iter().any(|t| t["key"] == "node-role.kubernetes.io/control-plane" && t["effect"] == "NoSchedule"),
        "{taints:?}"
    );

    // kubeadm's ConfigMaps, readable as the real kubeadm reads them.
    for cm in ["kubeadm-config", "kubelet-config", "kube-proxy", "coredns"] {
        c.get(&["-n", "kube-system", "configmap", cm]);
    }
    // The controller-manager's bootstrap signer signs cluster-info for the token (join needs it).
    c.wait_cluster_info_signed();

    // A worker joins through the real bootstrap signer, approver and signer.
    let run = c.join("worker-1", 21, fixture!("real/join.yaml"), &[]);
    assert_eq!(run.code(), 0, "join failed:\n{}\n{}", run.stdout(), run.stderr());
    c.wait_ready("worker-1");
    let csrs = c.get(&["csr"]);
    let mine: Vec<_> = csrs["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["spec"]["username"].as_str().is_some_and(|u| u.starts_with("system:bootstrap:")))
        .collect();
    assert_eq!(mine.len(), 1, "one CSR for the worker: {csrs}");
    let flags = std::fs::read_to_string(at(&c.hosts[1].root, "/var/lib/kubelet/kubeadm-flags.env")).unwrap();
    assert!(!flags.contains("--pod-infra-container-image"), "{flags}");
}
