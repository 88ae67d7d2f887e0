//! The standalone `kube-double` binary: starts from a PKI directory, prints
//! its address, serves, registers nodes, and runs until killed.

use crate::common::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn binary_serves_from_a_pki_dir() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    pki.write_dir(dir.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-double"))
        .args(["--pki-dir", dir.path().to_str().unwrap(), "--listen", "127.0.0.1:0", "--register-node", "cp1"])
        .args(["--legacy-approver", "--down-for-secs", "0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("kube-double: serving on ").unwrap_or_else(|| panic!("{line:?}")).to_string();
    let admin = Client::cert(&pki, &url, &pki.admin);
    let node = admin.get("/api/v1/nodes/cp1");
    assert_eq!(node.status, 200);
    assert_eq!(node.body["status"]["conditions"][0]["type"], "Ready");
    assert_eq!(Client::anonymous(&pki, &url).get("/healthz").status, 200);
    // Requests are logged to stderr.
    let mut logged = String::new();
    while !logged.contains("GET /healthz") {
        logged.clear();
        stderr.read_line(&mut logged).unwrap();
    }
    assert!(logged.contains("system:anonymous") && logged.contains("200"), "{logged}");
    child.kill().unwrap();
    child.wait().unwrap();
}
