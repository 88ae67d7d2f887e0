//! Power cuts in first runs, against the real API server: on a fresh cluster per trial, init's
//! API phases (the post-kubelet stage, run for the first time once the kubelet runs the static
//! Pods) are SIGKILLed at a random point after a line of the phase aimed at, then init is rerun
//! and the cluster checked; then workers' first joins are killed the same way and rerun. Each
//! kill counts as landed only when the run was still going (not yet exited when killed, dead of
//! the SIGKILL) and had printed the line aimed at; too few landed kills fail the test.

use std::cell::RefCell;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use super::cluster::*;
use super::net::Netns;
use crate::common::*;

/// Where init's API run is aimed at: (phase, a line it prints as it goes), in run order.
const INIT_AIMS: &[(&str, &str)] = &[
    ("wait-control-plane", "[kubelet-check] Waiting for a healthy kubelet"),
    ("wait-control-plane", "[control-plane-check] Checking kube-apiserver"),
    ("upload-config", "[kubeconfig] Creating the kubeadm:cluster-admins ClusterRoleBinding"),
    ("upload-config", "[upload-config] Storing the configuration"),
    ("upload-config", "[upload-config] Applied Role kube-system/kubeadm:nodes-kubeadm-config"),
    ("mark-control-plane", "[mark-control-plane] Waiting for the Node"),
    ("bootstrap-token", "[bootstrap-token] Stored bootstrap token abcdef"),
    ("bootstrap-token", "[bootstrap-token] Creating the \"cluster-info\" ConfigMap"),
    ("kubelet-finalize/enable-client-cert-rotation", "[kubelet-finalize] Updating"),
    ("addon/coredns", "[addon] Applied ServiceAccount kube-system/coredns"),
    ("addon/kube-proxy", "[addon] Applied ServiceAccount kube-system/kube-proxy"),
];

/// Where a worker's join is aimed at.
const JOIN_AIMS: &[(&str, &str)] = &[
    ("discovery", "[discovery] Fetching cluster-info"),
    ("discovery", "[discovery] Cluster https://"),
    (
        "kubelet-start",
        "[kubelet-start] Writing kubelet configuration to file \"/var/lib/kubelet/instance-config.yaml\"",
    ),
    ("kubelet-start", "[kubelet-start] Writing kubelet environment file"),
    ("kubelet-start", "[kubelet-start] Sent certificate signing request"),
    ("kubelet-start", "[kubelet-start] Waiting for the certificate"),
];

/// The random part of a kill: up to this long after the line aimed at.
const JITTER_US: u64 = 30_000;
/// A join's: what follows its lines aimed at takes a few ms (a CSR approved and signed at
/// once), so kills 13–28 ms after them found it ended (7 of 12 in one CI run).
const JOIN_JITTER_US: u64 = 8_000;

/// How one aimed kill went.
pub(super) struct Shot {
    /// Still running when killed, and dead of the SIGKILL.
    pub landed: bool,
    delay_us: u64,
    /// The last line the run printed.
    last: String,
    /// Every line it printed, with the moment it arrived.
    pub lines: Vec<(Instant, String)>,
}

/// Runs kubestrap `args` in `netns`, reads its stderr through a pipe until a line holds
/// `marker` (bounded; failing at once when `health` does, or when the run ends without it),
/// waits a random 0–[`JITTER_US`] µs more and SIGKILLs it. Its stderr goes to `log`.
pub(super) fn kill_after(
    netns: &Netns,
    args: &[&str],
    (marker, jitter_us): (&str, u64),
    rng: &mut Lcg,
    health: &dyn Fn() -> Result<(), String>,
    log: &Path,
) -> Shot {
    let mut child = ChildGuard(
        netns
            .command(&*BIN)
            .args(args)
            .env_remove("JOURNAL_STREAM")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn kubestrap"),
    );
    let stderr = child.0.stderr.take().expect("stderr pipe");
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send((Instant::now(), line)).is_err() {
                break;
            }
        }
    });
    let mut lines: Vec<String> = Vec::new();
    let mut timed: Vec<(Instant, String)> = Vec::new();
    // Bounded, and long: an upgrade by image may wait for other control planes' rolls first.
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok((at, line)) => {
                let hit = line.contains(marker);
                timed.push((at, line.clone()));
                lines.push(line);
                if hit {
                    break;
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = child.0.wait().expect("wait kubestrap");
                panic!("kubestrap {args:?} ended ({status}) without printing {marker:?}:\n{}", lines.join("\n"));
            }
            Err(RecvTimeoutError::Timeout) => {
                if let Err(e) = health() {
                    panic!("while waiting for {marker:?} from kubestrap {args:?}: {e}\n{}", lines.join("\n"));
                }
                assert!(
                    Instant::now() < deadline,
                    "no {marker:?} from kubestrap {args:?} in 900 s:\n{}",
                    lines.join("\n")
                );
            }
        }
    }
    let delay_us = rng.next() % jitter_us;
    std::thread::sleep(Duration::from_micros(delay_us));
    let running = child.0.try_wait().expect("try_wait kubestrap").is_none();
    let _ = child.0.kill();
    let status = child.0.wait().expect("wait kubestrap");
    let landed = running && status.signal() == Some(9);
    // What it printed before it died (the pipe closes with it).
    while let Ok((at, line)) = rx.recv_timeout(Duration::from_secs(10)) {
        timed.push((at, line.clone()));
        lines.push(line);
    }
    let text = lines.join("\n");
    std::fs::write(log, &text).expect("write the killed run's log");
    assert!(!text.contains(SECRET), "kubestrap {args:?} logged the token secret:\n{text}");
    assert!(!text.contains("PRIVATE KEY-----"), "kubestrap {args:?} printed a private key");
    Shot { landed, delay_us, last: lines.last().cloned().unwrap_or_default(), lines: timed }
}

/// [`kill_after`] until a kill lands mid-run: each try that found the run ended is followed by
/// `reset` (the state put back as before the try) and another with half the jitter, at most
/// `tries` in all; a kill that never lands fails the test.
#[allow(clippy::too_many_arguments)]
pub(super) fn kill_landing(
    netns: &Netns,
    args: &[&str],
    (marker, jitter_us): (&str, u64),
    rng: &mut Lcg,
    health: &dyn Fn() -> Result<(), String>,
    log: &Path,
    tries: usize,
    reset: &dyn Fn(),
) -> Shot {
    let mut jitter = jitter_us;
    for t in 1..=tries {
        let shot = kill_after(netns, args, (marker, jitter), rng, health, log);
        if shot.landed {
            return shot;
        }
        println!("kill {t} of {tries} at {marker:?} came late ({}); again", shot.describe());
        reset();
        jitter = (jitter / 2).max(1);
    }
    panic!("no kill of kubestrap {args:?} at {marker:?} landed mid-run in {tries} tries");
}

/// `n` distinct aims out of `aims` (all of them, in a random order, first), at random.
fn pick(aims: &'static [(&'static str, &'static str)], n: usize, rng: &mut Lcg) -> Vec<(&'static str, &'static str)> {
    let mut order: Vec<usize> = (0..aims.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.next() as usize % (i + 1));
    }
    (0..n).map(|i| aims[order[i % aims.len()]]).collect()
}

fn report(what: &str, trial: usize, (phase, marker): (&str, &str), shot: &Shot) {
    println!("{what} trial {trial}: aimed at {phase} ({marker:?}) {}", shot.describe());
}

impl Shot {
    /// When it came, whether it landed, and the run's last line.
    pub(super) fn describe(&self) -> String {
        format!(
            "+{} µs: {}; its last line: {}",
            self.delay_us,
            if self.landed { "landed mid-run" } else { "the run had already ended" },
            self.last
        )
    }
}

/// The init fixture with a second, unnamed bootstrap token: init generates it and keeps it for
/// its reruns, so a killed first run must not leave a second generated token behind.
fn template() -> String {
    let fixture = fixture!("real/init.yaml");
    let head = "bootstrapTokens:\n";
    assert!(fixture.contains(head), "the init fixture lost its bootstrapTokens");
    fixture.replacen(head, &format!("{head}- description: generated by init and kept for its reruns\n"), 1)
}

/// Everything init's API phases make, once a rerun after a kill converged.
fn check_init(c: &Cluster, trial: usize) {
    for what in [
        &["-n", "kube-system", "configmap", "kubeadm-config"][..],
        &["-n", "kube-system", "configmap", "kubelet-config"],
        &["-n", "kube-system", "secret", "bootstrap-token-abcdef"],
        &["-n", "kube-public", "configmap", "cluster-info"],
        &["-n", "kube-public", "rolebinding", "kubeadm:bootstrap-signer-clusterinfo"],
        &["clusterrolebinding", "kubeadm:cluster-admins"],
        &["clusterrolebinding", "kubeadm:node-autoapprove-bootstrap"],
        &["-n", "kube-system", "deployment", "coredns"],
        &["-n", "kube-system", "service", "kube-dns"],
        &["-n", "kube-system", "daemonset", "kube-proxy"],
    ] {
        c.get(what);
    }
    // The named token and the one generated (once) and kept on disk: two, no more.
    let kept = std::fs::read_to_string(at(&c.root(), "/var/lib/kubestrap/bootstrap-token")).expect("the kept token");
    let kept_id = kept.trim().split('.').next().unwrap_or_default().to_string();
    let secrets = c.get(&["-n", "kube-system", "secrets", "--field-selector", "type=bootstrap.kubernetes.io/token"]);
    let mut names: Vec<String> = secrets["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|s| s["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect();
    names.sort();
    let mut want = vec!["bootstrap-token-abcdef".to_string(), format!("bootstrap-token-{kept_id}")];
    want.sort();
    assert_eq!(names, want, "trial {trial}: bootstrap tokens after a killed first run");
    let node = c.get(&["node", "cp-1"]);
    assert!(
        node["metadata"]["labels"].get("node-role.kubernetes.io/control-plane").is_some(),
        "trial {trial}: cp-1 not labelled: {}",
        node["metadata"]["labels"]
    );
    let taints = node["spec"]["taints"].to_string();
    assert!(taints.contains("node-role.kubernetes.io/control-plane"), "trial {trial}: cp-1 not tainted: {taints}");
    // kubelet-finalize ran to its end: kubelet.conf names the kubelet's rotating pair.
    let kubelet_conf = std::fs::read_to_string(at(&c.root(), "/etc/kubernetes/kubelet.conf")).expect("kubelet.conf");
    assert!(
        kubelet_conf.contains("client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem"),
        "trial {trial}: kubelet.conf:\n{kubelet_conf}"
    );
    c.wait_ready("cp-1");
    c.health().unwrap();
}

#[test]
fn sigkill_in_first_runs_of_api_phases_and_joins_then_rerun_converges() {
    let started = Instant::now();
    // One fresh cluster per aim (KILL_TRIALS, as for crash_safety's 50, sets a fifth of it).
    let init_trials = std::env::var("KILL_TRIALS").ok().and_then(|v| v.parse::<usize>().ok()).map(|n| n / 5);
    let init_trials = init_trials.unwrap_or(INIT_AIMS.len()).max(1);
    let rng = RefCell::new(Lcg(0x61_7069));
    let template = template();
    let mut landed = 0;
    let mut last = None;
    let aims = pick(INIT_AIMS, init_trials, &mut rng.borrow_mut());
    for (trial, aim) in aims.into_iter().enumerate() {
        // One cluster at a time: the last one goes before the next comes up.
        drop(last.take());
        let shot = RefCell::new(None);
        // A fresh control plane: init's on-disk run, the kubelet and static Pods up, then the
        // API run killed (its first), then the rerun that must finish.
        let c = Cluster::init_killed(&template, &|host, logs, init| {
            let health = || host.health();
            let log = logs.join("kubestrap-killed.err");
            *shot.borrow_mut() =
                Some(kill_after(&host.netns, init, (aim.1, JITTER_US), &mut rng.borrow_mut(), &health, &log));
            run_watched(&host.netns, init, logs, &health)
        });
        let shot = shot.into_inner().expect("the killed run");
        report("init", trial, aim, &shot);
        landed += usize::from(shot.landed);
        check_init(&c, trial);
        last = Some(c);
    }
    println!("init: {init_trials} first runs killed, {landed} landed mid-run ({:?} so far)", started.elapsed());
    assert!(
        landed * 2 >= init_trials,
        "too few kills of init's first API run landed mid-run ({landed} of {init_trials})"
    );

    // Workers' first joins, killed the same way on the last cluster; each rerun finds the same
    // pending CSR or the identity issued.
    let c = last.expect("a cluster");
    c.wait_cluster_info_signed();
    let (ep, hash) = (format!("{CP_ADDR}:{}", c.port), c.ca_hash());
    let join_trials = 2 * JOIN_AIMS.len();
    let mut join_landed = 0;
    let aims = pick(JOIN_AIMS, join_trials, &mut rng.borrow_mut());
    for (trial, aim) in aims.into_iter().enumerate() {
        let (node, w) = (format!("worker-{trial}"), Scratch::new(""));
        let root = w.root_str();
        let args = [
            "join",
            &ep,
            "--token",
            TOKEN,
            "--discovery-token-ca-cert-hash",
            &hash,
            "--node-name",
            &node,
            "--root",
            &root,
        ];
        let bare = c.bare_node(&node, 21 + trial);
        let before = c.bootstrap_csrs().len();
        let log = c.logs.with_file_name(format!("{node}-killed.err"));
        let shot = kill_after(&bare, &args, (aim.1, JOIN_JITTER_US), &mut rng.borrow_mut(), &|| c.health(), &log);
        report("join", trial, aim, &shot);
        join_landed += usize::from(shot.landed);
        let r = run_in(&bare, &args);
        assert_eq!(r.code(), 0, "join trial {trial}: the rerun after the kill:\n{}", r.stderr());
        let after = c.bootstrap_csrs().len();
        assert_eq!(after, before + 1, "join trial {trial}: the killed join and its rerun made one CSR between them");
        assert!(!at(&w.root(), "/etc/kubernetes/bootstrap-kubelet.conf").exists());
        assert!(!at(&w.root(), "/var/lib/kubelet/pki/kubelet-client.key.tmp").exists(), "join trial {trial}");
        assert!(std::fs::read_link(at(&w.root(), "/var/lib/kubelet/pki/kubelet-client-current.pem")).is_ok());
    }
    println!("join: {join_trials} first joins killed, {join_landed} landed mid-run");
    println!("took {:?}", started.elapsed());
    assert!(
        join_landed * 2 >= join_trials,
        "too few kills of a first join landed mid-run ({join_landed} of {join_trials})"
    );
    c.health().unwrap();
}
