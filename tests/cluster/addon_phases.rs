//! kubeadm's addon sub-phases: `--skip-phases=addon/kube-proxy` (a kube-proxy-free CNI)
//! installs CoreDNS and nothing of kube-proxy; `init phase addon kube-proxy` then adds it alone.

use crate::cluster_e2e::init_cluster_flags;
use crate::common::*;

const PROXY: &[&str] = &[
    "/api/v1/namespaces/kube-system/configmaps/kube-proxy",
    "/api/v1/namespaces/kube-system/serviceaccounts/kube-proxy",
    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/kubeadm:node-proxier",
    "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/roles/kube-proxy",
    "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings/kube-proxy",
    "/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy",
];

const DNS: &[&str] = &[
    "/api/v1/namespaces/kube-system/configmaps/coredns",
    "/api/v1/namespaces/kube-system/serviceaccounts/coredns",
    "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:coredns",
    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:coredns",
    "/apis/apps/v1/namespaces/kube-system/deployments/coredns",
    "/api/v1/namespaces/kube-system/services/kube-dns",
];

#[test]
fn skipping_addon_kube_proxy_installs_coredns_only_and_the_phase_adds_it_later() {
    let c = init_cluster_flags(&["--skip-phases=addon/kube-proxy"], |t| t.to_string(), |_| {});
    for p in DNS {
        assert!(c.double.object(p).is_some(), "{p} was not created");
    }
    for p in PROXY {
        assert!(c.double.object(p).is_none(), "{p} was created although addon/kube-proxy was skipped");
    }
    assert!(!c.init.stderr().contains("daemonsets/kube-proxy"), "{}", c.init.stderr());

    // kubeadm's spelling of one sub-phase: two words.
    let (config, root) = (c.scratch.config(), c.scratch.root_str());
    let r = kubestrap(&["init", "phase", "addon", "kube-proxy", "--config", &config, "--root", &root]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    for p in PROXY {
        assert!(c.double.object(p).is_some(), "{p} was not created by `init phase addon kube-proxy`");
    }

    // A sub-phase kubeadm does not have is a usage error naming the phases.
    let r = kubestrap(&["init", "phase", "addon", "kube-dns", "--config", &config, "--root", &root]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("unknown init phase \"addon/kube-dns\""), "{}", r.stderr());
    assert!(r.stderr().contains("addon/coredns, addon/kube-proxy"), "{}", r.stderr());
}
