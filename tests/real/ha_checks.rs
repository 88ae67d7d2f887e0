//! What the HA test checks beside the joins: kubeadm-certs and the upload-certs phase, each
//! joined control plane's files and words, and a wrong certificate key.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::bins;
use super::cluster::*;
use crate::common::*;

/// kubeadm-certs' entries and the files they hold.
const ENTRIES: [(&str, &str); 8] = [
    ("ca.crt", "ca.crt"),
    ("ca.key", "ca.key"),
    ("front-proxy-ca.crt", "front-proxy-ca.crt"),
    ("front-proxy-ca.key", "front-proxy-ca.key"),
    ("sa.pub", "sa.pub"),
    ("sa.key", "sa.key"),
    ("etcd-ca.crt", "etcd/ca.crt"),
    ("etcd-ca.key", "etcd/ca.key"),
];

/// AES-256-GCM in Python's `cryptography`: `HEXKEY B64BLOB` prints the plaintext as base64.
const OPEN: &str = r#"
import base64, sys
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
key, data = bytes.fromhex(sys.argv[1]), base64.b64decode(sys.argv[2])
print(base64.b64encode(AESGCM(key).decrypt(data[:12], data[12:], None)).decode())
"#;

/// kubeadm-certs as uploaded: eight entries our key and Python's AES-GCM open to the files on
/// disk, owned by a proxy token with no usages that lives two hours, readable by the bootstrap
/// token (its Role) while the proxy token is not.
pub fn check_uploaded_certs(c: &Cluster, hex: &str) {
    let secret = c.get(&["-n", "kube-system", "secret", "kubeadm-certs"]);
    assert_eq!(secret["type"], "Opaque");
    let data = secret["data"].as_object().expect("data");
    assert_eq!(data.len(), ENTRIES.len(), "{:?}", data.keys().collect::<Vec<_>>());
    let key = kubestrap::config::values::CertificateKey::parse(hex).expect("key");
    for (k, file) in ENTRIES {
        let on_disk = std::fs::read(c.scratch.pki(file)).unwrap();
        let blob = data[k].as_str().unwrap();
        assert_eq!(key.open(&STANDARD.decode(blob).unwrap(), k).unwrap(), on_disk, "{k}");
        let (code, out, err) = capture(std::process::Command::new("python3").args(["-c", OPEN, hex, blob]));
        assert_eq!(code, 0, "{err}");
        assert_eq!(STANDARD.decode(out.trim()).unwrap(), on_disk, "{k} opened by Python");
    }
    let owner = secret["metadata"]["ownerReferences"][0]["name"].as_str().expect("owner").to_string();
    let token = c.get(&["-n", "kube-system", "secret", &owner]);
    let info = kubestrap::objects::tokens::parse_token_secret(&token).expect("proxy token");
    assert!(info.usages.is_empty() && info.groups.is_empty(), "{:?} {:?}", info.usages, info.groups);
    assert_eq!(info.description, "Proxy for managing TTL for the kubeadm-certs secret");
    let left = info.expiration.expect("expiration") - time::OffsetDateTime::now_utc();
    assert!(left > time::Duration::minutes(110) && left <= time::Duration::hours(2), "{left}");
    // As a joining control plane: the bootstrap token reads kubeadm-certs and nothing else.
    let as_joiner = |what: &str| {
        capture(
            c.netns
                .command(bins::bin("kubectl"))
                .args(["--kubeconfig", "/dev/null", "--token", TOKEN, "--certificate-authority"])
                .arg(c.scratch.pki("ca.crt"))
                .arg(format!("--server=https://{CP_ADDR}:{}", c.port))
                .args(["-n", "kube-system", "get", "secret", what]),
        )
    };
    let (code, _, err) = as_joiner("kubeadm-certs");
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = as_joiner(&owner);
    assert!(code != 0 && err.contains("Forbidden"), "{err}");
}

/// The proxy token that owns kubeadm-certs.
pub fn owner(c: &Cluster) -> String {
    let certs = c.get(&["-n", "kube-system", "secret", "kubeadm-certs"]);
    certs["metadata"]["ownerReferences"][0]["name"].as_str().expect("owner").to_string()
}

/// The upload-certs phase alone on cp-1, as kubeadm's: without --upload-certs it says so; a
/// malformed key is refused (exit 2) with nothing uploaded; a rerun with the same key uploads
/// under a fresh proxy token, and --skip-certificate-key-print keeps the key off stdout; the join
/// command for control planes carries the key.
pub fn upload_certs_phase(c: &Cluster, key: &str) {
    let (config, root) = (c.scratch.config(), c.scratch.root_str());
    let phase = |name: &str, extra: &[&str]| {
        let mut a = vec!["init", "phase", name, "--config", &config, "--root", &root];
        a.extend_from_slice(extra);
        run_in(&c.netns, &a)
    };
    let before = owner(c);
    let r = phase("upload-certs", &[]).ok();
    assert!(r.stderr().contains("Skipping phase. Please see --upload-certs"), "{}", r.stderr());
    let r = phase("upload-certs", &["--upload-certs", "--certificate-key", "e6a2"]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("invalid certificate key size 2, the key must be an AES key of size 32"));
    assert_eq!(owner(c), before, "nothing uploaded");
    let r = phase("upload-certs", &["--upload-certs", "--certificate-key", key, "--skip-certificate-key-print"]).ok();
    assert!(!r.stdout().contains(key) && !r.stderr().contains(key), "--skip-certificate-key-print");
    assert_ne!(owner(c), before, "a fresh proxy token");
    check_uploaded_certs(c, key);

    let out = phase("show-join-command", &["--upload-certs", "--certificate-key", key]).ok().stdout();
    assert!(out.contains(&format!("--control-plane --certificate-key {key}")), "{out}");
    assert!(out.contains(&format!("kubestrap join {CP_ADDR}:{} --token", c.port)), "{out}");
    assert!(out.contains("uploaded-certs will be deleted in two hours"), "{out}");
    let out = phase("show-join-command", &[]).ok().stdout();
    assert!(out.contains("by copying certificate authorities") && !out.contains("--certificate-key"), "{out}");
}

/// What kubeadm says of a control-plane join with etcd, each line once, in its order.
pub fn check_first_join_log(run: &Run, key: &str, ip: &str, port: u16) {
    let (out, err) = (run.stdout(), run.stderr());
    assert!(!err.contains(key) && !out.contains(key), "the certificate key is never logged");
    let log = format!("{out}{err}");
    for line in [
        "[etcd] Announced new etcd member joining to the existing etcd cluster",
        "[etcd] Creating static Pod manifest for \"etcd\"",
        "[etcd] Waiting for the new etcd member to join the cluster. This can take up to 40s",
    ] {
        assert_eq!(log.matches(line).count(), 1, "{line:?} once in:\n{log}");
    }
    assert!(log.contains(&format!("[etcd] The learner was promoted as a voting member (https://{ip}:2380)")), "{log}");
    assert!(out.contains("This node has joined the cluster and a new control plane instance was created:"), "{out}");
    assert!(out.contains("* A new etcd member was added to the local/stacked etcd cluster."), "{out}");
    let ready = format!("[wait-control-plane] Waiting for a healthy kube-apiserver at https://{ip}:{port}/livez");
    assert!(log.contains(&ready), "{log}");
    let order = ["[wait-control-plane] The kubelet is healthy", "[wait-control-plane] The kube-apiserver is healthy"];
    let at: Vec<usize> = order.iter().map(|l| log.find(l).unwrap_or_else(|| panic!("{l:?} in:\n{log}"))).collect();
    assert!(at[0] < at[1] && log.find("[mark-control-plane] Marked").unwrap() < at[0], "{log}");
}

/// A joined control plane's files, as kubeadm lays them out, and its Node.
pub fn check_joined_control_plane(c: &Cluster, i: usize, name: &str) {
    let root = &c.hosts[i].root;
    let ip = addr(i);
    for f in [
        "ca.crt",
        "ca.key",
        "sa.key",
        "sa.pub",
        "front-proxy-ca.crt",
        "front-proxy-ca.key",
        "etcd/ca.crt",
        "etcd/ca.key",
    ] {
        let path = at(root, &format!("/etc/kubernetes/pki/{f}"));
        assert_eq!(std::fs::read(&path).unwrap(), std::fs::read(c.scratch.pki(f)).unwrap(), "{name}: {f} is shared");
        // download-certs: kubeadm writes every non-private-key PEM (sa.pub too) 0644.
        assert_eq!(mode(&path), if f.ends_with(".key") { 0o600 } else { 0o644 }, "{name}: {f}");
    }
    let crt = at(root, "/etc/kubernetes/pki/apiserver.crt");
    openssl_verify(&c.scratch.pki("ca.crt"), &crt).unwrap();
    let (code, san, _) = sh(&format!("openssl x509 -in {} -noout -ext subjectAltName", crt.display()));
    assert_eq!(code, 0);
    assert!(san.contains(&format!("DNS:{name}")) && san.contains(&format!("IP Address:{ip}")), "{san}");
    assert!(!san.contains("DNS:cp-1"), "{san}");
    for f in ["admin.conf", "controller-manager.conf", "scheduler.conf", "kubelet.conf"] {
        assert_eq!(mode(&at(root, &format!("/etc/kubernetes/{f}"))), 0o600, "{name}: {f}");
    }
    assert!(!at(root, "/etc/kubernetes/super-admin.conf").exists(), "super-admin.conf only on the first node");
    assert!(!at(root, "/etc/kubernetes/bootstrap-kubelet.conf").exists());
    let read = |p: &str| std::fs::read_to_string(at(root, p)).unwrap();
    assert!(read("/etc/kubernetes/manifests/kube-apiserver.yaml").contains(&format!("--advertise-address={ip}")));
    let etcd = read("/etc/kubernetes/manifests/etcd.yaml");
    assert!(etcd.contains("--initial-cluster-state=existing"), "{etcd}");
    assert_eq!(mode(&at(root, "/var/lib/etcd")), 0o700);
    assert!(
        !read("/var/lib/kubelet/kubeadm-flags.env").contains("--register-with-taints"),
        "mark-control-plane taints it"
    );
    // Its kubelet talks to its own API server (kubeadm 1.35+).
    let conf = read("/etc/kubernetes/kubelet.conf");
    assert!(conf.contains(&format!("server: https://{ip}:{}", c.port)), "{name} kubelet.conf:\n{conf}");
    let node = c.get(&["node", name]);
    assert_eq!(node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"], "", "{name}");
    let taints = node["spec"]["taints"].as_array().expect("taints");
    assert!(taints.iter().any(|t| t["key"] == "node-role.kubernetes.io/control-plane"), "{name}: {taints:?}");
}

/// A wrong certificate key: a clear error (exit 2) and no shared key written; the key without
/// --control-plane: kubeadm's warning.
pub fn wrong_key_refused(c: &Cluster, template: &str, key: &str) {
    let wrong = "e6a2eb8581237ab72a4f494f30285ec12a9694d750b9785706a83bfcbbbd2204";
    let w = Scratch::new("");
    std::fs::write(w.config(), c.fill_node(&template.replace(key, wrong), "cp-9", 9, &w.root())).unwrap();
    let bare = c.bare_node("cp-9", 9);
    let r = run_in(&bare, &["join", "--config", &w.config(), "--root", &w.root_str()]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("the certificate key is wrong"), "{}", r.stderr());
    for f in ["ca.key", "sa.key", "front-proxy-ca.key", "etcd/ca.key"] {
        assert!(!w.pki(f).exists(), "{f} written despite the wrong key");
    }
    let (ep, hash) = (format!("{CP_ADDR}:{}", c.port), c.ca_hash());
    let args = ["join", &ep, "--token", TOKEN, "--discovery-token-ca-cert-hash", &hash, "--certificate-key", wrong];
    let r = run_in(&bare, &[&args[..], &["--root", &w.root_str(), "--dry-run"]].concat());
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.stderr().contains("--control-plane is also required"), "{}", r.stderr());
}
