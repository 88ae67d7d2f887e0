//! init while the load balancer is not up yet (kubeadm 1.35+: init talks to its own API
//! server), with kube-proxy skipped for a kube-proxy-free CNI, then added by its phase alone.

use super::cluster::*;
use crate::common::*;

#[test]
fn init_needs_no_load_balancer_and_skips_kube_proxy_alone() {
    // 192.0.2.99 is on the LAN, but nobody has it: every connection to it fails.
    let c = Cluster::init_with("24h", "controlPlaneEndpoint: 192.0.2.99:{port}\n", &["--skip-phases=addon/kube-proxy"]);
    let admin = std::fs::read_to_string(c.admin_conf()).unwrap();
    assert!(
        admin.contains(&format!("server: https://192.0.2.99:{}", c.port)),
        "admin.conf keeps the endpoint:\n{admin}"
    );

    let exists = |args: &[&str]| c.kubectl(&[&["get"], args].concat()).0 == 0;
    assert!(exists(&["-n", "kube-system", "deployment", "coredns"]));
    assert!(exists(&["-n", "kube-system", "service", "kube-dns"]));
    assert!(!exists(&["-n", "kube-system", "daemonset", "kube-proxy"]), "kube-proxy was skipped");
    assert!(!exists(&["-n", "kube-system", "configmap", "kube-proxy"]), "kube-proxy was skipped");

    // kubeadm's two-word spelling runs the sub-phase alone, still without the load balancer.
    let (config, root) = (c.scratch.config(), c.scratch.root_str());
    run_in(&c.netns, &["init", "phase", "addon", "kube-proxy", "--config", &config, "--root", &root]).ok();
    assert!(exists(&["-n", "kube-system", "daemonset", "kube-proxy"]));
    assert!(exists(&["-n", "kube-system", "configmap", "kube-proxy"]));
}
