//! Join's waits on a fake clock, in-process against the double (the phases themselves run on the
//! real components, tests/real/workers.rs): "server down for 20 s" and a 5-minute deadline take
//! milliseconds and are judged by attempts and reasons, not by wall-clock windows.

use crate::cluster_e2e::{assert_no_credentials, check_joined_node, init_cluster, init_cluster_with, pipe};
use crate::common::*;

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kubestrap::clock::FakeClock;
use kubestrap::fsutil::NodeFs;
use kubestrap::join::{JoinContext, JoinFlags};

/// A worker join run phase by phase in-process (each run on its own clock, skipping some).
struct PhasedJoin {
    args: kubestrap::join::JoinArgs,
    fs: NodeFs,
}

impl PhasedJoin {
    fn new(endpoint: &str, hash: &str, name: &str, root: &Path) -> PhasedJoin {
        let flags = JoinFlags {
            endpoint: Some(endpoint.into()),
            token: Some(TOKEN.into()),
            discovery_token_ca_cert_hash: vec![hash.into()],
            node_name: Some(name.into()),
            root: root.to_path_buf(),
            ..JoinFlags::default()
        };
        PhasedJoin { args: kubestrap::join::resolve(&flags, &Default::default()).unwrap(), fs: NodeFs::new(root) }
    }

    fn run(&self, clock: &FakeClock, skip: &[&str]) -> kubestrap::error::Result<()> {
        let skip: Vec<String> = skip.iter().map(|s| s.to_string()).collect();
        kubestrap::phases::run_join(&JoinContext::new(&self.args, &self.fs, clock, None), &skip)
    }
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

/// kubelet-start meets a control plane that drops every connection for 20 s (an API server
/// restarting or overloaded, as under TCG in the VM suite's HA scenario): it waits, as the
/// kubelet's own TLS bootstrap would, and then joins.
#[test]
fn kubelet_start_waits_out_a_control_plane_that_drops_connections() {
    let front = free_port();
    let c = init_cluster_with(
        move |t| {
            t.replace(
                "kind: ClusterConfiguration\n",
                &format!("kind: ClusterConfiguration\ncontrolPlaneEndpoint: 127.0.0.1:{front}\n"),
            )
        },
        |_| {},
    );
    let back = c.port;
    // The endpoint: forwards to the server while `up`, otherwise accepts and hangs up.
    let up = Arc::new(AtomicBool::new(true));
    let listener = TcpListener::bind(("127.0.0.1", front)).unwrap();
    let state = up.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            if !state.load(Ordering::SeqCst) {
                drop(conn);
            } else if let Ok(b) = TcpStream::connect(("127.0.0.1", back)) {
                pipe(conn.try_clone().unwrap(), b.try_clone().unwrap());
                pipe(b, conn);
            }
        }
    });
    let w = tempfile::tempdir().unwrap();
    let j = PhasedJoin::new(&format!("127.0.0.1:{front}"), &c.ca_hash(), "worker-1", w.path());
    j.run(&FakeClock::new(), &["kubelet-start"]).unwrap();
    up.store(false, Ordering::SeqCst);
    let flag = up.clone();
    let clock = FakeClock::new().on_advance(move |t| {
        if t >= Duration::from_secs(20) {
            flag.store(true, Ordering::SeqCst);
        }
    });
    j.run(&clock, &["preflight", "discovery"]).unwrap();
    let waits = clock.waits();
    let endpoint = format!("https://127.0.0.1:{front}/");
    assert!(!waits.is_empty() && waits.iter().all(|w| w.why.contains(&endpoint)), "{waits:?}");
    assert!(clock.elapsed() >= Duration::from_secs(20), "{:?}", clock.elapsed());
    check_joined_node(w.path(), &c);
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

/// An API server that restarted after discovery answers 401 for the bootstrap token until its
/// Secret cache syncs (seen under TCG in the VM suite's HA scenario): kubelet-start waits it
/// out within `timeouts.tlsBootstrap`, and a token that stays unknown still ends the join.
#[test]
fn kubelet_start_waits_out_a_401_for_the_token_discovery_just_proved() {
    let c = init_cluster(|_| {});
    let secret_path = format!("/api/v1/namespaces/kube-system/secrets/bootstrap-token-{}", &TOKEN[..6]);
    let mut secret = c.double.object(&secret_path).expect("init created the token's Secret");
    let meta = secret["metadata"].as_object_mut().unwrap();
    for k in ["resourceVersion", "uid", "creationTimestamp"] {
        meta.remove(k);
    }
    for (back_after, joins) in [(Some(Duration::from_secs(30)), true), (None, false)] {
        let w = tempfile::tempdir().unwrap();
        let name = format!("worker-{}", u8::from(joins));
        let j = PhasedJoin::new(&format!("127.0.0.1:{}", c.port), &c.ca_hash(), &name, w.path());
        j.run(&FakeClock::new(), &["kubelet-start"]).unwrap();
        c.double.delete_object(&secret_path).unwrap();
        // The hook runs on the retry's thread; the Secret comes back through this thread.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let hook = std::sync::Mutex::new((tx, done_rx, false));
        let clock = FakeClock::new().on_advance(move |t| {
            let mut h = hook.lock().unwrap();
            if back_after.is_some_and(|b| t >= b) && !h.2 {
                h.2 = true;
                h.0.send(()).unwrap();
                h.1.recv().unwrap();
            }
        });
        let (result, waits) = std::thread::scope(|s| {
            let (double, secret) = (&c.double, secret.clone());
            s.spawn(move || {
                if rx.recv().is_ok() {
                    double.put_object(secret).unwrap();
                    done_tx.send(()).unwrap();
                }
            });
            let r = j.run(&clock, &["preflight", "discovery"]);
            let waits = clock.waits();
            drop(clock); // ends the helper thread when the Secret never came back
            (r, waits)
        });
        assert!(!waits.is_empty() && waits.iter().all(|w| w.why.contains("401")), "{waits:?}");
        if joins {
            result.unwrap_or_else(|e| panic!("the join gave up: {e}"));
            check_joined_node(w.path(), &c);
        } else {
            let e = result.expect_err("a token that stays unknown ends the join").to_string();
            assert!(e.contains("401") && e.contains("gave up after 300s"), "{e}");
            assert!(!w.path().join("etc/kubernetes/bootstrap-kubelet.conf").exists());
            c.double.put_object(secret.clone()).unwrap();
        }
    }
}
