//! Power cuts and overlapping runs: SIGKILL `init` at many points, rerun, and the node converges
//! to the same valid state (the first CA is never replaced, no temp files, every chain verifies);
//! two runs on one root never interleave.

use crate::common::*;

use crate::common::needs::{Need, need};
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

fn spawn_init(s: &Scratch, full: bool) -> std::process::Child {
    let config = s.config();
    let root = s.root_str();
    let mut args = vec!["init", "--config", config.as_str(), "--root", root.as_str()];
    if !full {
        args.insert(1, "--on-disk-only");
    }
    Command::new(&*BIN).args(&args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("spawn kubestrap")
}

fn fingerprint(p: &Path) -> Option<String> {
    let (code, out, _) = sh(&format!("openssl x509 -in {} -noout -fingerprint -sha256 2>/dev/null", p.display()));
    (code == 0).then(|| out.trim().to_string())
}

/// Every chain verifies, keys match, and no temp file is left anywhere under the root.
fn assert_valid(s: &Scratch) {
    let pki = s.pki("");
    let pairs = [
        ("ca.crt", "apiserver.crt"),
        ("ca.crt", "apiserver-kubelet-client.crt"),
        ("front-proxy-ca.crt", "front-proxy-client.crt"),
        ("etcd/ca.crt", "etcd/server.crt"),
        ("etcd/ca.crt", "etcd/peer.crt"),
        ("etcd/ca.crt", "etcd/healthcheck-client.crt"),
        ("etcd/ca.crt", "apiserver-etcd-client.crt"),
    ];
    for (ca, leaf) in pairs {
        openssl_verify(&pki.join(ca), &pki.join(leaf)).unwrap_or_else(|e| panic!("{leaf}: {e}"));
    }
    for f in snapshot(&s.root()) {
        let name = f.0.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!kubestrap::fsutil::is_temp_name(&name), "temp file left: {}", f.0.display());
    }
    for m in ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"] {
        assert!(s.path(&format!("/etc/kubernetes/manifests/{m}.yaml")).exists());
    }
}

#[test]
fn sigkill_at_random_points_then_rerun_converges() {
    need!(Need::tool("openssl"));
    let trials: u64 = std::env::var("KILL_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let mut rng = Lcg(0x6b75_6265);
    let mut killed_mid_run = 0;
    // Aim the kills inside a run: measure how long an undisturbed one takes (the fastest of a
    // few, as other tests may load the machine at first).
    let span = (0..3)
        .map(|_| {
            let probe = Scratch::new(BASE_CONFIG);
            let t = Instant::now();
            probe.init(&[]).ok();
            t.elapsed().as_micros().max(1000) as u64
        })
        .min()
        .unwrap_or(50_000);
    let mut span = span;
    println!("an undisturbed run takes {span} µs");
    for trial in 0..trials {
        let s = Scratch::new(BASE_CONFIG);
        let ca = s.pki("ca.crt");
        let mut first_ca = None;
        // Kill up to three times at random instants before letting a run finish.
        for _ in 0..3 {
            let mut child = spawn_init(&s, false);
            std::thread::sleep(Duration::from_micros(rng.next() % span));
            if child.try_wait().unwrap().is_none() {
                killed_mid_run += 1;
            } else {
                // It finished first: aim earlier next time.
                span = (span * 3 / 4).max(1000);
            }
            let _ = child.kill();
            let _ = child.wait();
            if first_ca.is_none() {
                first_ca = fingerprint(&ca);
            }
        }
        let r = s.init(&[]);
        assert_eq!(r.code(), 0, "trial {trial}: rerun after kills failed:\n{}", r.stderr());
        if let Some(fp) = &first_ca {
            assert_eq!(fingerprint(&ca).as_ref(), Some(fp), "trial {trial}: the CA was regenerated");
        }
        assert_valid(&s);
    }
    println!("{trials} trials, {killed_mid_run} kills landed mid-run");
    assert!(killed_mid_run as u64 >= trials / 2, "too few kills landed mid-run ({killed_mid_run}) to mean anything");
}

/// The lines a child prints on stderr, as they come (a thread reads the pipe to its end).
fn stderr_lines(child: &mut Child) -> Receiver<String> {
    let stderr = child.stderr.take().expect("stderr piped");
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Reads `rx` into `seen` until a line holds `needle` (true), or the pipe closes (false); a
/// minute at most.
fn read_until(rx: &Receiver<String>, needle: &str, seen: &mut Vec<String>) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                let hit = line.contains(needle);
                seen.push(line);
                if hit {
                    return true;
                }
            }
            Err(RecvTimeoutError::Disconnected) => return false,
            Err(RecvTimeoutError::Timeout) => break,
        }
    }
    panic!("no {needle:?} within a minute; so far:\n{}", seen.join("\n"));
}

/// Stops or continues a process (`STOP`, `CONT`).
fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill").args(["-s", sig, &child.id().to_string()]).status().expect("kill");
    assert!(status.success(), "kill -s {sig} {}", child.id());
}

#[test]
fn two_concurrent_runs_on_one_root_do_not_interleave() {
    need!(Need::tool("openssl"));
    let s = Scratch::new(BASE_CONFIG);
    let config = s.config();
    let root = s.root_str();
    let args = ["init", "--on-disk-only", "--config", config.as_str(), "--root", root.as_str()];
    let spawn = || ChildGuard(Command::new(&*BIN).args(args).stderr(Stdio::piped()).spawn().expect("spawn kubestrap"));
    // The first run takes the root's lock before its first phase: once it says it generates
    // the CA it holds the lock. Stopped there (SIGSTOP keeps the lock held), it is a run in the
    // middle of its work whatever the machine's load, for as long as the second needs to find it.
    let mut first = spawn();
    let a_rx = stderr_lines(&mut first.0);
    let (mut a_err, mut b_err) = (Vec::new(), Vec::new());
    assert!(read_until(&a_rx, "[certs] Generating \"ca\"", &mut a_err), "the first run:\n{}", a_err.join("\n"));
    signal(&first.0, "STOP");
    let mut second = spawn();
    let b_rx = stderr_lines(&mut second.0);
    let waits = read_until(&b_rx, "another kubestrap run holds", &mut b_err);
    signal(&first.0, "CONT");
    assert!(waits, "the second run must say it waits for the first:\n{}", b_err.join("\n"));
    let (a, b) = (first.0.wait().expect("wait"), second.0.wait().expect("wait"));
    for (rx, seen) in [(&a_rx, &mut a_err), (&b_rx, &mut b_err)] {
        while let Ok(line) = rx.recv_timeout(Duration::from_secs(10)) {
            seen.push(line);
        }
    }
    let (a_err, b_err) = (a_err.join("\n"), b_err.join("\n"));
    assert!(a.success() && b.success(), "{a}: {a_err}\n{b}: {b_err}");
    // The second ran only after the first had finished: it made nothing, and reused all of it.
    assert!(b_err.contains("the other run finished; continuing"), "{b_err}");
    assert!(
        b_err.contains("Using existing ca certificate authority"),
        "the second run reuses the first's work:\n{b_err}"
    );
    assert!(!b_err.contains("Generating"), "the second run generated what the first had made:\n{b_err}");
    assert_valid(&s);
}

#[test]
fn sigkill_at_each_phase_boundary_then_rerun_converges() {
    need!(Need::tool("openssl"));
    let markers = [
        "[certs] Generating \"ca\"",
        "[certs] Generating \"etcd/server\"",
        "[kubeconfig] Writing",
        "[manifests] Writing",
        "[kubelet-start]",
    ];
    let mut landed = 0;
    for marker in markers {
        let s = Scratch::new(BASE_CONFIG);
        let config = s.config();
        let root = s.root_str();
        let mut child = ChildGuard(
            Command::new(&*BIN)
                .args(["init", "--on-disk-only", "--config", config.as_str(), "--root", root.as_str()])
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn kubestrap"),
        );
        let mut seen = Vec::new();
        let rx = stderr_lines(&mut child.0);
        // A run that never prints the marker fails the test: it would otherwise pass unkilled.
        assert!(read_until(&rx, marker, &mut seen), "the run never printed {marker:?}:\n{}", seen.join("\n"));
        let running = child.0.try_wait().expect("try_wait").is_none();
        let _ = child.0.kill();
        let status = child.0.wait().expect("wait");
        assert!(
            running && status.signal() == Some(9),
            "killed at {marker:?}: the run had already ended ({status}):\n{}",
            seen.join("\n")
        );
        landed += 1;
        let first_ca = fingerprint(&s.pki("ca.crt"));
        s.init(&[]).ok();
        if let Some(fp) = first_ca {
            assert_eq!(fingerprint(&s.pki("ca.crt")), Some(fp), "killed at {marker}: CA regenerated");
        }
        assert_valid(&s);
    }
    println!("{landed} of {} phase-boundary kills landed mid-run", markers.len());
    assert_eq!(landed, markers.len());
}
