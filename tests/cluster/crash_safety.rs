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

#[test]
fn sigkill_during_api_phases_and_join_then_rerun_converges() {
    let trials: u64 = std::env::var("KILL_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(50) / 5;
    let (port, healthz) = (free_port(), free_port());
    let s = Scratch::new(&fill(fixture!("crash-api-phases/kubeadm.yaml"), &[("port", &port), ("healthz", &healthz)]));
    s.init(&[]).ok();
    let double = start_double(&s.pki(""), port, healthz, |_| {});
    let t = Instant::now();
    s.init_full(&[]).ok();
    let span = t.elapsed().as_micros() as u64;
    let mut rng = Lcg(0x61_7069);
    for trial in 0..trials {
        let mut child = spawn_init(&s, true);
        std::thread::sleep(Duration::from_micros(rng.next() % span.max(1000)));
        let _ = child.kill();
        let _ = child.wait();
        let r = s.init_full(&[]);
        assert_eq!(r.code(), 0, "trial {trial}: {}", r.stderr());
    }
    for path in [
        "/api/v1/namespaces/kube-system/secrets/bootstrap-token-abcdef",
        "/api/v1/namespaces/kube-public/configmaps/cluster-info",
        "/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/kubeadm:cluster-admins",
    ] {
        assert!(double.object(path).is_some(), "{path} missing after the kill trials");
    }

    // Join, killed at random points: the rerun finds the same pending CSR or the issued identity.
    let hash = ca_hash_of_root(&s.root());
    let w = tempfile::tempdir().unwrap();
    let join_args = |root: &Path, node: &str| {
        vec![
            "join".to_string(),
            format!("127.0.0.1:{port}"),
            "--token".into(),
            TOKEN.into(),
            "--discovery-token-ca-cert-hash".into(),
            hash.clone(),
            "--node-name".into(),
            node.to_string(),
            "--root".into(),
            root.display().to_string(),
        ]
    };
    let t = Instant::now();
    let probe = tempfile::tempdir().unwrap();
    let pr = Command::new(BIN).args(join_args(probe.path(), "probe-1")).output().unwrap();
    assert!(pr.status.success(), "{}", String::from_utf8_lossy(&pr.stderr));
    let span = t.elapsed().as_micros() as u64;
    for _ in 0..trials {
        let mut child = Command::new(BIN)
            .args(join_args(w.path(), "worker-1"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(rng.next() % span.max(1000)));
        let _ = child.kill();
        let _ = child.wait();
    }
    let out = Command::new(BIN).args(join_args(w.path(), "worker-1")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csrs: Vec<_> = double
        .list("/apis/certificates.k8s.io/v1/certificatesigningrequests")
        .into_iter()
        .filter(|c| {
            let req = c["spec"]["request"].as_str().unwrap_or_default();
            use base64::Engine;
            let pem = base64::engine::general_purpose::STANDARD.decode(req).unwrap_or_default();
            String::from_utf8_lossy(&pem).contains("BEGIN CERTIFICATE REQUEST")
                && c["spec"]["username"] == "system:bootstrap:abcdef"
        })
        .collect();
    // One for the probe node, at most one for worker-1: killed runs reuse their key and CSR.
    assert!(csrs.len() <= 2, "duplicate CSRs after kills: {}", csrs.len());
    assert!(!w.path().join("etc/kubernetes/bootstrap-kubelet.conf").exists());
    assert!(std::fs::read_link(w.path().join("var/lib/kubelet/pki/kubelet-client-current.pem")).is_ok());
}
