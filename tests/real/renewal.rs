//! A year off: a control plane whose every certificate has expired comes back. The node is
//! stopped, every leaf and the kubelet's identity are re-dated to have ended a month ago (issued
//! 400 days back by the node's own CAs), then the next boot's pre-kubelet stage renews them
//! before the kubelet starts, and the real API server, kubelet and etcd serve again on the same
//! CA and service-account keys.

use std::time::Duration;

use kubestrap::clock::FakeClock;
use kubestrap::fsutil::NodeFs;
use kubestrap::pki::expiry::{Settings, TARGETS};
use kubestrap::pki::renew::{Backup, Outcome, renew};
use time::OffsetDateTime;

use super::cluster::*;
use super::host::Host;
use crate::common::*;

const YEAR: Duration = Duration::from_secs(365 * 86_400);

/// Has the node's lease been renewed after `since` (RFC 3339, seconds)? No lease yet: no.
fn lease_renewed_after(c: &Cluster, node: &str, since: &str) -> Option<()> {
    let (code, out, _) =
        c.kubectl(&["get", "-n", "kube-node-lease", "lease", node, "-o", "jsonpath={.spec.renewTime}"]);
    (code == 0 && out.get(..19)? > &since[..19]).then_some(())
}

fn not_after(pem: &[u8]) -> OffsetDateTime {
    let (_, p) = x509_parser::pem::parse_x509_pem(pem).expect("pem");
    p.parse_x509().expect("x509").validity().not_after.to_datetime()
}

/// Re-issues every leaf, and the kubelet's client certificate, as if made 400 days ago.
fn age_by_400_days(root: &std::path::Path) {
    let fs = NodeFs::new(root);
    let then = OffsetDateTime::now_utc() - time::Duration::days(400);
    let clock = FakeClock::new().at(then);
    let settings = Settings {
        certs_dir: "/etc/kubernetes/pki".into(),
        key_algorithm: kubestrap::config::KeyAlgorithm::Rsa(2048),
        validity: YEAR,
        local_etcd: true,
    };
    let backup = Backup::at(then);
    for t in TARGETS {
        let out = renew(&fs, t.name, &clock, &settings, &backup).expect("re-date");
        assert!(matches!(out, Outcome::Renewed { .. } | Outcome::Missing), "{}: {out:?}", t.name);
    }
    let ca = std::fs::read_to_string(root.join("etc/kubernetes/pki/ca.crt")).unwrap();
    let ca_key =
        kubestrap::pki::keys::parse_pem(&std::fs::read(root.join("etc/kubernetes/pki/ca.key")).unwrap()).unwrap();
    let key = kubestrap::pki::keys::generate(kubestrap::config::KeyAlgorithm::EcdsaP256).unwrap();
    let req = kubestrap::pki::issue::Request {
        cn: "system:node:cp-1".into(),
        orgs: vec!["system:nodes".into()],
        usage: kubestrap::pki::spec::Usage::Client,
        sans: Default::default(),
        validity: YEAR,
        start: then,
    };
    let cert = kubestrap::pki::issue::signed(&req, &key, &ca, &ca_key).unwrap();
    let pki = root.join("var/lib/kubelet/pki");
    std::fs::write(
        pki.join("kubelet-client-2025-10-21-00-00-00.pem"),
        format!("{cert}{}", kubestrap::pki::keys::to_pem(&key)),
    )
    .unwrap();
    let current = pki.join("kubelet-client-current.pem");
    std::fs::remove_file(&current).unwrap();
    std::os::unix::fs::symlink("/var/lib/kubelet/pki/kubelet-client-2025-10-21-00-00-00.pem", &current).unwrap();
}

#[test]
fn a_control_plane_off_for_a_year_renews_before_the_kubelet_and_serves_again() {
    let mut c = Cluster::boot(fixture!("real/boot-control-plane.user-data"));
    let root = c.root();
    let read = |p: &str| std::fs::read(root.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
    let kept = ["ca.crt", "ca.key", "sa.key", "sa.pub", "etcd/ca.crt", "front-proxy-ca.crt"]
        .map(|f| (f, read(&format!("etc/kubernetes/pki/{f}"))));

    // Power off; a year passes.
    drop(c.hosts.remove(0));
    age_by_400_days(&root);
    let now = OffsetDateTime::now_utc();
    assert!(not_after(&read("etc/kubernetes/pki/apiserver.crt")) < now, "the test's premise: expired");
    let aged = read("etc/kubernetes/pki/apiserver.crt");
    let tmp = root.join("etc/kubernetes/tmp");
    let backups_before: Vec<_> =
        tmp.read_dir().map(|d| d.flatten().map(|e| e.file_name()).collect()).unwrap_or_default();

    // The next boot: the pre-kubelet stage renews, then the node starts.
    let boot = run_in(&c.netns, &boot_args("pre-kubelet", &c.scratch.root_str()));
    assert_eq!(boot.code(), 0, "{}\n{}", boot.stdout(), boot.stderr());
    let certs = boot.events().into_iter().find(|e| e["event"] == "certs").expect("a certs event");
    let said = certs["message"].as_str().unwrap().to_string();
    for name in ["apiserver", "apiserver-etcd-client", "etcd-peer", "admin.conf", "scheduler.conf", "kubelet-client"] {
        assert!(said.contains(&format!("{name}: renewed")), "{name} not renewed: {said}");
    }
    // The kubelet's link names a node path (/var/lib/...), as the kubelet wants it.
    let current = std::fs::read_link(root.join("var/lib/kubelet/pki/kubelet-client-current.pem")).unwrap();
    let current = current.strip_prefix("/").unwrap().to_str().unwrap().to_string();
    for p in ["etc/kubernetes/pki/apiserver.crt", "etc/kubernetes/pki/etcd/server.crt", &current] {
        let left = not_after(&read(p)) - now;
        assert!(left > time::Duration::days(360), "{p} is not renewed: {left}");
    }
    for (f, before) in &kept {
        assert_eq!(&read(&format!("etc/kubernetes/pki/{f}")), before, "{f} must never change");
    }
    let status: serde_json::Value = serde_json::from_slice(&read("run/kubestrap/status.json")).unwrap();
    let rows = status["certificates"].as_array().expect("the certificate table");
    assert!(rows.iter().any(|r| r["name"] == "apiserver" && r["residual_days"].as_i64() > Some(360)), "{status}");
    // The old pairs are kept: a backup this boot made holds the expired apiserver.crt.
    let made: Vec<_> = tmp.read_dir().unwrap().flatten().filter(|e| !backups_before.contains(&e.file_name())).collect();
    assert!(
        made.iter().any(|e| e.file_name().to_string_lossy().starts_with("kubeadm-backup-certs-")
            && std::fs::read(e.path().join("pki/apiserver.crt")).ok().as_ref() == Some(&aged)),
        "no kubeadm-backup-certs-* of this boot holds the expired apiserver.crt: {:?}",
        made.iter().map(|e| e.file_name()).collect::<Vec<_>>()
    );

    // Power on: the real kubelet and control plane on the renewed certificates.
    let restarted = kubestrap::pki::check::rfc3339(OffsetDateTime::now_utc());
    let host = Host::start("cp-1", c.netns.clone(), &root, &c.logs, None, false);
    c.hosts.push(host);
    c.wait("the API server live again", || {
        let (code, out, _) = c.kubectl(&["get", "--raw", "/livez"]);
        (code == 0 && out == "ok").then_some(())
    });
    // The kubelet is back on its re-issued identity: it renews its lease after the restart.
    c.wait("the kubelet's lease renewed after the restart", || lease_renewed_after(&c, "cp-1", &restarted));
    c.wait_ready("cp-1");
    // A second pass finds nothing to do.
    let again = run_in(&c.netns, &boot_args("pre-kubelet", &c.scratch.root_str()));
    let certs = again.events().into_iter().find(|e| e["event"] == "certs").expect("a certs event");
    assert!(certs["message"].as_str().unwrap().ends_with("all ok"), "{certs}");
}

/// A worker off for a year: its kubelet identity has ended and it holds no CA key. Without a
/// credential the pass says why and fails; given a new `kubestrap.token` credential it writes a
/// bootstrap-kubelet.conf, and the real kubelet bootstraps again and renews its lease.
#[test]
fn a_worker_whose_identity_expired_reports_why_then_bootstraps_again_from_a_token_credential() {
    let mut c = Cluster::boot(fixture!("real/boot-control-plane.user-data"));
    c.wait_cluster_info_signed();
    let runs = c.boot_node("worker-1", 21, fixture!("real/boot-worker.user-data"), TOKEN);
    assert!(runs.iter().all(|r| r.code() == 0), "{}", runs[0].stderr());
    c.wait_ready("worker-1");
    let (netns, scratch) = c.hosts.remove(1).power_off();
    let scratch = scratch.expect("the worker's root");
    let w = scratch.root();
    // Its identity re-dated to have ended a month ago, signed by the cluster CA.
    let ca = std::fs::read_to_string(c.root().join("etc/kubernetes/pki/ca.crt")).unwrap();
    let ca_key =
        kubestrap::pki::keys::parse_pem(&std::fs::read(c.root().join("etc/kubernetes/pki/ca.key")).unwrap()).unwrap();
    let key = kubestrap::pki::keys::generate(kubestrap::config::KeyAlgorithm::EcdsaP256).unwrap();
    let req = kubestrap::pki::issue::Request {
        cn: "system:node:worker-1".into(),
        orgs: vec!["system:nodes".into()],
        usage: kubestrap::pki::spec::Usage::Client,
        sans: Default::default(),
        validity: YEAR,
        start: OffsetDateTime::now_utc() - time::Duration::days(400),
    };
    let cert = kubestrap::pki::issue::signed(&req, &key, &ca, &ca_key).unwrap();
    let pki = w.join("var/lib/kubelet/pki");
    let old = "kubelet-client-2025-10-21-00-00-00.pem";
    std::fs::write(pki.join(old), format!("{cert}{}", kubestrap::pki::keys::to_pem(&key))).unwrap();
    std::fs::remove_file(pki.join("kubelet-client-current.pem")).unwrap();
    std::os::unix::fs::symlink(format!("/var/lib/kubelet/pki/{old}"), pki.join("kubelet-client-current.pem")).unwrap();
    let cred = w.join("run/credentials/@system/kubestrap.token");
    std::fs::remove_file(&cred).unwrap();
    assert!(!w.join("etc/kubernetes/bootstrap-kubelet.conf").exists());

    let root = scratch.root_str();
    let failed = run_in(&netns, &boot_args("pre-kubelet", &root));
    assert_ne!(failed.code(), 0, "{}", failed.stdout());
    let err = failed.events().into_iter().find(|e| e["event"] == "error").expect("an error event");
    let msg = err["message"].as_str().unwrap();
    assert!(
        msg.contains("system:node:worker-1") && msg.contains("expired at") && msg.contains("kubestrap.token"),
        "{msg}"
    );

    write_file(&cred, TOKEN);
    let ok = run_in(&netns, &boot_args("pre-kubelet", &root));
    assert_eq!(ok.code(), 0, "{}\n{}", ok.stdout(), ok.stderr());
    let certs = ok.events().into_iter().find(|e| e["event"] == "certs").expect("a certs event");
    assert!(certs["message"].as_str().unwrap().contains("kubelet-client: re-bootstrap"), "{certs}");
    assert!(w.join("etc/kubernetes/bootstrap-kubelet.conf").exists());

    let restarted = kubestrap::pki::check::rfc3339(OffsetDateTime::now_utc());
    let logs = c.logs.with_file_name("worker-1");
    c.hosts.push(Host::start("worker-1", netns, &w, &logs, Some(scratch), true));
    c.wait("worker-1's lease renewed on a new identity", || lease_renewed_after(&c, "worker-1", &restarted));
    let current = std::fs::read_link(pki.join("kubelet-client-current.pem")).unwrap();
    assert!(!current.ends_with(old), "the kubelet made a new identity: {current:?}");
    let bundle = std::fs::read(w.join(current.strip_prefix("/").unwrap())).unwrap();
    assert!(not_after(&bundle) > OffsetDateTime::now_utc(), "the new identity is valid");
}
