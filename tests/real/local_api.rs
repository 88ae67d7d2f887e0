//! init while the load balancer is not up yet (kubeadm 1.35+: init talks to its own API
//! server), with kube-proxy skipped for a kube-proxy-free CNI (and stored as disabled, as
//! kubeadm stores it), then added by its phase alone.

use super::cluster::*;

const PROXY: &[(&str, &str, &str)] = &[
    ("kube-system", "configmap", "kube-proxy"),
    ("kube-system", "serviceaccount", "kube-proxy"),
    ("", "clusterrolebinding", "kubeadm:node-proxier"),
    ("kube-system", "role", "kube-proxy"),
    ("kube-system", "rolebinding", "kube-proxy"),
    ("kube-system", "daemonset", "kube-proxy"),
];

const DNS: &[(&str, &str, &str)] = &[
    ("kube-system", "configmap", "coredns"),
    ("kube-system", "serviceaccount", "coredns"),
    ("", "clusterrole", "system:coredns"),
    ("", "clusterrolebinding", "system:coredns"),
    ("kube-system", "deployment", "coredns"),
    ("kube-system", "service", "kube-dns"),
];

#[test]
fn init_needs_no_load_balancer_and_skips_kube_proxy_alone() {
    // 192.0.2.99 is on the LAN, but nobody has it: every connection to it fails.
    let c = Cluster::init_with("24h", "controlPlaneEndpoint: 192.0.2.99:{port}\n", &["--skip-phases=addon/kube-proxy"]);
    let admin = std::fs::read_to_string(c.admin_conf()).unwrap();
    assert!(
        admin.contains(&format!("server: https://192.0.2.99:{}", c.port)),
        "admin.conf keeps the endpoint:\n{admin}"
    );

    let exists = |(ns, kind, name): &(&str, &str, &str)| {
        c.kubectl(&["get", "-n", if ns.is_empty() { "default" } else { ns }, kind, name]).0 == 0
    };
    for o in DNS {
        assert!(exists(o), "{o:?} was not created");
    }
    for o in PROXY {
        assert!(!exists(o), "{o:?} was created although addon/kube-proxy was skipped");
    }
    // As kubeadm's init: the skipped add-on is stored as disabled, so an upgrade leaves it out.
    let cm = c.get(&["-n", "kube-system", "configmap", "kubeadm-config"]);
    let cc = cm["data"]["ClusterConfiguration"].as_str().unwrap_or_default();
    assert!(cc.contains("proxy:\n  disabled: true\n"), "kubeadm-config:\n{cc}");
    assert!(!cc.contains("dns:\n  disabled"), "kubeadm-config:\n{cc}");

    // kubeadm's two-word spelling runs the sub-phase alone, still without the load balancer.
    let (config, root) = (c.scratch.config(), c.scratch.root_str());
    run_in(&c.netns, &["init", "phase", "addon", "kube-proxy", "--config", &config, "--root", &root]).ok();
    for o in PROXY {
        assert!(exists(o), "{o:?} was not created by `init phase addon kube-proxy`");
    }
    // A sub-phase kubeadm does not have is a usage error naming the phases.
    let r = run_in(&c.netns, &["init", "phase", "addon", "kube-dns", "--config", &config, "--root", &root]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("unknown init phase \"addon/kube-dns\""), "{}", r.stderr());
    assert!(r.stderr().contains("addon/coredns, addon/kube-proxy"), "{}", r.stderr());
}
