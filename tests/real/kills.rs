//! Power cuts against the real API server: init's API phases and a worker's join SIGKILLed at
//! random points, each rerun converging; the killed joins leave at most one CSR for the node.

use std::process::Stdio;
use std::time::{Duration, Instant};

use super::cluster::*;
use crate::common::*;

/// Runs `args` in `netns` `trials` times, each SIGKILLed after a random part of `span`.
fn kill_at_random(netns: &super::net::Netns, args: &[&str], span: Duration, trials: u64, rng: &mut Lcg) {
    let span = span.as_micros() as u64;
    for _ in 0..trials {
        let mut child = ChildGuard(
            netns.command(BIN).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("spawn"),
        );
        std::thread::sleep(Duration::from_micros(rng.next() % span.max(1000)));
        let _ = child.0.kill();
        let _ = child.0.wait();
    }
}

#[test]
fn sigkill_during_api_phases_and_join_then_rerun_converges() {
    let trials: u64 = std::env::var("KILL_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(50) / 5;
    let c = Cluster::init("24h");
    let mut rng = Lcg(0x61_7069);
    let (config, root) = (c.scratch.config(), c.scratch.root_str());
    let init = ["init", "--config", config.as_str(), "--root", root.as_str()];
    let t = Instant::now();
    let r = run_in(&c.netns, &init);
    assert_eq!(r.code(), 0, "a rerun of a finished init:\n{}", r.stderr());
    kill_at_random(&c.netns, &init, t.elapsed(), trials, &mut rng);
    let r = run_in(&c.netns, &init);
    assert_eq!(r.code(), 0, "the rerun after {trials} kills:\n{}", r.stderr());
    for what in [
        &["-n", "kube-system", "secret", "bootstrap-token-abcdef"][..],
        &["-n", "kube-public", "configmap", "cluster-info"],
        &["-n", "kube-system", "daemonset", "kube-proxy"],
        &["clusterrolebinding", "kubeadm:cluster-admins"],
    ] {
        c.get(what);
    }
    c.wait_ready("cp-1");
    c.health().unwrap();

    // A worker's join, killed at random points; the rerun finds the same pending CSR or the
    // issued identity.
    c.wait_cluster_info_signed();
    let (ep, hash) = (format!("{CP_ADDR}:{}", c.port), c.ca_hash());
    let join = |root: &str, node: &str| {
        ["join", &ep, "--token", TOKEN, "--discovery-token-ca-cert-hash", &hash, "--node-name", node, "--root", root]
            .map(str::to_string)
    };
    let probe = Scratch::new("");
    let t = Instant::now();
    let args = join(&probe.root_str(), "probe-1");
    let r = run_in(&c.bare_node("probe-1", 29), &args.each_ref().map(String::as_str));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let span = t.elapsed();
    let before = c.bootstrap_csrs().len();
    let w = Scratch::new("");
    let args = join(&w.root_str(), "worker-1");
    let args = args.each_ref().map(String::as_str);
    let bare = c.bare_node("worker-1", 21);
    kill_at_random(&bare, &args, span, trials, &mut rng);
    let r = run_in(&bare, &args);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(c.bootstrap_csrs().len() <= before + 1, "killed joins reuse their key and CSR");
    assert!(!at(&w.root(), "/etc/kubernetes/bootstrap-kubelet.conf").exists());
    assert!(std::fs::read_link(at(&w.root(), "/var/lib/kubelet/pki/kubelet-client-current.pem")).is_ok());
}
