//! `init phase upload-certs --upload-certs` against the API double: the kubeadm-certs Secret as
//! kubeadm writes it (eight entries sealed under the printed key, owned by a 2 h proxy token,
//! readable by bootstrap tokens only through its Role), Python `cryptography` opening our blobs
//! and us opening its, and the garbage collector removing the Secret with its token.

use crate::cluster_e2e::init_cluster;
use crate::common::*;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kubestrap::pki::copycerts::CertificateKey;

const SECRETS: &str = "/api/v1/namespaces/kube-system/secrets";
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

/// AES-256-GCM in Python: `open HEXKEY B64BLOB` prints the plaintext as base64;
/// `seal HEXKEY B64PLAIN` prints nonce‖ct‖tag as base64.
const PY: &str = r#"
import base64, os, sys
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
mode, key, data = sys.argv[1], bytes.fromhex(sys.argv[2]), base64.b64decode(sys.argv[3])
g = AESGCM(key)
if mode == "open":
    print(base64.b64encode(g.decrypt(data[:12], data[12:], None)).decode())
else:
    n = os.urandom(12)
    print(base64.b64encode(n + g.encrypt(n, data, None)).decode())
"#;

fn python(mode: &str, key: &str, data: &str) -> String {
    let (code, out, err) = capture(std::process::Command::new("python3").args(["-c", PY, mode, key, data]));
    assert_eq!(code, 0, "{err}");
    out.trim().to_string()
}

#[test]
fn upload_certs_writes_kubeadms_secret_and_the_gc_removes_it() {
    let c = init_cluster(|_| {});
    let (config, root) = (c.scratch.config(), c.scratch.root_str());
    let run = |extra: &[&str]| {
        let mut a = vec!["init", "phase", "upload-certs", "--config", &config, "--root", &root];
        a.extend_from_slice(extra);
        kubestrap(&a)
    };
    // Without --upload-certs the phase says so and does nothing, as kubeadm's.
    let r = run(&[]).ok();
    assert!(r.stderr().contains("Skipping phase. Please see --upload-certs"), "{}", r.stderr());
    assert!(c.double.object(&format!("{SECRETS}/kubeadm-certs")).is_none());
    // A malformed key: kubeadm's words, exit 2, nothing uploaded.
    let r = run(&["--upload-certs", "--certificate-key", "e6a2"]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("invalid certificate key size 2, the key must be an AES key of size 32"));
    assert!(c.double.object(&format!("{SECRETS}/kubeadm-certs")).is_none());

    let r = run(&["--upload-certs"]).ok();
    let out = r.stdout();
    let hex = out.split("Using certificate key:\n").nth(1).expect("key printed").lines().next().unwrap().trim();
    assert_eq!(hex.len(), 64, "{out}");
    assert!(!r.stderr().contains(hex), "the key is printed, never logged");
    let key = CertificateKey::parse(hex).unwrap();

    let secret = c.double.object(&format!("{SECRETS}/kubeadm-certs")).expect("kubeadm-certs");
    assert_eq!(secret["type"], "Opaque");
    let data = secret["data"].as_object().unwrap();
    assert_eq!(data.len(), ENTRIES.len(), "{:?}", data.keys().collect::<Vec<_>>());
    for (k, file) in ENTRIES {
        let blob = STANDARD.decode(data[k].as_str().unwrap()).unwrap();
        let on_disk = std::fs::read(c.scratch.pki(file)).unwrap();
        assert_eq!(key.open(&blob, k).unwrap(), on_disk, "{k}");
        // An independent AES-GCM opens our blob too.
        assert_eq!(STANDARD.decode(python("open", hex, data[k].as_str().unwrap())).unwrap(), on_disk, "{k}");
    }
    // And we open Python's.
    let theirs = STANDARD.decode(python("seal", hex, &STANDARD.encode(b"from python"))).unwrap();
    assert_eq!(key.open(&theirs, "python").unwrap(), b"from python");
    assert!(CertificateKey::generate().unwrap().open(&theirs, "python").is_err());

    // Owned by a proxy token with no usages and no groups, expiring in about two hours.
    let owner = &secret["metadata"]["ownerReferences"][0];
    assert_eq!((owner["controller"].as_bool(), owner["blockOwnerDeletion"].as_bool()), (Some(true), Some(true)));
    let token_path = format!("{SECRETS}/{}", owner["name"].as_str().unwrap());
    let token = c.double.object(&token_path).expect("proxy token");
    assert_eq!(token["metadata"]["uid"], owner["uid"]);
    let info = kubestrap::objects::tokens::parse_token_secret(&token).unwrap();
    assert!(info.usages.is_empty() && info.groups.is_empty(), "{:?} {:?}", info.usages, info.groups);
    assert_eq!(info.description, "Proxy for managing TTL for the kubeadm-certs secret");
    let left = info.expiration.unwrap() - time::OffsetDateTime::now_utc();
    assert!(left > time::Duration::minutes(110) && left <= time::Duration::hours(2), "{left}");

    // A bootstrap token may read kubeadm-certs, and no other Secret.
    let ca = std::fs::read(c.scratch.pki("ca.crt")).unwrap();
    let joiner = kubestrap::kube::Client::new(
        &c.double.url(),
        kubestrap::kube::Trust::Ca(ca),
        kubestrap::kube::Auth::Token(TOKEN.into()),
        std::time::Duration::from_secs(5),
    )
    .unwrap();
    assert!(joiner.get(&format!("{SECRETS}/kubeadm-certs")).unwrap().is_some());
    assert_eq!(joiner.get(&token_path).unwrap_err().code(), Some(403));

    // A rerun with the same key re-uploads under a fresh proxy token.
    let r2 = run(&["--upload-certs", "--certificate-key", hex, "--skip-certificate-key-print"]).ok();
    assert!(!r2.stdout().contains(hex), "--skip-certificate-key-print");
    let again = c.double.object(&format!("{SECRETS}/kubeadm-certs")).unwrap();
    let new_owner = again["metadata"]["ownerReferences"][0]["name"].as_str().unwrap().to_string();
    assert_ne!(new_owner, owner["name"].as_str().unwrap());

    // With a controlPlaneEndpoint the join command for control planes carries the key.
    let cpe = c.scratch.dir.path().join("cpe.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &cpe,
        text.replace(
            "kind: ClusterConfiguration\n",
            "kind: ClusterConfiguration\ncontrolPlaneEndpoint: cp.example.test:6443\n",
        ),
    )
    .unwrap();
    let cpe = cpe.display().to_string();
    let show = |extra: &[&str]| {
        let mut a = vec!["init", "phase", "show-join-command", "--config", &cpe, "--root", &root];
        a.extend_from_slice(extra);
        kubestrap(&a).ok().stdout()
    };
    let out = show(&["--upload-certs", "--certificate-key", hex]);
    assert!(out.contains(&format!("--control-plane --certificate-key {hex}")), "{out}");
    assert!(out.contains("kubestrap join cp.example.test:6443 --token"), "{out}");
    assert!(out.contains("uploaded-certs will be deleted in two hours"), "{out}");
    let out = show(&[]);
    assert!(out.contains("by copying certificate authorities") && !out.contains("--certificate-key"), "{out}");

    // The token expires: the tokencleaner deletes it, the garbage collector the Secret.
    let mut expired = c.double.object(&format!("{SECRETS}/{new_owner}")).unwrap();
    expired["data"]["expiration"] = STANDARD.encode("2001-01-01T00:00:00Z").into();
    c.double.put_object(expired).unwrap();
    assert!(c.double.object(&format!("{SECRETS}/kubeadm-certs")).is_none(), "collected with its token");
}

#[test]
fn certificate_key_command_prints_a_fresh_key() {
    let a = kubestrap(&["certs", "certificate-key"]).ok().stdout();
    let b = kubestrap(&["certs", "certificate-key"]).ok().stdout();
    assert_eq!(a.trim().len(), 64);
    assert!(CertificateKey::parse(a.trim()).is_ok());
    assert_ne!(a, b);
}
