//! Power cuts and overlapping runs: SIGKILL `init` at many points, rerun, and the node converges
//! to the same valid state (the first CA is never replaced, no temp files, every chain verifies);
//! two runs on one root never interleave.

use crate::common::*;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn spawn_init(s: &Scratch, full: bool) -> std::process::Child {
    let config = s.config();
    let root = s.root_str();
    let mut args = vec!["init", "--config", config.as_str(), "--root", root.as_str()];
    if !full {
        args.insert(1, "--on-disk-only");
    }
    Command::new(BIN).args(&args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("spawn kubestrap")
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
    require_tool("openssl");
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

#[test]
fn two_concurrent_runs_on_one_root_do_not_interleave() {
    require_tool("openssl");
    // RSA keys make the first run slow enough for the second to find it running.
    let s = Scratch::new(&format!("{BASE_CONFIG}encryptionAlgorithm: RSA-2048\n"));
    let config = s.config();
    let root = s.root_str();
    let args = ["init", "--on-disk-only", "--config", config.as_str(), "--root", root.as_str()];
    let first = Command::new(BIN).args(args).stderr(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(150));
    let started = Instant::now();
    let second = Command::new(BIN).args(args).stderr(Stdio::piped()).spawn().unwrap();
    let a = first.wait_with_output().unwrap();
    let b = second.wait_with_output().unwrap();
    assert!(
        a.status.success() && b.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&a.stderr),
        String::from_utf8_lossy(&b.stderr)
    );
    let b_err = String::from_utf8_lossy(&b.stderr);
    assert!(b_err.contains("another kubestrap run holds"), "the second run must say it waits:\n{b_err}");
    assert!(
        b_err.contains("Using existing ca certificate authority"),
        "the second run reuses the first's work:\n{b_err}"
    );
    assert!(started.elapsed() > Duration::from_millis(100));
    assert_valid(&s);
}

#[test]
fn sigkill_at_each_phase_boundary_then_rerun_converges() {
    use std::io::{BufRead, BufReader};
    require_tool("openssl");
    for marker in [
        "[certs] Generating \"ca\"",
        "[certs] Generating \"etcd/server\"",
        "[kubeconfig] Writing",
        "[manifests] Writing",
        "[kubelet-start]",
    ] {
        let s = Scratch::new(BASE_CONFIG);
        let config = s.config();
        let root = s.root_str();
        let mut child = Command::new(BIN)
            .args(["init", "--on-disk-only", "--config", config.as_str(), "--root", root.as_str()])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        for line in BufReader::new(stderr).lines() {
            if line.unwrap().contains(marker) {
                let _ = child.kill();
                break;
            }
        }
        let _ = child.wait();
        let first_ca = fingerprint(&s.pki("ca.crt"));
        s.init(&[]).ok();
        if let Some(fp) = first_ca {
            assert_eq!(fingerprint(&s.pki("ca.crt")), Some(fp), "killed at {marker}: CA regenerated");
        }
        assert_valid(&s);
    }
}
