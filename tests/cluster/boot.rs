//! `kubestrap boot` from user-data alone (NoCloud seed dir and systemd credentials under a
//! scratch root): events on stdout, the status file, the done stamp, failures that explain
//! themselves, and the two stages around a kubelet (played by the API test double).

use crate::common::*;

use std::path::Path;
use std::time::Duration;

fn seed(root: &Path, user_data: &str, hostname: &str) {
    let d = root.join("var/lib/cloud/seed/nocloud");
    write_file(&d.join("user-data"), user_data);
    write_file(&d.join("meta-data"), format!("instance-id: i-1\nlocal-hostname: {hostname}\n"));
    only_nocloud(root);
}

/// Only the seed: never probe a metadata server off this machine.
fn only_nocloud(root: &Path) {
    write_file(&root.join("etc/kubestrap/datasource"), "kubestrap.ds=nocloud\n");
}

fn credential(root: &Path, name: &str, value: &str) {
    write_file(&root.join("run/credentials/@system").join(name), value);
}

fn boot(root: &Path, stage: &str) -> Run {
    let root = root.display().to_string();
    kubestrap(&["boot", "--stage", stage, "--root", &root, "--datasource-timeout", "3s"])
}

fn events(r: &Run) -> Vec<serde_json::Value> {
    r.stdout()
        .lines()
        .filter_map(|l| l.strip_prefix("KUBESTRAP-EVENT "))
        .map(|j| serde_json::from_str(j).expect("event is JSON"))
        .collect()
}

fn status(root: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(root.join("run/kubestrap/status.json")).expect("status.json")).unwrap()
}

#[test]
fn control_plane_then_worker_from_user_data_alone() {
    let cp = tempfile::tempdir().unwrap();
    let (port, healthz) = (free_port(), free_port());
    let user_data = fill(fixture!("boot-control-plane/user-data"), &[("port", &port), ("healthz", &healthz)]);
    seed(cp.path(), &user_data, "cp-1");
    // An empty credential (e.g. written by a drop-in) means "none given".
    credential(cp.path(), "kubestrap.token", "");

    let r = boot(cp.path(), "pre-kubelet");
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    let ev = events(&r);
    assert_eq!(ev.first().unwrap()["event"], "start");
    assert!(ev.iter().any(|e| e["event"] == "phase" && e["phase"] == "certs"), "{ev:?}");
    assert_eq!(ev.last().unwrap()["event"], "done");
    let st = status(cp.path());
    assert_eq!(st["state"], "done");
    assert_eq!(st["role"], "control-plane");
    assert_eq!(st["datasource"], "nocloud-seed");
    assert!(cp.path().join("etc/kubernetes/manifests/kube-apiserver.yaml").exists());
    assert!(cp.path().join("etc/kubernetes/pki/ca.key").exists());
    let plan = cp.path().join("var/lib/kubestrap/plan.yaml");
    assert_eq!(mode(&plan), 0o600, "the plan holds the token");
    assert!(
        !r.stdout().contains(SECRET) && !r.stderr().contains(SECRET),
        "token secret leaked before the join command"
    );

    // The "kubelet" starts the static Pods: the API double on the generated PKI.
    let double = start_double(&cp.path().join("etc/kubernetes/pki"), port, healthz, |_| {});
    double.register_node(&kubestrap::host::hostname(), &[]).ok();

    let r = boot(cp.path(), "post-kubelet");
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    assert!(r.stdout().contains("kubestrap join 127.0.0.1:"), "{}", r.stdout());
    assert_eq!(events(&r).last().unwrap()["event"], "done");
    assert!(double.object("/api/v1/namespaces/kube-public/configmaps/cluster-info").is_some());
    let kept = std::fs::read_to_string(&plan).unwrap();
    assert!(!kept.contains(TOKEN), "the token must be scrubbed once the node is bootstrapped:\n{kept}");

    // A second boot is a fast no-op.
    let t = std::time::Instant::now();
    let r = boot(cp.path(), "pre-kubelet");
    assert_eq!(r.code(), 0);
    assert_eq!(events(&r).last().unwrap()["event"], "skipped");
    assert!(t.elapsed() < Duration::from_secs(2));

    // A worker: #cloud-config user-data without the token; the token only as a credential.
    let hash = ca_hash_of_root(cp.path());
    let w = tempfile::tempdir().unwrap();
    seed(w.path(), &fill(fixture!("boot-worker/user-data"), &[("port", &port), ("hash", &hash)]), "worker-1");
    credential(w.path(), "kubestrap.token", TOKEN);
    let r = boot(w.path(), "pre-kubelet");
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    assert!(r.stderr().contains("packages"), "ignored cloud-config keys are reported:\n{}", r.stderr());
    assert!(!r.stdout().contains(SECRET) && !r.stderr().contains(SECRET), "token secret leaked");
    assert!(std::fs::read_link(w.path().join("var/lib/kubelet/pki/kubelet-client-current.pem")).is_ok());
    assert_eq!(status(w.path())["role"], "worker");
    let kept = std::fs::read_to_string(w.path().join("var/lib/kubestrap/plan.yaml")).unwrap();
    assert!(kept.starts_with("node: !Join") && !kept.contains(TOKEN), "scrub after a successful join:\n{kept}");
    let post = boot(w.path(), "post-kubelet");
    assert_eq!(post.code(), 0, "{}", post.stderr());
    let status_out = kubestrap(&["status", "--root", w.path().to_str().unwrap()]);
    assert_eq!(status_out.code(), 0, "{}", status_out.stderr());
}

#[test]
fn broken_user_data_fails_with_the_reason_and_writes_nothing() {
    let r0 = tempfile::tempdir().unwrap();
    seed(r0.path(), fixture!("boot-broken/user-data"), "cp-1");
    let r = boot(r0.path(), "pre-kubelet");
    assert_eq!(r.code(), 2, "{}", r.stderr());
    let last = events(&r).last().cloned().unwrap();
    assert_eq!(last["event"], "error");
    assert!(last["message"].as_str().unwrap().contains("localAPIEndpoint.bindPort"), "{last}");
    assert!(!r0.path().join("etc/kubernetes").exists(), "nothing may be written");
    let st = status(r0.path());
    assert_eq!(st["state"], "failed");
    assert_eq!(st["exit_code"], 2);
    let s = kubestrap(&["status", "--root", r0.path().to_str().unwrap()]);
    assert_ne!(s.code(), 0);
    assert!(s.stdout().contains("failed") && s.stdout().contains("bindPort"), "{}", s.stdout());
    // The next boot tries again (no done stamp) and counts the attempt.
    let again = boot(r0.path(), "pre-kubelet");
    assert_eq!(again.code(), 2);
    assert_eq!(status(r0.path())["attempt"], 2);
}

#[test]
fn no_datasource_is_reported_with_every_reason() {
    let r0 = tempfile::tempdir().unwrap();
    only_nocloud(r0.path());
    let r = boot(r0.path(), "pre-kubelet");
    assert_eq!(r.code(), 1, "{}", r.stderr());
    assert!(r.stderr().contains("no datasource found"), "{}", r.stderr());
}
