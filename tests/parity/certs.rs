//! `kubestrap certs check-expiration` and `certs renew all` against the real kubeadm's on the
//! same node: kubeadm runs chrooted into the node root (`--rootfs`) with a local configuration
//! (so it never asks a cluster) and no network at all (`unshare -n`). Only `residualTime`, which
//! moves with the seconds between the two runs, is compared with a tolerance.

use std::path::Path;
use std::process::Command;

use time::format_description::well_known::Rfc3339;

use crate::bins;
use crate::common::needs::need;
use crate::common::{BASE_CONFIG, Scratch, kubestrap};

/// The config as kubeadm sees it from inside the chroot.
const CONFIG_IN_ROOT: &str = "/kubeadm-config.yaml";

fn kubeadm(root: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new("unshare")
        .arg("-n")
        .arg(bins::bin("kubeadm"))
        .args(["certs"])
        .args(args)
        .args(["--rootfs", &root.display().to_string(), "--config", CONFIG_IN_ROOT])
        .output()
        .expect("run kubeadm");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

fn ours(s: &Scratch, root: &Path, args: &[&str]) -> String {
    let config = s.config();
    let root = root.display().to_string();
    let mut all = vec!["certs"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--root", &root, "--config", &config]);
    kubestrap(&all).ok().stdout()
}

/// A node with kubestrap's PKI and kubeconfigs, and the config where kubeadm's chroot finds it.
fn node() -> Scratch {
    node_with(BASE_CONFIG)
}

fn node_with(config: &str) -> Scratch {
    // kubeadm chroots into the node root; a test skips first with `need!(kubeadm_need())`.
    crate::common::needs::require(crate::common::needs::Need::root());
    let s = Scratch::new(config);
    s.phase("certs").ok();
    s.phase("kubeconfig").ok();
    std::fs::write(s.root().join(CONFIG_IN_ROOT.trim_start_matches('/')), config).expect("config in root");
    s
}

/// The JSON with each residualTime (and, when `dates`, each expirationDate: certificates issued
/// by two runs) checked against the other side's (within `slack` seconds) and then replaced by
/// a placeholder.
fn normalised(theirs: &str, ours: &str, slack: i64, dates: bool) -> (serde_json::Value, serde_json::Value) {
    let mut t: serde_json::Value = serde_json::from_str(theirs).expect("kubeadm's JSON");
    let mut o: serde_json::Value = serde_json::from_str(ours).expect("our JSON");
    for list in ["certificates", "certificateAuthorities"] {
        let (tl, ol) = (t[list].as_array_mut().expect("list"), o[list].as_array_mut().expect("list"));
        assert_eq!(tl.len(), ol.len(), "{list}");
        for (a, b) in tl.iter_mut().zip(ol.iter_mut()) {
            let (x, y) = (a["residualTime"].as_i64().expect("i64"), b["residualTime"].as_i64().expect("i64"));
            assert!((x - y).abs() <= slack, "{list} {}: residualTime {x} vs {y}", a["name"]);
            a["residualTime"] = serde_json::json!("<residual>");
            b["residualTime"] = serde_json::json!("<residual>");
            if dates && let (Some(x), Some(y)) = (a["expirationDate"].as_str(), b["expirationDate"].as_str()) {
                let t = |d: &str| time::OffsetDateTime::parse(d, &Rfc3339).expect("RFC 3339").unix_timestamp();
                assert!((t(x) - t(y)).abs() <= slack, "{list} {}: expirationDate {x} vs {y}", a["name"]);
                a["expirationDate"] = serde_json::json!("<date>");
                b["expirationDate"] = serde_json::json!("<date>");
            }
        }
    }
    (t, o)
}

fn compare_check_expiration(s: &Scratch, root: &Path, what: &str) {
    let (code, theirs, err) = kubeadm(root, &["check-expiration", "-o", "json"]);
    assert_eq!(code, 0, "kubeadm check-expiration ({what}): {err}");
    let mine = ours(s, root, &["check-expiration", "-o", "json"]);
    // Same layout byte for byte once the residual times are set aside.
    let strip = |j: &str| j.lines().filter(|l| !l.contains("\"residualTime\"")).collect::<Vec<_>>().join("\n");
    assert_eq!(strip(&mine), strip(&theirs), "{what}: JSON layout");
    assert_eq!(mine.ends_with('\n'), theirs.ends_with('\n'));
    let (t, o) = normalised(&theirs, &mine, 5, false);
    assert_eq!(o, t, "{what}: -o json");

    let (_, theirs, _) = kubeadm(root, &["check-expiration", "-o", "yaml"]);
    let mine = ours(s, root, &["check-expiration", "-o", "yaml"]);
    let strip = |y: &str| y.lines().filter(|l| !l.contains("residualTime:")).collect::<Vec<_>>().join("\n");
    assert_eq!(strip(&mine), strip(&theirs), "{what}: -o yaml");

    // The table's RESIDUAL TIME is in days (or years): the same unless a run straddles a day.
    let (_, theirs, _) = kubeadm(root, &["check-expiration"]);
    let mine = ours(s, root, &["check-expiration"]);
    assert_eq!(mine, theirs, "{what}: the text table");
}

#[test]
fn check_expiration_prints_what_kubeadm_prints() {
    need!(crate::kubeadm_need());
    let s = node();
    compare_check_expiration(&s, &s.root(), "a fresh node");
    // Missing files and an externally managed CA.
    let pki = s.root().join("etc/kubernetes/pki");
    std::fs::remove_file(pki.join("front-proxy-ca.key")).expect("rm");
    std::fs::remove_file(pki.join("etcd/peer.crt")).expect("rm");
    std::fs::remove_file(s.root().join("etc/kubernetes/scheduler.conf")).expect("rm");
    compare_check_expiration(&s, &s.root(), "missing files and an external front-proxy CA");
}

#[test]
fn renew_all_prints_what_kubeadm_prints_and_kubeadm_reads_the_result() {
    need!(crate::kubeadm_need());
    let s = node();
    let pki = s.root().join("etc/kubernetes/pki");
    std::fs::remove_file(pki.join("front-proxy-ca.key")).expect("rm");
    std::fs::remove_file(s.root().join("etc/kubernetes/scheduler.conf")).expect("rm");
    // Theirs renews a copy of the node; ours the node itself.
    let copy = s.dir.path().join("kubeadm-root");
    let (code, _, err) = crate::common::sh(&format!("cp -a '{}' '{}'", s.root().display(), copy.display()));
    assert_eq!(code, 0, "{err}");
    let (code, theirs, err) = kubeadm(&copy, &["renew", "all"]);
    assert_eq!(code, 0, "kubeadm certs renew all: {err}");
    let mine = ours(&s, &s.root(), &["renew", "all"]);
    assert_eq!(mine, theirs, "certs renew all");
    assert!(mine.contains("Detected external front-proxy-ca, certificate for the front proxy client can't be renewed"));
    assert!(mine.contains("MISSING! certificate embedded in the kubeconfig file for the scheduler manager to use"));

    // kubeadm reads what we renewed (kubeconfigs included) as it reads what it renewed itself.
    let (code, ours_by_kubeadm, err) = kubeadm(&s.root(), &["check-expiration", "-o", "json"]);
    assert_eq!(code, 0, "kubeadm check-expiration on our renewal: {err}");
    let (_, theirs_by_kubeadm, _) = kubeadm(&copy, &["check-expiration", "-o", "json"]);
    let (t, o) = normalised(&theirs_by_kubeadm, &ours_by_kubeadm, 30, true);
    assert_eq!(o, t, "after renew all");
    // Each renewed certificate says what kubeadm's renewed one says (subject, SANs, usages).
    for f in [
        "apiserver.crt",
        "apiserver-kubelet-client.crt",
        "etcd/server.crt",
        "etcd/peer.crt",
        "apiserver-etcd-client.crt",
    ] {
        let text = |root: &Path| {
            let (code, out, err) = crate::common::sh(&format!(
                "openssl x509 -noout -subject -ext subjectAltName,keyUsage,extendedKeyUsage,basicConstraints -in '{}'",
                root.join("etc/kubernetes/pki").join(f).display()
            ));
            assert_eq!(code, 0, "{err}");
            // One block per extension, in a fixed order: rcgen writes subjectAltName first, Go
            // last (the certificates `init phase certs` makes differ from kubeadm's the same way).
            let mut blocks: Vec<String> = Vec::new();
            for line in out.lines() {
                match blocks.last_mut() {
                    Some(b) if line.starts_with(' ') => *b += &format!("\n{line}"),
                    _ => blocks.push(line.to_string()),
                }
            }
            blocks.sort();
            blocks
        };
        assert_eq!(text(&s.root()), text(&copy), "{f}");
        let ca = if f.contains("etcd") { "etcd/ca.crt" } else { "ca.crt" };
        crate::common::openssl_verify(&pki.join(ca), &pki.join(f)).expect("chains to the same CA");
    }
}

/// Our renewal of kubeconfigs kubeadm wrote itself (its own renewal's output, from client-go's
/// serialiser): only the two values change, and kubeadm reads the result.
#[test]
fn renewing_kubeadms_own_kubeconfigs_changes_only_the_client_data() {
    need!(crate::kubeadm_need());
    let s = node();
    let (code, _, err) = kubeadm(&s.root(), &["renew", "all"]);
    assert_eq!(code, 0, "kubeadm certs renew all: {err}");
    let kubeconfigs = ["admin.conf", "super-admin.conf", "controller-manager.conf", "scheduler.conf"];
    let read = |f: &str| std::fs::read_to_string(s.root().join("etc/kubernetes").join(f)).expect("read");
    let before: Vec<String> = kubeconfigs.iter().map(|f| read(f)).collect();
    let out = ours(&s, &s.root(), &["renew", "all"]);
    assert_eq!(out.matches(" renewed\n").count(), 11, "{out}");
    for (f, old) in kubeconfigs.iter().zip(&before) {
        let new = read(f);
        let keep = |t: &str| {
            t.split_inclusive('\n')
                .filter(|l| {
                    let l = l.trim_start();
                    !l.starts_with("client-certificate-data:") && !l.starts_with("client-key-data:")
                })
                .collect::<String>()
        };
        assert_eq!(keep(&new), keep(old), "{f}: every other byte kept");
        assert_ne!(&new, old, "{f}: renewed");
    }
    let (code, _, err) = kubeadm(&s.root(), &["check-expiration", "-o", "json"]);
    assert_eq!(code, 0, "kubeadm reads our renewal of its files: {err}");
}

/// RSA-2048 and external etcd (no etcd rows, no etcd-ca): the same table as kubeadm's; an RSA
/// cluster's renewal makes RSA-2048 keys.
#[test]
fn other_clusters_rsa_and_external_etcd() {
    need!(crate::kubeadm_need());
    let s = node_with(crate::common::fixture!("parity/rsa.yaml"));
    compare_check_expiration(&s, &s.root(), "RSA-2048");
    let (code, theirs, err) = kubeadm(&s.root(), &["renew", "apiserver"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(ours(&s, &s.root(), &["renew", "apiserver"]), theirs);
    let (code, out, err) = crate::common::sh(&format!(
        "openssl x509 -noout -text -in '{}' | grep 'Public-Key'",
        s.root().join("etc/kubernetes/pki/apiserver.crt").display()
    ));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("(2048 bit)"), "{out}");

    let s = node_with(crate::common::fixture!("parity/external-etcd.yaml"));
    compare_check_expiration(&s, &s.root(), "external etcd");
    let names = ours(&s, &s.root(), &["check-expiration", "-o", "yaml"]);
    assert!(!names.contains("etcd"), "{names}");
}
