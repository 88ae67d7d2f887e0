//! `certs check-expiration` and `certs renew` on the command line: exit codes, the file named in
//! each error, the backup left on disk (the output itself is compared with kubeadm's in
//! tests/parity/certs.rs).

use std::os::unix::fs::PermissionsExt;

use crate::common::{BASE_CONFIG, Scratch, kubestrap};

fn node() -> Scratch {
    let s = Scratch::new(BASE_CONFIG);
    s.phase("certs").ok();
    s.phase("kubeconfig").ok();
    s
}

fn certs(s: &Scratch, args: &[&str]) -> crate::common::Run {
    let root = s.root_str();
    let mut all = vec!["certs"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--root", &root]);
    kubestrap(&all)
}

#[test]
fn usage_errors_exit_2_and_say_what_is_valid() {
    let s = node();
    let r = certs(&s, &["check-expiration", "-o", "xml"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("-o \"xml\": kubestrap prints text, json or yaml"), "{}", r.stderr());
    for name in ["ca", "sa", "kubelet.conf", "bogus"] {
        let r = certs(&s, &["renew", name]);
        assert_eq!(r.code(), 2, "{name}");
        assert!(r.stderr().contains(&format!("{name} is not a valid certificate for this cluster")), "{}", r.stderr());
        assert!(r.stderr().contains("valid names: admin.conf, apiserver,"), "{}", r.stderr());
    }
    assert!(!s.path("/etc/kubernetes/tmp").exists(), "nothing renewed, nothing backed up");
}

#[test]
fn a_missing_ca_is_named() {
    let s = node();
    std::fs::remove_file(s.pki("ca.crt")).expect("rm");
    for args in [&["check-expiration"][..], &["renew", "apiserver"]] {
        let r = certs(&s, args);
        assert_eq!(r.code(), 2, "{args:?}");
        assert!(r.stderr().contains("/etc/kubernetes/pki/ca.crt is missing"), "{}", r.stderr());
    }
}

#[test]
fn renew_one_prints_kubeadms_line_and_keeps_a_backup() {
    let s = node();
    let old_key = std::fs::read(s.pki("etcd/peer.key")).expect("key");
    let r = certs(&s, &["renew", "etcd-peer"]).ok();
    assert_eq!(r.stdout(), "certificate for etcd nodes to communicate with each other renewed\n");
    assert!(r.stderr().contains("[renew] The replaced files are kept in /etc/kubernetes/tmp/kubeadm-backup-certs-"));
    let tmp = s.path("/etc/kubernetes/tmp");
    let dirs: Vec<_> = std::fs::read_dir(&tmp).expect("tmp").map(|e| e.expect("entry").path()).collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let mode = |p: &std::path::Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&tmp), 0o700);
    assert_eq!(mode(&dirs[0]), 0o700);
    let saved = dirs[0].join("pki/etcd/peer.key");
    assert_eq!(std::fs::read(&saved).expect("backup"), old_key);
    assert_eq!(mode(&saved), 0o600);
    assert_ne!(std::fs::read(s.pki("etcd/peer.key")).expect("key"), old_key);
    assert_eq!(mode(&s.pki("etcd/peer.key")), 0o600);
    // --cert-dir elsewhere: its CA is looked for there.
    let r = certs(&s, &["check-expiration", "--cert-dir", "/nowhere", "-o", "json"]);
    assert_eq!(r.code(), 2, "the CA is where --cert-dir says: {}", r.stderr());
    assert!(r.stderr().contains("/nowhere/ca.crt is missing"), "{}", r.stderr());
}

/// `--kubeconfig` is accepted (kubeadm's scripts pass it) and said to be unused, never dropped in
/// silence: kubestrap reads no configuration from the cluster here.
#[test]
fn kubeconfig_is_accepted_and_said_to_be_unused() {
    let s = node();
    for args in [
        &["check-expiration", "--kubeconfig", "/etc/kubernetes/admin.conf"][..],
        &["renew", "apiserver", "--kubeconfig", "/etc/kubernetes/admin.conf"],
    ] {
        let r = certs(&s, args);
        assert_eq!(r.code(), 0, "{args:?}: {}", r.stderr());
        assert!(r.stderr().contains("--kubeconfig /etc/kubernetes/admin.conf: kubestrap certs"), "{}", r.stderr());
        assert!(r.stderr().contains("the flag is ignored"), "{}", r.stderr());
    }
}
