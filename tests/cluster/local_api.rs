//! kubeadm 1.35+/1.37: init talks to its own API server (advertiseAddress:bindPort) with
//! admin.conf's credentials, and the kubelet's kubeconfig points there too, so a load balancer
//! that serves only once the first API server is up (cloud LBs, Cluster API) does not block init.

use crate::cluster_e2e::init_cluster_with;
use crate::common::*;

#[test]
fn init_uses_its_own_api_server_while_the_load_balancer_is_down() {
    // The controlPlaneEndpoint: a loopback address nothing listens on, a load balancer not up yet.
    let lb = format!("127.0.0.2:{}", free_port());
    let cpe = format!("kind: ClusterConfiguration\ncontrolPlaneEndpoint: {lb}\n");
    let c = init_cluster_with(
        |t| {
            // Short waits: a phase that still used the load balancer fails within the test's time.
            let timeouts = "kind: InitConfiguration\ntimeouts:\n  controlPlaneComponentHealthCheck: 20s\n  kubernetesAPICall: 20s\n";
            t.replace("kind: ClusterConfiguration\n", &cpe).replace("kind: InitConfiguration\n", timeouts)
        },
        |_| {},
    );
    let d = &c.double;
    let local = format!("https://127.0.0.1:{}", c.port);
    let server = |f: &str| {
        let bytes = std::fs::read(c.scratch.path(&format!("/etc/kubernetes/{f}"))).unwrap();
        kubestrap::kubeconfig::Kubeconfig::parse(&bytes).unwrap().current().unwrap().0.server.clone()
    };
    // The files keep the load balancer for users; the kubelet's points at its own API server.
    assert_eq!(server("admin.conf"), format!("https://{lb}"));
    assert_eq!(server("super-admin.conf"), format!("https://{lb}"));
    assert_eq!(server("kubelet.conf"), local);
    // Every API phase ran, through the local endpoint.
    let node = d.object("/api/v1/nodes/cp-1").unwrap();
    assert_eq!(node["spec"]["taints"][0]["key"], "node-role.kubernetes.io/control-plane");
    for path in [
        "/api/v1/namespaces/kube-system/configmaps/kubeadm-config",
        "/api/v1/namespaces/kube-system/secrets/bootstrap-token-abcdef",
        "/apis/apps/v1/namespaces/kube-system/deployments/coredns",
    ] {
        assert!(d.object(path).is_some(), "{path} was not created");
    }
    // What joining nodes get still names the load balancer.
    let ci = d.object("/api/v1/namespaces/kube-public/configmaps/cluster-info").unwrap();
    assert!(ci["data"]["kubeconfig"].as_str().unwrap().contains(&format!("server: https://{lb}")), "{ci}");
    assert!(c.init.stdout().contains(&format!("kubestrap join {lb} --token")), "{}", c.init.stdout());
    assert!(d.request_log().iter().any(|l| l.user == "kubernetes-admin"), "init's requests came as admin.conf's user");
}
