//! Existing state on disk: valid files are reused byte for byte, missing ones are made again
//! by the same CA, invalid ones stop the run with an error naming the file and stay untouched.

use crate::common::*;

use crate::common::needs::{Need, need};
use kubestrap::pki::check::CertFile;
use std::fs;

fn read(p: &std::path::Path) -> Vec<u8> {
    fs::read(p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

fn cert(p: &std::path::Path) -> CertFile {
    CertFile::parse(&read(p)).unwrap()
}

#[test]
fn second_run_changes_nothing() {
    let s = Scratch::new(BASE_CONFIG);
    s.init(&[]).ok();
    let before = snapshot(&s.root());
    assert!(before.len() >= 30, "expected the full control plane, got {} files", before.len());
    let r = s.init(&[]).ok();
    assert_eq!(before, snapshot(&s.root()), "second run changed files");
    assert!(r.stderr().contains("Using existing ca certificate authority"), "{}", r.stderr());
    assert!(r.stderr().contains("Using existing kubeconfig file"), "{}", r.stderr());
}

#[test]
fn deleted_leaf_is_regenerated_by_the_same_ca_and_nothing_else_changes() {
    need!(Need::tool("openssl"));
    let s = Scratch::new(BASE_CONFIG);
    s.init(&[]).ok();
    let before = snapshot(&s.root());
    let (crt, key) = (s.pki("apiserver.crt"), s.pki("apiserver.key"));
    fs::remove_file(&crt).unwrap();
    fs::remove_file(&key).unwrap();
    s.init(&[]).ok();
    let after = snapshot(&s.root());
    let changed: Vec<_> = before.iter().zip(&after).filter(|(a, b)| a != b).map(|(a, _)| a.0.clone()).collect();
    assert_eq!(changed, vec![crt.clone(), key.clone()], "only the deleted pair may change");
    openssl_verify(&s.pki("ca.crt"), &crt).unwrap();
}

#[test]
fn a_key_whose_cert_was_never_written_is_reused() {
    let s = Scratch::new(BASE_CONFIG);
    s.init(&[]).ok();
    let key_before = read(&s.pki("front-proxy-client.key"));
    fs::remove_file(s.pki("front-proxy-client.crt")).unwrap();
    let r = s.init(&[]).ok();
    assert!(r.stderr().contains("Reusing the existing key"), "{}", r.stderr());
    assert_eq!(key_before, read(&s.pki("front-proxy-client.key")));
    let key = kubestrap::pki::keys::parse_pem(&key_before).unwrap();
    assert_eq!(cert(&s.pki("front-proxy-client.crt")).spki().unwrap(), kubestrap::pki::keys::spki(&key));
}

/// Runs init on a root whose file was tampered with; it must fail with exit 2, name `file`,
/// say `why`, and leave every file as it was.
fn assert_refused(s: &Scratch, file: &std::path::Path, why: &str) {
    let before = snapshot(&s.root());
    let r = s.init(&[]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    assert!(r.stderr().contains(&name), "error does not name {name}: {}", r.stderr());
    assert!(r.stderr().contains(why), "error does not say {why:?}: {}", r.stderr());
    assert_eq!(before, snapshot(&s.root()), "a refused run changed files");
}

#[test]
fn leaf_from_another_ca_is_refused() {
    let a = Scratch::new(BASE_CONFIG);
    a.init(&[]).ok();
    let b = Scratch::new(BASE_CONFIG);
    b.init(&[]).ok();
    for f in ["apiserver.crt", "apiserver.key"] {
        fs::copy(b.pki(f), a.pki(f)).unwrap();
    }
    assert_refused(&a, &a.pki("apiserver.crt"), "is not signed by the CA");
}

#[test]
fn cert_missing_a_required_san_is_refused() {
    let s = Scratch::new(BASE_CONFIG);
    s.init(&[]).ok();
    fs::write(s.config(), format!("{BASE_CONFIG}apiServer:\n  certSANs: [api.example.com]\n")).unwrap();
    assert_refused(&s, &s.pki("apiserver.crt"), "api.example.com");
}

#[test]
fn expired_cert_is_refused() {
    let s = Scratch::new(BASE_CONFIG);
    s.init(&[]).ok();
    let ca_pem = String::from_utf8(read(&s.pki("ca.crt"))).unwrap();
    let ca_key = kubestrap::pki::keys::parse_pem(&read(&s.pki("ca.key"))).unwrap();
    let key = kubestrap::pki::keys::generate(kubestrap::config::KeyAlgorithm::EcdsaP256).unwrap();
    let req = kubestrap::pki::issue::Request {
        cn: "kube-apiserver-kubelet-client".into(),
        orgs: vec!["kubeadm:cluster-admins".into()],
        usage: kubestrap::pki::spec::Usage::Client,
        sans: Default::default(),
        validity: std::time::Duration::from_secs(3600),
        start: time::OffsetDateTime::now_utc() - time::Duration::days(2),
    };
    let pem = kubestrap::pki::issue::signed(&req, &key, &ca_pem, &ca_key).unwrap();
    fs::write(s.pki("apiserver-kubelet-client.crt"), pem).unwrap();
    fs::write(s.pki("apiserver-kubelet-client.key"), kubestrap::pki::keys::to_pem(&key)).unwrap();
    assert_refused(&s, &s.pki("apiserver-kubelet-client.crt"), "expired at");
}

#[test]
fn key_that_does_not_match_its_cert_is_refused() {
    let s = Scratch::new(BASE_CONFIG);
    s.init(&[]).ok();
    fs::copy(s.pki("apiserver-kubelet-client.key"), s.pki("front-proxy-client.key")).unwrap();
    assert_refused(&s, &s.pki("front-proxy-client.crt"), "does not match its private key");
}

#[test]
fn garbage_cert_file_is_refused() {
    let s = Scratch::new(BASE_CONFIG);
    s.init(&[]).ok();
    fs::write(s.pki("etcd/peer.crt"), "not a certificate").unwrap();
    assert_refused(&s, &s.pki("etcd/peer.crt"), "PEM");
}

#[test]
fn kubeconfig_for_another_endpoint_is_refused() {
    let s = Scratch::new(BASE_CONFIG);
    s.init(&[]).ok();
    fs::write(s.config(), format!("{BASE_CONFIG}controlPlaneEndpoint: lb.example.com:6443\n")).unwrap();
    // The apiserver cert now lacks the endpoint's SAN; remove it so the kubeconfig check is reached.
    fs::remove_file(s.pki("apiserver.crt")).unwrap();
    fs::remove_file(s.pki("apiserver.key")).unwrap();
    let r = s.init(&[]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("admin.conf") && r.stderr().contains("https://lb.example.com:6443"), "{}", r.stderr());
}

#[test]
fn user_supplied_ca_signs_everything_and_is_kept() {
    need!(Need::tool("openssl"));
    for (label, genkey) in [
        ("rsa pkcs1", "openssl genrsa -traditional -out ca.key 2048"),
        ("ec sec1", "openssl ecparam -name prime256v1 -genkey -noout -out ca.key"),
    ] {
        let s = Scratch::new(BASE_CONFIG);
        let pki = s.pki("");
        fs::create_dir_all(&pki).unwrap();
        let (code, _, err) = sh(&format!(
            "cd {} && {genkey} && openssl req -x509 -new -key ca.key -days 3650 -subj /CN=my-corp-ca \
             -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,digitalSignature -out ca.crt",
            pki.display()
        ));
        assert_eq!(code, 0, "{label}: {err}");
        let ca_before = read(&s.pki("ca.crt"));
        s.init(&[]).ok();
        assert_eq!(ca_before, read(&s.pki("ca.crt")), "{label}: CA rewritten");
        for leaf in ["apiserver.crt", "apiserver-kubelet-client.crt"] {
            let verified = openssl_verify(&s.pki("ca.crt"), &s.pki(leaf));
            assert!(verified.is_ok(), "{label}: {leaf} not signed by the supplied CA: {verified:?}");
        }
    }
}

#[test]
fn external_ca_mode_generates_nothing_and_empties_signing_flags() {
    let s = Scratch::new(BASE_CONFIG);
    s.init(&[]).ok();
    fs::remove_file(s.pki("ca.key")).unwrap();
    let certs_before: Vec<_> =
        snapshot(&s.root()).into_iter().filter(|(p, _, _)| !p.to_string_lossy().contains("manifests")).collect();
    let r = s.init(&[]).ok();
    assert!(r.stderr().contains("external CA mode"), "{}", r.stderr());
    let certs_after: Vec<_> =
        snapshot(&s.root()).into_iter().filter(|(p, _, _)| !p.to_string_lossy().contains("manifests")).collect();
    assert_eq!(certs_before, certs_after, "external CA mode must not write PKI or kubeconfigs");
    assert!(!s.pki("ca.key").exists());
    let kcm = String::from_utf8(read(&s.path("/etc/kubernetes/manifests/kube-controller-manager.yaml"))).unwrap();
    assert!(
        kcm.contains("- --cluster-signing-cert-file=\n") && kcm.contains("- --cluster-signing-key-file=\n"),
        "{kcm}"
    );
}

#[test]
fn external_ca_mode_with_a_missing_leaf_names_it() {
    let s = Scratch::new(BASE_CONFIG);
    s.init(&[]).ok();
    fs::remove_file(s.pki("ca.key")).unwrap();
    fs::remove_file(s.pki("apiserver.crt")).unwrap();
    fs::remove_file(s.pki("apiserver.key")).unwrap();
    let r = s.init(&[]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("apiserver.crt") && r.stderr().contains("external CA"), "{}", r.stderr());
}

#[test]
fn dry_run_writes_nothing_and_plans_every_file() {
    let s = Scratch::new(BASE_CONFIG);
    let r = s.init(&["--dry-run"]).ok();
    assert!(snapshot(&s.root()).is_empty(), "dry run wrote files");
    let plan: serde_json::Value = serde_json::from_str(&r.stdout()).expect("plan is JSON");
    let files = plan["files"].as_array().unwrap();
    let find = |p: &str| files.iter().find(|f| f["path"] == p).unwrap_or_else(|| panic!("{p} not in plan"));
    assert_eq!(find("/etc/kubernetes/pki/ca.key")["mode"], "0600");
    assert_eq!(find("/etc/kubernetes/pki/ca.crt")["mode"], "0644");
    assert_eq!(find("/etc/kubernetes/admin.conf")["mode"], "0600");
    assert_eq!(find("/etc/kubernetes/manifests/etcd.yaml")["mode"], "0600");
    assert_eq!(
        files.len(),
        10 * 2 + 2 + 5 + 4 + 3,
        "10 cert+key pairs, sa pair, 5 kubeconfigs, 4 manifests, kubelet flags + instance config + config"
    );
    for f in files {
        assert_eq!(f["sha256"].as_str().unwrap().len(), 64);
    }
    // The plan's hash of a deterministic file equals what a real run writes.
    s.init(&[]).ok();
    let real = read(&s.path("/etc/kubernetes/manifests/kube-scheduler.yaml"));
    use sha2::Digest;
    let hex: String = sha2::Sha256::digest(&real).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(find("/etc/kubernetes/manifests/kube-scheduler.yaml")["sha256"], hex.as_str());
}

#[test]
fn single_phases_run_alone_and_later_phases_need_earlier_output() {
    let s = Scratch::new(BASE_CONFIG);
    let r = s.phase("kubeconfig");
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("ca.crt is missing") && r.stderr().contains("phase certs"), "{}", r.stderr());
    s.phase("certs").ok();
    assert!(s.pki("ca.crt").exists() && !s.path("/etc/kubernetes/admin.conf").exists());
    s.phase("kubeconfig").ok();
    assert!(s.path("/etc/kubernetes/admin.conf").exists());
    assert!(!s.path("/etc/kubernetes/manifests/etcd.yaml").exists());
    s.init(&["--skip-phases", "etcd"]).ok();
    assert!(!s.path("/etc/kubernetes/manifests/etcd.yaml").exists());
    assert!(s.path("/etc/kubernetes/manifests/kube-apiserver.yaml").exists());
}

/// kubeadm 1.33+ points an init node's kubelet.conf at the local API server, not the
/// controlPlaneEndpoint: a rerun keeps such a file, and refuses one pointing elsewhere.
#[test]
fn kubelet_conf_points_at_the_local_api_server_and_reruns_keep_it() {
    let s = Scratch::new(&format!("{BASE_CONFIG}controlPlaneEndpoint: lb.example.internal:6443\n"));
    s.phase("certs").ok();
    s.phase("kubeconfig").ok();
    let path = s.path("/etc/kubernetes/kubelet.conf");
    let text = String::from_utf8(read(&path)).unwrap();
    assert!(text.contains("server: https://10.0.0.10:6443\n"), "{text}");
    let admin = String::from_utf8(read(&s.path("/etc/kubernetes/admin.conf"))).unwrap();
    assert!(admin.contains("server: https://lb.example.internal:6443\n"), "{admin}");
    let r = s.phase("kubeconfig").ok();
    assert!(r.stderr().contains("Using existing kubeconfig file: \"/etc/kubernetes/kubelet.conf\""), "{}", r.stderr());
    assert_eq!(read(&path), text.as_bytes());
    fs::write(&path, text.replace("https://10.0.0.10:6443", "https://lb.example.internal:6443")).unwrap();
    let r = s.phase("kubeconfig");
    assert_ne!(r.code(), 0);
    assert!(
        r.stderr().contains("points at https://lb.example.internal:6443 instead of https://10.0.0.10:6443"),
        "{}",
        r.stderr()
    );
}
