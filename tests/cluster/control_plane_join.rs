//! `join --control-plane --certificate-key` against the API double, after `init --upload-certs`:
//! the shared CAs and keys come down from kubeadm-certs, this node's certificates carry its own
//! name and address, it gets exactly the kubeconfigs kubeadm gives a joining control plane, its
//! manifests advertise its address, and it is marked control-plane. A wrong key writes nothing.

use crate::cluster_e2e::{Cluster, init_cluster_with};
use crate::common::*;

use std::path::Path;
use std::time::{Duration, Instant};

const SHARED: [&str; 8] =
    ["ca.crt", "ca.key", "front-proxy-ca.crt", "front-proxy-ca.key", "sa.pub", "sa.key", "etcd/ca.crt", "etcd/ca.key"];

/// The e2e cluster with a controlPlaneEndpoint (its own API server address), as HA needs.
fn ha_cluster() -> Cluster {
    init_cluster_with(
        |t| {
            let port = t.lines().find_map(|l| l.trim().strip_prefix("bindPort: ")).unwrap().to_string();
            let cpe = format!("kind: ClusterConfiguration\ncontrolPlaneEndpoint: 127.0.0.1:{port}\n");
            t.replace("kind: ClusterConfiguration\n", &cpe)
        },
        |_| {},
    )
}

fn upload(c: &Cluster) -> String {
    let (config, root) = (c.scratch.config(), c.scratch.root_str());
    let out = kubestrap(&["init", "phase", "upload-certs", "--upload-certs", "--config", &config, "--root", &root])
        .ok()
        .stdout();
    out.split("Using certificate key:\n").nth(1).unwrap().lines().next().unwrap().trim().to_string()
}

fn join_cp(c: &Cluster, root: &Path, node: &str, addr: &str, port: u16, key: &str) -> Run {
    let (ep, hash, root) = (format!("127.0.0.1:{}", c.port), c.ca_hash(), root.display().to_string());
    let port = port.to_string();
    kubestrap(&[
        "join",
        &ep,
        "--token",
        TOKEN,
        "--discovery-token-ca-cert-hash",
        &hash,
        "--control-plane",
        "--certificate-key",
        key,
        "--apiserver-advertise-address",
        addr,
        "--apiserver-bind-port",
        &port,
        "--node-name",
        node,
        "--root",
        &root,
        // The double runs no etcd: the learner join is tested against real etcd in
        // tests/validate/etcd_join.rs.
        "--skip-phases",
        "etcd-join",
    ])
}

#[test]
fn a_second_control_plane_joins_with_the_certificate_key() {
    let c = ha_cluster();
    let key = upload(&c);
    let b = tempfile::tempdir().unwrap();
    let b_port = free_port();
    let at = |p: &str| b.path().join(p.trim_start_matches('/'));

    // The kubelet registers the Node once it has its identity (mark-control-plane waits for it)
    // and runs the node's API server (the double's second endpoint, on the node's own serving
    // certificate; wait-control-plane waits for it).
    let kubelet_conf = at("/etc/kubernetes/kubelet.conf");
    let read = |p: &str| std::fs::read(at(p)).ok();
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            let deadline = Instant::now() + Duration::from_secs(60);
            while !kubelet_conf.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let pem = |p: &str| String::from_utf8(read(p).unwrap()).unwrap();
            let listen = std::net::SocketAddr::from(([127, 0, 0, 2], b_port));
            let (crt, key) = (pem("/etc/kubernetes/pki/apiserver.crt"), pem("/etc/kubernetes/pki/apiserver.key"));
            c.double.serve_also(listen, &crt, &key).unwrap();
            c.double.register_node("cp-2", &[]).unwrap();
        });
        join_cp(&c, b.path(), "cp-2", "127.0.0.2", b_port, &key)
    });
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    assert!(!r.stderr().contains(&key), "the certificate key is never logged");
    // kubeadm's closing words, without the etcd line: etcd-join was skipped.
    assert!(r.stdout().contains("a new control plane instance was created"), "{}", r.stdout());
    assert!(!r.stdout().contains("A new etcd member"), "{}", r.stdout());

    for f in SHARED {
        let ours = std::fs::read(c.scratch.pki(f)).unwrap();
        assert_eq!(std::fs::read(at(&format!("/etc/kubernetes/pki/{f}"))).unwrap(), ours, "{f} is shared");
        // download-certs: kubeadm writes every non-private-key PEM (sa.pub too) with WriteCert, 0644.
        let want = if f.ends_with(".key") { 0o600 } else { 0o644 };
        assert_eq!(mode(&at(&format!("/etc/kubernetes/pki/{f}"))), want, "{f}");
    }
    // Its own serving certificate: its name and address, the shared CA.
    let crt = at("/etc/kubernetes/pki/apiserver.crt");
    openssl_verify(&c.scratch.pki("ca.crt"), &crt).unwrap();
    let (code, text, _) = sh(&format!("openssl x509 -in {} -noout -ext subjectAltName", crt.display()));
    assert_eq!(code, 0);
    assert!(text.contains("DNS:cp-2") && text.contains("IP Address:127.0.0.2"), "{text}");
    assert!(!text.contains("DNS:cp-1"), "{text}");
    assert_ne!(std::fs::read(&crt).unwrap(), std::fs::read(c.scratch.pki("apiserver.crt")).unwrap());
    // kubeadm's set of kubeconfigs for a joining control plane.
    for f in ["admin.conf", "controller-manager.conf", "scheduler.conf", "kubelet.conf"] {
        assert_eq!(mode(&at(&format!("/etc/kubernetes/{f}"))), 0o600, "{f}");
    }
    assert!(!at("/etc/kubernetes/super-admin.conf").exists(), "super-admin.conf only on the first node");
    assert!(!at("/etc/kubernetes/bootstrap-kubelet.conf").exists());
    let apiserver = std::fs::read_to_string(at("/etc/kubernetes/manifests/kube-apiserver.yaml")).unwrap();
    assert!(apiserver.contains("--advertise-address=127.0.0.2"), "{apiserver}");
    let flags = std::fs::read_to_string(at("/var/lib/kubelet/kubeadm-flags.env")).unwrap();
    assert!(!flags.contains("--register-with-taints"), "mark-control-plane taints it: {flags}");
    let node = c.double.object("/api/v1/nodes/cp-2").unwrap();
    assert!(node["metadata"]["labels"].get("node-role.kubernetes.io/control-plane").is_some(), "{node}");
    assert_eq!(node["spec"]["taints"][0]["key"], "node-role.kubernetes.io/control-plane");

    // Its API server is trusted by its own controller-manager.conf, which points at the local
    // endpoint.
    let kcm = std::fs::read(at("/etc/kubernetes/controller-manager.conf")).unwrap();
    let kc = kubestrap::kubeconfig::Kubeconfig::parse(&kcm).unwrap();
    assert_eq!(kc.current().unwrap().0.server, format!("https://127.0.0.2:{b_port}"));
    let client = kubestrap::kube::Client::from_kubeconfig(&kc, &read, Duration::from_secs(5)).unwrap();
    c.double.clear_request_log();
    // TLS and authentication pass; RBAC, as on a real cluster, gives the controller-manager's own
    // identity no Node reads.
    assert_eq!(client.get("/api/v1/nodes/cp-2").unwrap_err().code(), Some(403));
    assert_eq!(c.double.request_log().last().unwrap().user, "system:kube-controller-manager");

    // kubeadm 1.35+ (KEP-4471): its kubelet talks to its own API server, as the node.
    let kc = kubestrap::kubeconfig::Kubeconfig::parse(&std::fs::read(&kubelet_conf).unwrap()).unwrap();
    assert_eq!(kc.current().unwrap().0.server, format!("https://127.0.0.2:{b_port}"));
    let read_link = |p: &str| {
        let f = at(p);
        std::fs::read(std::fs::read_link(&f).map(|t| at(t.to_str().unwrap())).unwrap_or(f)).ok()
    };
    let client = kubestrap::kube::Client::from_kubeconfig(&kc, &read_link, Duration::from_secs(5)).unwrap();
    let _ = client.request("GET", "/api/v1/nodes/cp-2", None).unwrap();
    assert_eq!(c.double.request_log().last().unwrap().user, "system:node:cp-2");
}

#[test]
fn a_wrong_certificate_key_fails_clearly_and_writes_no_keys() {
    let c = ha_cluster();
    upload(&c);
    let w = tempfile::tempdir().unwrap();
    let wrong = "e6a2eb8581237ab72a4f494f30285ec12a9694d750b9785706a83bfcbbbd2204";
    let r = join_cp(&c, w.path(), "cp-3", "127.0.0.3", 6443, wrong);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("the certificate key is wrong"), "{}", r.stderr());
    for f in SHARED.iter().filter(|f| **f != "ca.crt") {
        assert!(!w.path().join("etc/kubernetes/pki").join(f).exists(), "{f} written despite the wrong key");
    }
    // Control-plane flags without --control-plane: kubeadm's warning, and a worker join (dry run here).
    let (ep, hash, root) = (format!("127.0.0.1:{}", c.port), c.ca_hash(), w.path().display().to_string());
    let r = kubestrap(&[
        "join",
        &ep,
        "--token",
        TOKEN,
        "--discovery-token-ca-cert-hash",
        &hash,
        "--certificate-key",
        wrong,
        "--root",
        &root,
        "--dry-run",
    ])
    .ok();
    assert!(r.stderr().contains("--control-plane is also required"), "{}", r.stderr());
}
