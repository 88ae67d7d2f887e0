//! Join's deadline on a fake clock, in-process, with no server at all (the waits that end in a
//! join run against the real API server behind a fault-injecting front:
//! tests/real/join_waits.rs), and the phase list.

use crate::cluster_e2e::assert_no_credentials;
use crate::common::*;

use std::path::Path;
use std::time::Duration;

use kubestrap::clock::FakeClock;
use kubestrap::fsutil::NodeFs;
use kubestrap::join::{JoinContext, JoinFlags};

/// Joins in-process through the library with a fake clock.
fn join_with_clock(endpoint: &str, root: &Path, hash: &str, clock: &FakeClock) -> kubestrap::error::Result<()> {
    let flags = JoinFlags {
        endpoint: Some(endpoint.into()),
        token: Some(TOKEN.into()),
        discovery_token_ca_cert_hash: vec![hash.into()],
        node_name: Some("worker-1".into()),
        discovery_timeout: Some(Duration::from_secs(300)),
        root: root.to_path_buf(),
        ..JoinFlags::default()
    };
    let args = kubestrap::join::resolve(&flags, &Default::default())?;
    let fs = NodeFs::new(root);
    kubestrap::phases::run_join(&JoinContext::new(&args, &fs, clock, None), &[])
}

#[test]
fn join_stops_at_the_deadline_when_the_server_never_comes() {
    let clock = FakeClock::new();
    let w = tempfile::tempdir().unwrap();
    let pin = "sha256:345959acb2c3b2feb87d281961c893f62a314207ef02599f1cc4a5fb255480b3";
    let e = join_with_clock(&format!("127.0.0.1:{}", free_port()), w.path(), pin, &clock).unwrap_err();
    assert_eq!(e.kind.exit_code(), 1);
    assert!(e.message.contains("phase discovery") && e.message.contains("gave up after 300s"), "{}", e.message);
    assert!(e.message.contains("connection refused"), "{}", e.message);
    let waits = clock.waits();
    // 5 minutes at a ≤ 6.25 s cap: at least 48 waits, and exactly the deadline, no more.
    assert!(waits.len() >= 48, "{}", waits.len());
    assert_eq!(clock.elapsed(), Duration::from_secs(300));
    assert_no_credentials(w.path());
}

#[test]
fn the_phase_list_names_join_and_init_phases() {
    let listed = kubestrap(&["phases"]).ok().stdout();
    for p in
        ["join  preflight", "join  discovery", "join  kubelet-start", "init  addon/coredns", "init  addon/kube-proxy"]
    {
        assert!(listed.contains(p), "{listed}");
    }
}
