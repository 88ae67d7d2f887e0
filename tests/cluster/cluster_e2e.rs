//! `init` against the API test double (standing in for kubelet + API server once the
//! manifests exist, serving the certs kubestrap generated), then `join` of a second root with
//! the printed join command; plus the attacks and faults join must fail closed on.

use crate::common::*;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

pub struct Cluster {
    pub scratch: Scratch,
    pub double: kube_double::Handle,
    pub port: u16,
}

/// Runs `kubestrap init` while a thread plays the kubelet: once the API server manifest appears
/// it starts the double on the generated PKI and registers the Node.
pub fn init_cluster(tune: impl FnOnce(&mut kube_double::Config) + Send + 'static) -> Cluster {
    init_cluster_with(|c| c.to_string(), tune)
}

/// [`init_cluster`] with the config text edited first (`{port}` is already filled in).
pub fn init_cluster_with(
    edit: impl FnOnce(&str) -> String,
    tune: impl FnOnce(&mut kube_double::Config) + Send + 'static,
) -> Cluster {
    init_cluster_flags(&[], edit, tune)
}

/// [`init_cluster_with`] with extra `init` flags.
pub fn init_cluster_flags(
    flags: &[&str],
    edit: impl FnOnce(&str) -> String,
    tune: impl FnOnce(&mut kube_double::Config) + Send + 'static,
) -> Cluster {
    let port = free_port();
    let healthz = free_port();
    let scratch =
        Scratch::new(&edit(&fill(fixture!("cluster-e2e/kubeadm.yaml"), &[("port", &port), ("healthz", &healthz)])));
    let root = scratch.root();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let manifest = root.join("etc/kubernetes/manifests/kube-apiserver.yaml");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !manifest.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = tx.send(start_double(&root.join("etc/kubernetes/pki"), port, healthz, tune));
    });
    let init = scratch.init_full(flags);
    let double = rx.recv_timeout(Duration::from_secs(60)).expect("double started");
    assert_eq!(init.code(), 0, "init failed:\n{}\n{}", init.stdout(), init.stderr());
    Cluster { scratch, double, port }
}

impl Cluster {
    pub fn ca_hash(&self) -> String {
        ca_hash(&self.scratch.pki("ca.crt"))
    }
}

pub fn join(endpoint: &str, root: &Path, extra: &[&str]) -> Run {
    let root = root.display().to_string();
    let mut args = vec!["join", endpoint, "--root", root.as_str(), "--node-name", "worker-1"];
    args.extend_from_slice(extra);
    kubestrap(&args)
}

pub fn assert_no_secret(r: &Run) {
    for out in [r.stdout(), r.stderr()] {
        assert!(!out.contains(SECRET), "token secret leaked:\n{out}");
    }
}

/// Nothing credential-like may stay behind after a failed join.
pub fn assert_no_credentials(root: &Path) {
    for p in [
        "etc/kubernetes/bootstrap-kubelet.conf",
        "etc/kubernetes/kubelet.conf",
        "var/lib/kubelet/pki/kubelet-client.key.tmp",
        "var/lib/kubelet/pki/kubelet-client-current.pem",
    ] {
        assert!(!root.join(p).exists(), "{p} left behind");
    }
}

pub fn check_joined_node(root: &Path, c: &Cluster) {
    let at = |p: &str| root.join(p.trim_start_matches('/'));
    assert!(!at("/etc/kubernetes/bootstrap-kubelet.conf").exists(), "bootstrap-kubelet.conf must be deleted");
    assert!(!at("/var/lib/kubelet/pki/kubelet-client.key.tmp").exists());
    let link = at("/var/lib/kubelet/pki/kubelet-client-current.pem");
    let target = std::fs::read_link(&link).expect("kubelet-client-current.pem must be a symlink");
    assert!(
        target.is_absolute() && target.to_string_lossy().starts_with("/var/lib/kubelet/pki/kubelet-client-"),
        "{target:?}"
    );
    let real: PathBuf = at(target.to_str().unwrap());
    assert_eq!(mode(&real), 0o600);
    let bundle = std::fs::read_to_string(&real).unwrap();
    assert!(bundle.contains("BEGIN CERTIFICATE") && bundle.contains("PRIVATE KEY"));
    // openssl's word on the certificate; the rest of the node is checked without it.
    if needs::needs(needs::Need::tool("openssl")) {
        let cert_file = root.join("client.crt");
        std::fs::write(&cert_file, &bundle).unwrap();
        let (code, out, err) = sh(&format!(
            "openssl verify -CAfile {ca} {crt} && openssl x509 -in {crt} -noout -subject -ext extendedKeyUsage -nameopt RFC2253",
            ca = c.scratch.pki("ca.crt").display(),
            crt = cert_file.display()
        ));
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("CN=system:node:worker-1,O=system:nodes"), "{out}");
        assert!(out.contains("TLS Web Client Authentication"), "{out}");
    }
    assert_eq!(
        std::fs::read(at("/etc/kubernetes/pki/ca.crt")).unwrap(),
        std::fs::read(c.scratch.pki("ca.crt")).unwrap()
    );
    let kcfg = std::fs::read_to_string(at("/etc/kubernetes/kubelet.conf")).unwrap();
    assert!(kcfg.contains("client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem"), "{kcfg}");
    assert_eq!(mode(&at("/etc/kubernetes/kubelet.conf")), 0o600);
    // kubeadm 1.37: config.yaml is the cluster's KubeletConfiguration with instance-config.yaml
    // (this node's CRI endpoint) merged in; the flags carry neither the endpoint nor the pause image.
    let socket = "unix:///var/run/containerd/containerd.sock";
    assert_eq!(
        std::fs::read_to_string(at("/var/lib/kubelet/instance-config.yaml")).unwrap(),
        format!("containerRuntimeEndpoint: \"{socket}\"\n")
    );
    let cm = c.double.object("/api/v1/namespaces/kube-system/configmaps/kubelet-config").unwrap();
    let mut want: serde_yaml::Mapping = serde_yaml::from_str(cm["data"]["kubelet"].as_str().unwrap()).unwrap();
    assert_eq!(want["containerRuntimeEndpoint"], "", "the cluster-wide copy names no node's socket (Go's zero value)");
    want.insert("containerRuntimeEndpoint".into(), socket.into());
    let config: serde_yaml::Mapping =
        serde_yaml::from_str(&std::fs::read_to_string(at("/var/lib/kubelet/config.yaml")).unwrap()).unwrap();
    assert_eq!(config, want);
    let flags = std::fs::read_to_string(at("/var/lib/kubelet/kubeadm-flags.env")).unwrap();
    assert!(flags.starts_with("KUBELET_KUBEADM_ARGS=\""), "{flags}");
    assert!(
        !flags.contains("--container-runtime-endpoint") && !flags.contains("--pod-infra-container-image"),
        "{flags}"
    );

    // The identity works: the API authenticates the kubelet.conf's certificate as the node.
    let kc = kubestrap::kubeconfig::Kubeconfig::parse(kcfg.as_bytes()).unwrap();
    // Absolute symlinks point at host paths: resolve them inside the root.
    let read = |p: &str| {
        let f = at(p);
        let f = std::fs::read_link(&f).map(|t| at(t.to_str().unwrap())).unwrap_or(f);
        std::fs::read(f).ok()
    };
    let client = kubestrap::kube::Client::from_kubeconfig(&kc, &read, Duration::from_secs(5)).unwrap();
    c.double.clear_request_log();
    let _ = client.request("GET", "/api/v1/nodes/worker-1", None).unwrap();
    let log = c.double.request_log();
    assert_eq!(log.last().map(|l| l.user.as_str()), Some("system:node:worker-1"), "{log:?}");
}

/// Runs a join that must fail with exit 1 and `why` in the error, leaving no credential behind.
fn assert_join_fails(endpoint: &str, args: &[&str], why: &str) -> Run {
    let w = tempfile::tempdir().unwrap();
    let mut a = args.to_vec();
    a.extend_from_slice(&["--discovery-timeout", "4s"]);
    let r = join(endpoint, w.path(), &a);
    assert_eq!(r.code(), 1, "join must fail:\n{}", r.stderr());
    assert!(r.stderr().contains(why), "error lacks {why:?}:\n{}", r.stderr());
    assert_no_secret(&r);
    assert_no_credentials(w.path());
    r
}

#[test]
fn join_fails_closed_on_attacks_and_faults() {
    let c = init_cluster(|_| {});
    let ep = format!("127.0.0.1:{}", c.port);
    let hash = c.ca_hash();
    // Wrong CA pin.
    let wrong = "sha256:345959acb2c3b2feb87d281961c893f62a314207ef02599f1cc4a5fb255480b3";
    assert_join_fails(
        &ep,
        &["--token", TOKEN, "--discovery-token-ca-cert-hash", wrong],
        "does not match any --discovery-token-ca-cert-hash",
    );
    // Unknown token (valid format, never created).
    let r = assert_join_fails(
        &ep,
        &["--token", "zzzzzz.0123456789abcdef", "--discovery-token-ca-cert-hash", &hash],
        "no signature for token id \"zzzzzz\"",
    );
    assert!(r.stderr().contains("rejects this token"), "{}", r.stderr());
    // Expired token: the signer drops its signature and the API server rejects it.
    let expired = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
        "metadata": {"name": "bootstrap-token-oldtok", "namespace": "kube-system"},
        "stringData": {"token-id": "oldtok", "token-secret": "0123456789abcdef", "expiration": "2020-01-01T00:00:00Z",
                       "usage-bootstrap-signing": "true", "usage-bootstrap-authentication": "true",
                       "auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token"}
    });
    c.double.put_object(expired).unwrap();
    let r = assert_join_fails(
        &ep,
        &["--token", "oldtok.0123456789abcdef", "--discovery-token-ca-cert-hash", &hash],
        "unknown or expired",
    );
    assert!(r.stderr().contains("gave up"), "{}", r.stderr());
    // Tampered signature (the signer is held back so the forgery stays).
    c.double.set_knobs(|k| k.signer_delay = Duration::from_secs(3600));
    let mut ci = c.double.object("/api/v1/namespaces/kube-public/configmaps/cluster-info").unwrap();
    let forged = kubestrap::discovery::jws_sign(
        ci["data"]["kubeconfig"].as_str().unwrap(),
        &kubestrap::discovery::Token::parse("abcdef.ffffffffffffffff").unwrap(),
    );
    ci["data"]["jws-kubeconfig-abcdef"] = Value::String(forged);
    c.double.put_object(ci).unwrap();
    assert_join_fails(&ep, &["--token", TOKEN, "--discovery-token-ca-cert-hash", &hash], "does not verify");
}

#[test]
fn join_fails_closed_when_another_ca_serves_or_the_csr_is_denied() {
    let a = init_cluster(|_| {});
    let b = init_cluster(|cfg| cfg.deny_csrs = true);
    // b serves its own CA: a's pin must not accept it.
    assert_join_fails(
        &format!("127.0.0.1:{}", b.port),
        &["--token", TOKEN, "--discovery-token-ca-cert-hash", &a.ca_hash()],
        "does not match any",
    );
    // b denies CSRs: discovery passes, the TLS bootstrap fails, and the token is removed again.
    let w = tempfile::tempdir().unwrap();
    let r = join(
        &format!("127.0.0.1:{}", b.port),
        w.path(),
        &["--token", TOKEN, "--discovery-token-ca-cert-hash", &b.ca_hash()],
    );
    assert_eq!(r.code(), 1, "{}", r.stderr());
    assert!(r.stderr().contains("was denied"), "{}", r.stderr());
    assert_no_secret(&r);
    assert_no_credentials(w.path());
}

/// Copies one direction of a proxied connection on its own thread.
pub fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
}

#[test]
fn join_fails_closed_when_cluster_info_changes_between_the_two_fetches() {
    // An attacker who knows the token answers the unverified fetch with a correctly signed
    // cluster-info that carries the real CA but another server; the CA-verified re-fetch then
    // differs, and join must refuse.
    let a = init_cluster(|_| {});
    let b = init_cluster(|_| {});
    let real = a.double.object("/api/v1/namespaces/kube-public/configmaps/cluster-info").unwrap();
    let forged_kc =
        real["data"]["kubeconfig"].as_str().unwrap().replace(&format!("127.0.0.1:{}", a.port), "evil.example.com:6443");
    let mut forged = b.double.object("/api/v1/namespaces/kube-public/configmaps/cluster-info").unwrap();
    forged["data"] = serde_json::json!({ "kubeconfig": forged_kc });
    b.double.put_object(forged).unwrap();
    // b's bootstrap signer signs the forgery with the shared token.
    assert!(
        b.double
            .wait_for("/api/v1/namespaces/kube-public/configmaps/cluster-info", Duration::from_secs(5), |cm| cm["data"]
                ["jws-kubeconfig-abcdef"]
                .is_string())
            .is_some()
    );
    // A front door that sends odd connections to b (unverified fetch) and even ones to a.
    let front = free_port();
    let (a_port, b_port) = (a.port, b.port);
    let l = TcpListener::bind(("127.0.0.1", front)).unwrap();
    std::thread::spawn(move || {
        for (n, conn) in l.incoming().flatten().enumerate() {
            let back = if n % 2 == 0 { b_port } else { a_port };
            if let Ok(up) = TcpStream::connect(("127.0.0.1", back)) {
                pipe(conn.try_clone().unwrap(), up.try_clone().unwrap());
                pipe(up, conn);
            }
        }
    });
    assert_join_fails(
        &format!("127.0.0.1:{front}"),
        &["--token", TOKEN, "--discovery-token-ca-cert-hash", &a.ca_hash()],
        "changed between",
    );
}
