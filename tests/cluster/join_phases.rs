//! Join as phases: each runs alone against the double, in order, reading what the one before left
//! on disk; a killed join resumes at the phase it was in; and the waits run on a fake clock, so
//! "server down for 20 s" and a 5-minute deadline take milliseconds and are judged by attempts
//! and reasons, not by wall-clock windows.

use crate::cluster_e2e::{Cluster, assert_no_credentials, assert_no_secret, check_joined_node, init_cluster, pipe};
use crate::common::*;

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kubestrap::clock::FakeClock;
use kubestrap::fsutil::NodeFs;
use kubestrap::join::{JoinContext, JoinFlags};

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

fn discovery_args(c: &Cluster, root: &Path) -> Vec<String> {
    [
        "--root",
        root.to_str().unwrap(),
        "--node-name",
        "worker-1",
        "--token",
        TOKEN,
        "--discovery-token-ca-cert-hash",
        &c.ca_hash(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn run(args: &[String]) -> Run {
    kubestrap(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

fn phase(name: &str, endpoint: Option<&str>, rest: &[String]) -> Run {
    let mut a = vec!["join".to_string(), "phase".into(), name.into()];
    a.extend(endpoint.map(str::to_string));
    a.extend_from_slice(rest);
    run(&a)
}

#[test]
fn each_join_phase_runs_alone_in_order() {
    let c = init_cluster(|_| {});
    let w = tempfile::tempdir().unwrap();
    let ep = format!("127.0.0.1:{}", c.port);
    let disc = discovery_args(&c, w.path());
    let local = vec!["--root".to_string(), w.path().display().to_string(), "--node-name".into(), "worker-1".into()];

    // kubelet-start before discovery: says which phase makes its input, exit 2, nothing written.
    let r = phase("kubelet-start", None, &local);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("run `kubestrap join phase discovery` first"), "{}", r.stderr());
    assert!(!w.path().join("etc").exists());
    assert_eq!(phase("nonesuch", None, &local).code(), 2);

    phase("preflight", None, &local).ok();
    assert!(w.path().join("var/lib/kubestrap/join-in-progress").exists());
    assert!(!w.path().join("etc/kubernetes").exists(), "preflight writes no node files");

    c.double.clear_request_log();
    let r = phase("discovery", Some(&ep), &disc).ok();
    assert_no_secret(&r);
    let boot_conf = w.path().join("etc/kubernetes/bootstrap-kubelet.conf");
    assert_eq!(mode(&boot_conf), 0o600);
    assert_eq!(mode(&w.path().join("etc/kubernetes/pki/ca.crt")), 0o644);
    assert!(!w.path().join("etc/kubernetes/kubelet.conf").exists());
    let log = c.double.request_log();
    assert!(log.iter().all(|l| l.path.ends_with("/configmaps/cluster-info")), "discovery only: {log:?}");

    // kubelet-start alone needs no discovery input: it reads bootstrap-kubelet.conf.
    c.double.clear_request_log();
    phase("kubelet-start", None, &local).ok();
    assert!(c.double.request_log().iter().all(|l| !l.path.ends_with("/cluster-info")));
    check_joined_node(w.path(), &c);
    // Again, once done: judged from disk, no request.
    c.double.clear_request_log();
    let r = phase("kubelet-start", None, &local).ok();
    assert!(r.stderr().contains("Already done"), "{}", r.stderr());
    assert!(c.double.request_log().is_empty());

    let listed = kubestrap(&["phases"]).ok().stdout();
    for p in
        ["join  preflight", "join  discovery", "join  kubelet-start", "init  addon/coredns", "init  addon/kube-proxy"]
    {
        assert!(listed.contains(p), "{listed}");
    }
}

#[test]
fn skip_phases_works_for_join_and_names_typos() {
    let c = init_cluster(|_| {});
    let w = tempfile::tempdir().unwrap();
    let mut a = vec!["join".to_string(), format!("127.0.0.1:{}", c.port)];
    a.extend(discovery_args(&c, w.path()));
    let mut typo = a.clone();
    typo.extend(["--skip-phases".into(), "discovery,kubelet-strat".into()]);
    let r = run(&typo);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("\"kubelet-strat\"") && r.stderr().contains("join phases are"), "{}", r.stderr());
    a.extend(["--skip-phases".into(), "kubelet-start".into()]);
    run(&a).ok();
    assert!(w.path().join("etc/kubernetes/bootstrap-kubelet.conf").exists());
    assert!(!w.path().join("etc/kubernetes/kubelet.conf").exists());
}

#[test]
fn a_killed_join_resumes_at_kubelet_start_with_the_same_csr() {
    let c = init_cluster(|cfg| cfg.auto_approve = false);
    let w = tempfile::tempdir().unwrap();
    let mut a = vec!["join".to_string(), format!("127.0.0.1:{}", c.port)];
    a.extend(discovery_args(&c, w.path()));
    let mut child =
        ChildGuard(Command::new(BIN).args(&a).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("spawn join"));
    // Killed while it waits for approval: its CSR is on the server, its key on disk.
    let key = w.path().join("var/lib/kubelet/pki/kubelet-client.key.tmp");
    let deadline = Instant::now() + Duration::from_secs(30);
    while (c.double.list(CSRS).is_empty() || !key.exists()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    assert_eq!(c.double.list(CSRS).len(), 1);
    assert!(w.path().join("etc/kubernetes/bootstrap-kubelet.conf").exists(), "discovery's product survives a kill");

    c.double.set_knobs(|k| k.auto_approve = true);
    c.double.clear_request_log();
    let r = run(&a).ok();
    assert_no_secret(&r);
    let err = r.stderr();
    assert!(err.contains("resuming an interrupted join") || err.contains("Skipped: --root"), "{err}");
    assert!(err.contains("Using the cluster an earlier, interrupted join verified"), "{err}");
    assert!(err.contains("Reusing the key of an earlier, unfinished TLS bootstrap"), "{err}");
    let log = c.double.request_log();
    assert!(log.iter().all(|l| !l.path.ends_with("/cluster-info")), "discovery was not redone: {log:?}");
    assert_eq!(c.double.list(CSRS).len(), 1, "the rerun found the same CSR");
    check_joined_node(w.path(), &c);
}

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
fn join_waits_for_a_server_that_is_down_for_20s() {
    let c = init_cluster(|_| {});
    let front = free_port();
    let back = c.port;
    // Nothing listens on `front` until virtual time reaches 20 s; then it forwards to the server.
    let up = Arc::new(AtomicBool::new(false));
    let flag = up.clone();
    let clock = FakeClock::new().on_advance(move |t| {
        if t >= Duration::from_secs(20) && !flag.swap(true, Ordering::SeqCst) {
            let l = TcpListener::bind(("127.0.0.1", front)).unwrap();
            std::thread::spawn(move || {
                for conn in l.incoming().flatten() {
                    if let Ok(up) = TcpStream::connect(("127.0.0.1", back)) {
                        pipe(conn.try_clone().unwrap(), up.try_clone().unwrap());
                        pipe(up, conn);
                    }
                }
            });
        }
    });
    let w = tempfile::tempdir().unwrap();
    join_with_clock(&format!("127.0.0.1:{front}"), w.path(), &c.ca_hash(), &clock).unwrap();
    let waits = clock.waits();
    // Backoff 1 s doubling to 5 s, ±25%: 20 s of refusals take 5 to 9 waits, each saying why.
    assert!((5..=9).contains(&waits.len()), "{waits:?}");
    assert!(waits.iter().all(|w| w.why.contains("connection refused")), "{waits:?}");
    assert!(waits.iter().all(|w| w.duration <= Duration::from_millis(6250)), "capped: {waits:?}");
    assert!(clock.elapsed() >= Duration::from_secs(20) && clock.elapsed() < Duration::from_secs(27));
    check_joined_node(w.path(), &c);
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
