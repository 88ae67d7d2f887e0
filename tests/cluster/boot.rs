//! `kubestrap boot` failures that explain themselves: broken user-data, no datasource (the
//! success path, both stages around the real kubelet, is tests/real/boot.rs).

use crate::common::*;

use std::path::Path;

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

fn boot(root: &Path, stage: &str) -> Run {
    let root = root.display().to_string();
    kubestrap(&["boot", "--stage", stage, "--root", &root, "--datasource-timeout", "3s"])
}

fn status(root: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(root.join("run/kubestrap/status.json")).expect("status.json")).unwrap()
}

#[test]
fn broken_user_data_fails_with_the_reason_and_writes_nothing() {
    let r0 = tempfile::tempdir().unwrap();
    seed(r0.path(), fixture!("boot-broken/user-data"), "cp-1");
    // Outside boot's own reports (/run: status and failure files) and bookkeeping (the lock and
    // the attempt counter, which must outlive a reboot) the root stays byte-identical.
    let outside_run = |root: &Path| -> Vec<_> {
        let own = root.join("var/lib/kubestrap");
        tree(root)
            .into_iter()
            .filter(|(p, ..)| !p.starts_with(root.join("run")) && *p != own && p.parent() != Some(own.as_path()))
            .collect()
    };
    let before = outside_run(r0.path());
    let r = boot(r0.path(), "pre-kubelet");
    assert_eq!(r.code(), 2, "{}", r.stderr());
    let after = outside_run(r0.path());
    assert_eq!(after, before, "a refused boot changed a file outside /run");
    let last = r.events().last().cloned().unwrap();
    assert_eq!(last["event"], "error");
    assert!(last["message"].as_str().unwrap().contains("localAPIEndpoint.bindPort"), "{last}");
    assert!(!r0.path().join("etc/kubernetes").exists(), "nothing may be written");
    let st = status(r0.path());
    assert_eq!(st["state"], "failed");
    assert_eq!(st["exit_code"], 2);
    // The failure file next to Cluster API's sentinel, and the same facts as one console line.
    let f: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r0.path().join("run/cluster-api/bootstrap-failure.json")).unwrap())
            .unwrap();
    assert_eq!(
        (f["reason"].as_str(), f["exitCode"].as_i64(), f["stage"].as_str()),
        (Some("ConfigInvalid"), Some(2), Some("pre-kubelet"))
    );
    assert!(f["message"].as_str().unwrap().contains("bindPort"), "{f}");
    assert!(f["logTail"].is_array(), "{f}");
    let line = r.stdout().lines().find(|l| l.starts_with("KUBESTRAP-FAILURE ")).map(str::to_string);
    let line: serde_json::Value =
        serde_json::from_str(&line.expect("a KUBESTRAP-FAILURE line")["KUBESTRAP-FAILURE ".len()..]).unwrap();
    assert_eq!(line["reason"], "ConfigInvalid");
    assert_eq!(line["file"], "/run/cluster-api/bootstrap-failure.json");
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

#[test]
fn a_join_refused_for_its_input_writes_nothing_not_even_its_write_files() {
    let r0 = tempfile::tempdir().unwrap();
    // Valid cloud-config whose kubeadm join lacks a CA pin (and the skip): kubeadm refuses that
    // when it validates the configuration, so nothing of the user-data may have run either.
    let ud = "#cloud-config\nwrite_files:\n- path: /etc/sysctl.d/k8s.conf\n  content: |\n    net.ipv4.ip_forward = 1\n\
              runcmd:\n- kubeadm join 127.0.0.1:1 --token abcdef.0123456789abcdef\n";
    seed(r0.path(), ud, "worker-1");
    let before: Vec<_> = tree(r0.path());
    let r = boot(r0.path(), "pre-kubelet");
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("caCertHashes"), "{}", r.stderr());
    assert!(!r0.path().join("etc/sysctl.d/k8s.conf").exists(), "write_files ran before the refusal");
    assert!(!r0.path().join("var/lib/kubestrap/join-in-progress").exists());
    let own = r0.path().join("var/lib/kubestrap");
    let after: Vec<_> = tree(r0.path())
        .into_iter()
        .filter(|(p, ..)| !p.starts_with(r0.path().join("run")) && *p != own && p.parent() != Some(own.as_path()))
        .collect();
    assert_eq!(after, before);
}
