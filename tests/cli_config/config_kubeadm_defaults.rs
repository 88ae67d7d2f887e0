//! What kubeadm defaults, kubestrap defaults: release labels fall back offline, kubeadm's
//! timeout names decode and each wait takes its own timeout. (A bootstrap token entry without a
//! token gets a generated one, created, printed and joined with: tests/real/tokenless.rs.)

use crate::common::*;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

use kubestrap::clock::FakeClock;
use kubestrap::config::{HostFacts, parse_documents, resolve_init};
use kubestrap::fsutil::NodeFs;
use kubestrap::phases::{self, INIT_PHASES};

#[test]
fn release_labels_fall_back_to_kubestraps_version_offline() {
    for label in ["stable", "stable-1", "latest-1.37"] {
        let s = Scratch::new(&cluster_doc(&format!("kubernetesVersion: {label}\n")));
        let r = s.init(&[]).ok();
        assert!(r.stderr().contains("falling back to kubestrap's version v1.37.0"), "{label}: {}", r.stderr());
        let m = std::fs::read_to_string(s.path("/etc/kubernetes/manifests/kube-apiserver.yaml")).unwrap();
        assert!(m.contains("kube-apiserver:v1.37.0"), "{label}");
    }
}

#[test]
fn kubeadm_timeout_names_decode_and_camel_cased_ones_do_not() {
    let good = "timeouts:\n  kubernetesAPICall: 2m0s\n  etcdAPICall: 3m0s\n  kubeletHealthCheck: 30s\n  tlsBootstrap: 1m0s\n  \
                upgradeManifests: 5m0s\n  discovery: 1m0s\n  controlPlaneComponentHealthCheck: 1m0s\n";
    let docs = parse_documents("t", &format!("{INIT_HEAD}{good}")).unwrap();
    let t = docs.init.unwrap().timeouts.unwrap();
    assert_eq!((t.kubernetes_api_call.as_deref(), t.etcd_api_call.as_deref()), (Some("2m0s"), Some("3m0s")));

    let s = Scratch::new(&format!("{INIT_HEAD}timeouts:\n  kubernetesApiCall: 1m0s\n"));
    let r = s.init(&[]);
    assert_eq!(r.code(), 2);
    assert!(
        r.stderr().contains("timeouts") && r.stderr().contains("unknown field `kubernetesApiCall`"),
        "{}",
        r.stderr()
    );
}

/// Answers every HTTP request with 200 (a healthy kubelet's /healthz).
fn healthy_kubelet() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = c.read(&mut buf);
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    port
}

/// `wait-control-plane` on a fake clock: how long it waited before giving up, and why.
fn wait_control_plane(root: &Path, kubelet_port: u16, api_port: u16) -> (Duration, String) {
    let text = format!(
        "{INIT_HEAD}nodeRegistration:\n  name: cp-1\nlocalAPIEndpoint:\n  advertiseAddress: 127.0.0.1\n  bindPort: {api_port}\n\
         timeouts:\n  kubeletHealthCheck: 30s\n  controlPlaneComponentHealthCheck: 3m0s\n---\n\
         apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nhealthzPort: {kubelet_port}\n"
    );
    let host = HostFacts { hostname: "cp-1".into(), default_address: None };
    let cfg = resolve_init("t", parse_documents("t", &text).unwrap(), &host).unwrap();
    let fs = NodeFs::new(root);
    let clock = FakeClock::new();
    let ctx = kubestrap::init::context(&cfg, &fs, Vec::new(), None, &clock);
    let phase = phases::lookup(INIT_PHASES, "init", "wait-control-plane").unwrap();
    let err = phases::run_init_phase(&ctx, phase).unwrap_err();
    (clock.elapsed(), err.to_string())
}

#[test]
fn the_kubelet_wait_uses_kubelet_health_check_and_the_api_wait_its_own() {
    // Nothing listens on either port.
    let (dead_kubelet, dead_api) = (free_port(), free_port());
    let s = Scratch::new(&format!(
        "{INIT_HEAD}nodeRegistration:\n  name: cp-1\nlocalAPIEndpoint:\n  advertiseAddress: 127.0.0.1\n  bindPort: {dead_api}\n"
    ));
    s.init(&[]).ok(); // admin.conf for the API server wait

    let (waited, why) = wait_control_plane(&s.root(), dead_kubelet, dead_api);
    assert!(why.contains("kubelet"), "{why}");
    assert!(waited >= Duration::from_secs(30) && waited < Duration::from_secs(60), "kubelet wait took {waited:?}");

    let (waited, why) = wait_control_plane(&s.root(), healthy_kubelet(), dead_api);
    assert!(why.contains("control plane components") && why.contains("kube-apiserver:"), "{why}");
    assert!(
        waited >= Duration::from_secs(180) && waited < Duration::from_secs(210),
        "control-plane-check took {waited:?}"
    );
}
