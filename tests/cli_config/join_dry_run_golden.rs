//! `join --dry-run`'s plan, byte for byte, against tests/golden/join-dry-run/<case>.json: the
//! worker and control-plane joins the other tests exercise, with fixed endpoints and names. Only
//! what differs between runs is masked: the node root (a temp dir) and the CSR (a fresh key
//! each run, so its name and request). `UPDATE_GOLDEN=1 cargo test --test cli_config
//! join_dry_run_golden` rewrites them; review the diff before committing.

use crate::common::*;

use std::fs;
use std::path::Path;

use serde_json::Value;

const PIN: &str = "sha256:abababababababababababababababababababababababababababababababab";
const KEY: &str = "e6a2eb8581237ab72a4f494f30285ec12a9694d750b9785706a83bfcbbbd2204";

/// The plan with the root and the CSR's name and request masked.
fn masked(stdout: &str, root: &str) -> String {
    let plan: Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not one JSON plan ({e}):\n{stdout}"));
    let mut out = stdout.replace(&format!("\"root\": \"{root}\""), "\"root\": \"<root>\"");
    for o in plan["objects"].as_array().into_iter().flatten() {
        if o["kind"] == "CertificateSigningRequest" {
            if let Some(name) = o["name"].as_str() {
                out = out.replace(name, "<csr-name>");
            }
            if let Some(req) = o["object"]["spec"]["request"].as_str() {
                out = out.replace(req, "<csr-request>");
            }
        }
    }
    out
}

fn check(case: &str, args: &[&str]) {
    let s = Scratch::new("");
    let root = s.root_str();
    let mut argv = args.to_vec();
    argv.extend_from_slice(&["--root", &root, "--dry-run"]);
    let r = kubestrap(&argv).ok();
    assert!(snapshot(&s.root()).is_empty(), "{case}: a dry run wrote under the root");
    let got = masked(&r.stdout(), &root);
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/join-dry-run").join(format!("{case}.json"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        fs::create_dir_all(golden.parent().unwrap()).unwrap();
        fs::write(&golden, &got).unwrap();
        return;
    }
    let want = fs::read_to_string(&golden)
        .unwrap_or_else(|_| panic!("missing golden {}; run with UPDATE_GOLDEN=1", golden.display()));
    assert!(want == got, "{case}: the plan differs from {}:\n--- want\n{want}\n--- got\n{got}", golden.display());
}

#[test]
fn worker_with_a_ca_pin() {
    check(
        "worker-pin",
        &["join", "127.0.0.1:6443", "--token", TOKEN, "--discovery-token-ca-cert-hash", PIN, "--node-name=worker-1"],
    );
}

#[test]
fn worker_without_ca_verification_and_stray_control_plane_flags() {
    check(
        "worker-unsafe",
        &[
            "join",
            "127.0.0.1:6443",
            "--token",
            TOKEN,
            "--discovery-token-unsafe-skip-ca-verification",
            "--apiserver-advertise-address=10.0.0.5",
            "--apiserver-bind-port=7443",
            "--node-name",
            "w",
        ],
    );
}

#[test]
fn worker_from_a_configuration() {
    let w = tempfile::tempdir().unwrap();
    let cfg = w.path().join("join.yaml");
    let hash = format!("sha256:{}", "cd".repeat(32));
    fs::write(&cfg, fill(fixture!("cluster-e2e/join.yaml"), &[("port", &6443), ("hash", &hash)])).unwrap();
    check("worker-config", &["join", "--config", cfg.to_str().unwrap()]);
}

fn control_plane(case: &str, extra: &[&str]) {
    let mut args = vec!["join", "127.0.0.1:6443", "--token", TOKEN, "--discovery-token-ca-cert-hash", PIN];
    args.extend_from_slice(&["--control-plane", "--certificate-key", KEY]);
    args.extend_from_slice(&["--apiserver-advertise-address", "10.0.0.12", "--apiserver-bind-port", "7443"]);
    args.extend_from_slice(&["--node-name", "cp-2"]);
    args.extend_from_slice(extra);
    check(case, &args);
}

#[test]
fn control_plane_with_a_certificate_key() {
    control_plane("control-plane", &[]);
}

#[test]
fn control_plane_without_etcd_join() {
    control_plane("control-plane-skip-etcd", &["--skip-phases", "etcd-join"]);
}

#[test]
fn control_plane_with_the_shared_files_copied_by_hand() {
    check(
        "control-plane-no-key",
        &[
            "join",
            "127.0.0.1:6443",
            "--token",
            TOKEN,
            "--discovery-token-ca-cert-hash",
            PIN,
            "--control-plane",
            "--apiserver-advertise-address=10.0.0.13",
            "--node-name=cp-3",
        ],
    );
}
