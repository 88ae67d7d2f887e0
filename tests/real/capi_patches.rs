//! kubeadm's patches as Cluster API ships them (reference kubeadm-upgrade-patches.md §1.8), for
//! a worker: a `kubeletconfiguration` patch among the bootstrap data's cloud-init `write_files`
//! and its directory in the JoinConfiguration's `patches.directory`. `kubestrap boot` writes the
//! file, then the join reads the real cluster's KubeletConfiguration and patches it. (A control
//! plane's pre-kubelet stage needs no cluster: tests/cluster/userdata_patches.rs.)

use serde_yaml::Value;

use super::cluster::*;
use crate::common::*;

/// Giant Swarm's kubelet patch (tests/fixtures/patches/README.md): the node never runs it.
const KUBELET_PATCH: &str = fixture!("patches/real-giantswarm/kubeletconfiguration.yaml");

/// A cloud-init `write_files` entry as Cluster API renders one of `spec.files`.
fn write_files_entry(path: &str, content: &str) -> String {
    let body: String = content.lines().map(|l| format!("      {l}\n")).collect();
    format!("-   path: {path}\n    owner: root:root\n    permissions: '0644'\n    content: |\n{body}")
}

/// Cluster API's worker with the patch: the join writes the real cluster's
/// KubeletConfiguration with the patch applied, then the node's instance-config.
#[test]
fn capi_worker_write_files_patch_the_kubelet_config() {
    let c = Cluster::init("24h");
    c.wait_cluster_info_signed();
    let zero = format!("sha256:{}", "0".repeat(64));
    let ud = fixture!("user-data/capi-worker/user-data")
        .replace("127.0.0.1:6443", &format!("{CP_ADDR}:{}", c.port))
        .replace(&zero, &c.ca_hash())
        .replacen(
            "-   path: /run/kubeadm/kubeadm-join-config.yaml\n",
            &format!(
                "{}-   path: /run/kubeadm/kubeadm-join-config.yaml\n",
                write_files_entry("/etc/kubernetes/patches/kubeletconfiguration.yaml", KUBELET_PATCH)
            ),
            1,
        )
        .replacen(
            "          key: node.cluster.x-k8s.io/uninitialized\n",
            "          key: node.cluster.x-k8s.io/uninitialized\n      patches:\n        directory: /etc/kubernetes/patches\n",
            1,
        );
    assert!(ud.contains("directory: /etc/kubernetes/patches") && ud.contains(&c.ca_hash()));
    let w = Scratch::new("");
    seed(&w.root(), &ud, "worker-1");
    // The node is never run: the pre-kubelet stage ends with its identity.
    let r = run_in(&c.bare_node("worker-1", 1), &boot_args("pre-kubelet", &w.root_str()));
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    assert!(std::fs::read_link(at(&w.root(), "/var/lib/kubelet/pki/kubelet-client-current.pem")).is_ok());

    let text = std::fs::read_to_string(at(&w.root(), "/var/lib/kubelet/config.yaml")).expect("config.yaml");
    let config: serde_yaml::Mapping = serde_yaml::from_str(&text).expect("config.yaml");
    let patch: serde_yaml::Mapping = serde_yaml::from_str(KUBELET_PATCH).expect("the patch");
    let cm = c.get(&["-n", "kube-system", "configmap", "kubelet-config"]);
    let cluster: serde_yaml::Mapping =
        serde_yaml::from_str(cm["data"]["kubelet"].as_str().expect("kubelet")).expect("the cluster's config");
    // Every key the patch sets has its value; a map the cluster's config has too (the test
    // host's evictionHard) is merged, the patch's entries over the cluster's.
    for (k, v) in &patch {
        let want = match (cluster.get(k), v) {
            (Some(Value::Mapping(theirs)), Value::Mapping(ours)) => {
                let mut merged = theirs.clone();
                merged.extend(ours.clone());
                Value::Mapping(merged)
            }
            _ => v.clone(),
        };
        assert_eq!(config.get(k), Some(&want), "{k:?}");
    }
    // Everything else is the cluster's KubeletConfiguration, as the real API server holds it,
    // and this node's CRI socket.
    for (k, v) in &cluster {
        if patch.contains_key(k) || k == "containerRuntimeEndpoint" {
            continue;
        }
        assert_eq!(config.get(k), Some(v), "{k:?}");
    }
    assert_eq!(config["containerRuntimeEndpoint"], "unix:///var/run/containerd/containerd.sock");
    let extra: Vec<&Value> = config.keys().filter(|k| !cluster.contains_key(*k) && !patch.contains_key(*k)).collect();
    assert!(extra.is_empty(), "keys from nowhere: {extra:?}");
    let log = format!("{}{}", r.stdout(), r.stderr());
    let applied =
        "[patches] Applied patch of type \"application/strategic-merge-patch+json\" to target \"kubeletconfiguration\"";
    // The user's patch, then instance-config.yaml's (kubeadm logs both).
    assert_eq!(log.matches(applied).count(), 2, "{log}");
    assert!(log.contains("[patches] Found the following patch files: [kubeletconfiguration.yaml]"), "{log}");
}
