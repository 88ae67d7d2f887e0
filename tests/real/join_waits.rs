//! Join's waits on a fake clock against the real API server v1.37.2: the join runs in-process in
//! a node's namespace, and a fault-injecting front (front.rs) stands between it and the real
//! control plane. "Down for 20 s" and a 5-minute deadline take moments of real time and are
//! judged by attempts and reasons, not by wall-clock windows; every join that succeeds ends with
//! an identity the real controller-manager approved and signed.

use std::path::Path;
use std::time::Duration;

use kubestrap::clock::FakeClock;
use kubestrap::fsutil::NodeFs;
use kubestrap::join::{JoinContext, JoinFlags};

use super::cluster::*;
use super::front::{Front, Mode, in_netns};
use crate::common::*;

/// A worker's join, run whole or phase by phase in-process, each run on its own clock.
struct InProcessJoin {
    flags: JoinFlags,
}

impl InProcessJoin {
    fn new(c: &Cluster, name: &str, root: &Path) -> InProcessJoin {
        let flags = JoinFlags {
            endpoint: Some(format!("{CP_ADDR}:{}", c.port)),
            token: Some(TOKEN.into()),
            discovery_token_ca_cert_hash: vec![c.ca_hash()],
            node_name: Some(name.into()),
            discovery_timeout: Some(Duration::from_secs(300)),
            root: root.to_path_buf(),
            ..JoinFlags::default()
        };
        InProcessJoin { flags }
    }

    /// Runs the join in `netns` (its address and default route, and its sockets there),
    /// skipping the phases named.
    fn run(&self, netns: &super::net::Netns, clock: &FakeClock, skip: &[&str]) -> kubestrap::error::Result<()> {
        let skip: Vec<String> = skip.iter().map(|s| s.to_string()).collect();
        in_netns(netns, || {
            let args = kubestrap::join::resolve(&self.flags, &Default::default())?;
            let fs = NodeFs::new(&self.flags.root);
            kubestrap::phases::run_join(&JoinContext::new(&args, &fs, clock, None), &skip)
        })
    }
}

/// The node as a join leaves it, with the identity the real controller-manager issued: no
/// bootstrap file left, kubelet.conf on the rotating pair, the bundle chaining to the cluster's
/// CA as a client certificate of the node, which the real API server authenticates as the node;
/// one bootstrap CSR of this node, approved and issued; the kubelet's files from the cluster's
/// kubelet-config with this node's CRI socket merged in.
fn check_joined(c: &Cluster, root: &Path, name: &str) {
    let at = |p: &str| super::cluster::at(root, p);
    assert!(!at("/etc/kubernetes/bootstrap-kubelet.conf").exists(), "bootstrap-kubelet.conf must be deleted");
    assert!(!at("/var/lib/kubelet/pki/kubelet-client.key.tmp").exists());
    let target = std::fs::read_link(at("/var/lib/kubelet/pki/kubelet-client-current.pem")).expect("the symlink");
    assert!(target.to_string_lossy().starts_with("/var/lib/kubelet/pki/kubelet-client-"), "{target:?}");
    let bundle = at(target.to_str().expect("utf-8"));
    assert_eq!(mode(&bundle), 0o600);
    let ca = c.scratch.pki("ca.crt");
    let (code, out, err) = sh(&format!(
        "openssl verify -CAfile {ca} {b} && openssl x509 -in {b} -noout -subject -ext extendedKeyUsage -nameopt RFC2253",
        ca = ca.display(),
        b = bundle.display()
    ));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("CN=system:node:{name},O=system:nodes")), "{out}");
    assert!(out.contains("TLS Web Client Authentication"), "{out}");
    assert_eq!(std::fs::read(at("/etc/kubernetes/pki/ca.crt")).ok(), std::fs::read(&ca).ok());
    let kubelet_conf = std::fs::read_to_string(at("/etc/kubernetes/kubelet.conf")).expect("kubelet.conf");
    assert!(kubelet_conf.contains("client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem"));
    assert_eq!(mode(&at("/etc/kubernetes/kubelet.conf")), 0o600);
    let bundle = bundle.display().to_string();
    let empty = root.join("empty.kubeconfig");
    std::fs::write(&empty, "").expect("an empty kubeconfig");
    let (code, who, err) = capture(
        c.netns
            .command(super::bins::bin("kubectl"))
            .arg(format!("--kubeconfig={}", empty.display()))
            .arg(format!("--server=https://{CP_ADDR}:{}", c.port))
            .arg(format!("--certificate-authority={}", ca.display()))
            .arg(format!("--client-certificate={bundle}"))
            .arg(format!("--client-key={bundle}"))
            .args(["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"])
            .env_remove("KUBECONFIG"),
    );
    assert_eq!((code, who.as_str()), (0, format!("system:node:{name}").as_str()), "{err}");

    let mine: Vec<_> = c
        .bootstrap_csrs()
        .into_iter()
        .filter(|r| {
            let request = r["spec"]["request"].as_str().unwrap_or("");
            let (code, out, _) =
                sh(&format!("echo {request} | base64 -d | openssl req -noout -subject -nameopt RFC2253"));
            code == 0 && out.contains(&format!("CN=system:node:{name},"))
        })
        .collect();
    assert_eq!(mine.len(), 1, "{name}'s bootstrap CSRs: {mine:?}");
    assert!(mine[0]["status"]["certificate"].is_string(), "not issued: {}", mine[0]);

    // kubeadm 1.37: config.yaml is the cluster's KubeletConfiguration with instance-config.yaml
    // (this node's CRI endpoint) merged in; the flags carry neither.
    let socket = "unix:///var/run/containerd/containerd.sock";
    let instance = std::fs::read_to_string(at("/var/lib/kubelet/instance-config.yaml")).expect("instance-config");
    assert_eq!(instance, format!("containerRuntimeEndpoint: \"{socket}\"\n"));
    let cm = c.get(&["-n", "kube-system", "configmap", "kubelet-config"]);
    let mut want: serde_yaml::Mapping = serde_yaml::from_str(cm["data"]["kubelet"].as_str().expect("kubelet"))
        .expect("the cluster's KubeletConfiguration");
    want.insert("containerRuntimeEndpoint".into(), socket.into());
    let config = std::fs::read_to_string(at("/var/lib/kubelet/config.yaml")).expect("config.yaml");
    assert_eq!(serde_yaml::from_str::<serde_yaml::Mapping>(&config).expect("config.yaml"), want);
    let flags = std::fs::read_to_string(at("/var/lib/kubelet/kubeadm-flags.env")).expect("kubeadm-flags.env");
    assert!(flags.starts_with("KUBELET_KUBEADM_ARGS=\""), "{flags}");
    assert!(!flags.contains("--container-runtime-endpoint") && !flags.contains("--pod-infra-container-image"));
}

#[test]
fn join_waits_for_a_server_that_is_down_for_20s() {
    let c = Cluster::init("24h");
    c.wait_cluster_info_signed();
    let node = c.bare_node("worker-1", 1);
    // Every connection is refused until virtual time reaches 20 s; then it reaches the server.
    let front = Front::start(&node, &c.netns, c.port, Mode::Refuse);
    let switch = front.switch.clone();
    let clock = FakeClock::new().on_advance(move |t| {
        if t >= Duration::from_secs(20) {
            switch.set(Mode::Forward);
        }
    });
    let w = Scratch::new("");
    InProcessJoin::new(&c, "worker-1", &w.root()).run(&node, &clock, &[]).unwrap();
    let waits = clock.waits();
    // Backoff 200 ms doubling to 5 s, ±25%: 20 s of refusals take 7 to 10 waits, each saying why.
    assert!((7..=10).contains(&waits.len()), "{waits:?}");
    assert!(waits.iter().all(|w| w.why.contains("connection refused")), "{waits:?}");
    assert!(waits.iter().all(|w| w.duration <= Duration::from_millis(6250)), "capped: {waits:?}");
    assert!(clock.elapsed() >= Duration::from_secs(20) && clock.elapsed() < Duration::from_secs(27));
    check_joined(&c, &w.root(), "worker-1");
}

/// kubelet-start meets a control plane that drops every connection for 20 s (an API server
/// restarting or overloaded): it waits, as the kubelet's own TLS bootstrap would, and then joins.
#[test]
fn kubelet_start_waits_out_a_control_plane_that_drops_connections() {
    let c = Cluster::init("24h");
    c.wait_cluster_info_signed();
    let node = c.bare_node("worker-1", 1);
    let front = Front::start(&node, &c.netns, c.port, Mode::Forward);
    let w = Scratch::new("");
    let j = InProcessJoin::new(&c, "worker-1", &w.root());
    j.run(&node, &FakeClock::new(), &["kubelet-start"]).unwrap();
    front.switch.set(Mode::HangUp);
    let switch = front.switch.clone();
    let clock = FakeClock::new().on_advance(move |t| {
        if t >= Duration::from_secs(20) {
            switch.set(Mode::Forward);
        }
    });
    j.run(&node, &clock, &["preflight", "discovery"]).unwrap();
    let waits = clock.waits();
    let server = format!("https://{CP_ADDR}:{}/", c.port);
    assert!(!waits.is_empty() && waits.iter().all(|w| w.why.contains(&server)), "{waits:?}");
    assert!(clock.elapsed() >= Duration::from_secs(20), "{:?}", clock.elapsed());
    check_joined(&c, &w.root(), "worker-1");
}

/// The token's Secret as kubectl create takes it back (no server-set fields).
fn secret_manifest(c: &Cluster, name: &str) -> serde_json::Value {
    let mut secret = c.get(&["-n", "kube-system", "secret", name]);
    let meta = secret["metadata"].as_object_mut().expect("metadata");
    for k in ["resourceVersion", "uid", "creationTimestamp", "managedFields"] {
        meta.remove(k);
    }
    secret
}

/// The real API server's answer to the test token: 200 once it knows the token's Secret, 401
/// once it has forgotten it.
fn token_answer(c: &Cluster) -> String {
    let (_, out, _) = capture(c.netns.command("curl").args([
        "-sk",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-H",
        &format!("Authorization: Bearer {TOKEN}"),
        &format!("https://{CP_ADDR}:{}/version", c.port),
    ]));
    out
}

/// An API server that restarted after discovery answers 401 for the bootstrap token until its
/// Secret cache syncs: kubelet-start waits it out within `timeouts.tlsBootstrap`, and a token
/// that stays unknown still ends the join. The real API server forgets the token when its
/// Secret is deleted and knows it again when the Secret is back.
#[test]
fn kubelet_start_waits_out_a_401_for_the_token_discovery_just_proved() {
    let c = Cluster::init("24h");
    c.wait_cluster_info_signed();
    let name = format!("bootstrap-token-{}", &TOKEN[..6]);
    let secret = secret_manifest(&c, &name);
    let saved = c.scratch.path("/token-secret.json");
    std::fs::write(&saved, secret.to_string()).expect("save the Secret");
    let saved = saved.display().to_string();
    for (back_after, i) in [(Some(Duration::from_secs(30)), 1), (None, 2)] {
        let node_name = format!("worker-{i}");
        let node = c.bare_node(&node_name, i);
        let w = Scratch::new("");
        let j = InProcessJoin::new(&c, &node_name, &w.root());
        j.run(&node, &FakeClock::new(), &["kubelet-start"]).unwrap();
        let (code, _, err) = c.kubectl(&["-n", "kube-system", "delete", "secret", &name]);
        assert_eq!(code, 0, "{err}");
        c.wait("the API server to forget the token", || (token_answer(&c) == "401").then_some(()));
        // The Secret comes back (and the server knows the token again) before the retry that
        // crosses `back_after` returns.
        let restore = {
            let (cluster, saved) = (&c, saved.clone());
            move || {
                let (code, _, err) = cluster.kubectl(&["create", "-f", &saved]);
                assert_eq!(code, 0, "{err}");
                cluster
                    .wait("the API server to know the token again", || (token_answer(cluster) == "200").then_some(()));
            }
        };
        let (result, waits) = std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
            // The hook runs on the join's thread; the Secret comes back through this one.
            let hook = std::sync::Mutex::new((tx, done_rx, false));
            let clock = FakeClock::new().on_advance(move |t| {
                let mut h = hook.lock().unwrap_or_else(|e| e.into_inner());
                if back_after.is_some_and(|b| t >= b) && !h.2 {
                    h.2 = true;
                    h.0.send(()).expect("the restorer");
                    h.1.recv().expect("the Secret restored");
                }
            });
            s.spawn(move || {
                if rx.recv().is_ok() {
                    restore();
                    done_tx.send(()).expect("the hook waits");
                }
            });
            let r = j.run(&node, &clock, &["preflight", "discovery"]);
            let waits = clock.waits();
            drop(clock); // ends the restorer when the Secret never came back
            (r, waits)
        });
        assert!(!waits.is_empty() && waits.iter().all(|w| w.why.contains("401")), "{waits:?}");
        if back_after.is_some() {
            result.unwrap_or_else(|e| panic!("the join gave up: {e}"));
            check_joined(&c, &w.root(), &node_name);
        } else {
            let e = result.expect_err("a token that stays unknown ends the join").to_string();
            assert!(e.contains("401") && e.contains("gave up after 300s"), "{e}");
            assert!(!w.path("/etc/kubernetes/bootstrap-kubelet.conf").exists());
            assert!(!w.path("/etc/kubernetes/kubelet.conf").exists());
        }
    }
}
