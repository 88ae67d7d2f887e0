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
    let mine = c.bootstrap_csrs();
    assert_eq!(mine.len(), 1, "one CSR for the worker: {mine:?}");
    check_worker_files(&c, &c.hosts[1].root);
}

/// The worker's files, as kubeadm 1.37 and the kubelet lay them out (the kubelet going Ready
/// on them proves they work; this pins the layout).
fn check_worker_files(c: &Cluster, root: &std::path::Path) {
    assert!(!at(root, "/etc/kubernetes/bootstrap-kubelet.conf").exists(), "bootstrap-kubelet.conf must be deleted");
    assert!(!at(root, "/var/lib/kubelet/pki/kubelet-client.key.tmp").exists());
    let target = std::fs::read_link(at(root, "/var/lib/kubelet/pki/kubelet-client-current.pem")).expect("symlink");
    assert!(target.to_string_lossy().starts_with("/var/lib/kubelet/pki/kubelet-client-"), "{target:?}");
    let real = at(root, target.to_str().unwrap());
    assert_eq!(mode(&real), 0o600);
    let (code, out, err) = sh(&format!(
        "openssl verify -CAfile {ca} {crt} && openssl x509 -in {crt} -noout -subject -ext extendedKeyUsage -nameopt RFC2253",
        ca = c.scratch.pki("ca.crt").display(),
        crt = real.display()
    ));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("CN=system:node:worker-1,O=system:nodes"), "{out}");
    assert!(out.contains("TLS Web Client Authentication"), "{out}");
    assert_eq!(
        std::fs::read(at(root, "/etc/kubernetes/pki/ca.crt")).unwrap(),
        std::fs::read(c.scratch.pki("ca.crt")).unwrap()
    );
    assert_eq!(mode(&at(root, "/etc/kubernetes/kubelet.conf")), 0o600);
    // config.yaml is the cluster's KubeletConfiguration with instance-config.yaml merged in.
    let instance = std::fs::read_to_string(at(root, "/var/lib/kubelet/instance-config.yaml")).unwrap();
    let socket = instance.trim().strip_prefix("containerRuntimeEndpoint: ").expect("one line").trim_matches('"');
    let cm = c.get(&["-n", "kube-system", "configmap", "kubelet-config"]);
    let mut want: serde_yaml::Mapping = serde_yaml::from_str(cm["data"]["kubelet"].as_str().unwrap()).unwrap();
    want.insert("containerRuntimeEndpoint".into(), socket.into());
    let config: serde_yaml::Mapping =
        serde_yaml::from_str(&std::fs::read_to_string(at(root, "/var/lib/kubelet/config.yaml")).unwrap()).unwrap();
    assert_eq!(config, want);
    let flags = std::fs::read_to_string(at(root, "/var/lib/kubelet/kubeadm-flags.env")).unwrap();
    assert!(
        !flags.contains("--container-runtime-endpoint") && !flags.contains("--pod-infra-container-image"),
        "{flags}"
    );
}
