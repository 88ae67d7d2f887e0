//! The standalone `kube-double` binary: starts from a PKI directory, prints
//! its address, serves, registers nodes, and runs until killed.

use crate::common::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// The binary cargo built beside this test binary, found at run time (a test binary reused from
/// another checkout sharing the target directory names that checkout's path).
fn kube_double() -> String {
    let exe = std::env::current_exe().ok();
    let beside = exe.as_deref().and_then(std::path::Path::parent).and_then(std::path::Path::parent);
    match beside.map(|d| d.join("kube-double")) {
        Some(p) if p.is_file() => p.to_string_lossy().into_owned(),
        _ => env!("CARGO_BIN_EXE_kube-double").to_string(),
    }
}

#[test]
fn binary_serves_from_a_pki_dir() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    pki.write_dir(dir.path());
    let mut child = Command::new(kube_double())
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

/// `--static-pods DIR`: the binary posts the mirror Pods of the manifests in DIR at start, on the
/// first registered node (the VM image's kubelet stand-in uses it so joining control planes find
/// the etcd Pod and its advertise-client-urls annotation).
#[test]
fn binary_mirrors_static_pods_at_start() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    pki.write_dir(dir.path());
    let manifests = tempfile::tempdir().unwrap();
    std::fs::write(
        manifests.path().join("etcd.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd\n  namespace: kube-system\n  labels:\n    component: etcd\n    tier: control-plane\n  annotations:\n    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://10.10.0.11:2379\nspec:\n  containers:\n  - name: etcd\n    image: registry.k8s.io/etcd:3.6.9-0\n",
    )
    .unwrap();
    let mut child = Command::new(kube_double())
        .args(["--pki-dir", dir.path().to_str().unwrap(), "--listen", "127.0.0.1:0", "--register-node", "cp-1"])
        .args(["--static-pods", manifests.path().to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "kube-double: mirror Pods etcd-cp-1");
    line.clear();
    stderr.read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("kube-double: serving on ").unwrap_or_else(|| panic!("{line:?}")).to_string();
    let admin = Client::cert(&pki, &url, &pki.admin);
    let pod = admin.get("/api/v1/namespaces/kube-system/pods/etcd-cp-1");
    assert_eq!(pod.status, 200);
    assert_eq!(
        pod.body["metadata"]["annotations"]["kubeadm.kubernetes.io/etcd.advertise-client-urls"],
        "https://10.10.0.11:2379"
    );
    assert_eq!(pod.body["spec"]["nodeName"], "cp-1");
    child.kill().unwrap();
    child.wait().unwrap();

    // Without a node to put them on, it refuses to start.
    let out = Command::new(kube_double())
        .args(["--pki-dir", dir.path().to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .args(["--static-pods", manifests.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--static-pods needs --register-node"));
}
