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

/// A stand-in `ctr`: `images list` prints what was imported; `images import` of N.tar lists
/// example.com/N:1 and logs it.
const FAKE_CTR: &str = r#"#!/bin/sh
state=$(dirname "$0")
while [ "$1" != images ]; do shift; done
[ "$2" = list ] && { cat "$state/listed" 2>/dev/null; exit 0; }
for f; do :; done
n=$(basename "$f" .tar)
echo "import $n" >>"$state/log"
echo "example.com/$n:1" >>"$state/listed"
"#;

/// A worker booted on the next image (its image.json newer than the version it recorded) gets
/// the image's archives imported before the upgrade check, as at a first boot; at the node's own
/// version a later boot imports nothing. (Here no kubelet.conf follows, so the check then fails.)
#[test]
fn a_boot_onto_the_next_image_imports_its_archives_first() {
    use std::os::unix::fs::PermissionsExt;
    let r0 = tempfile::tempdir().unwrap();
    let root = r0.path();
    write_file(&root.join("var/lib/kubestrap/done-pre-kubelet"), "");
    write_file(&root.join("var/lib/kubestrap/kubernetes-version"), "v1.36.3\n");
    write_file(&root.join("usr/share/kubestrap/image.json"), r#"{"kubernetesVersion": "v1.36.3"}"#);
    let index = r#"{"schemaVersion":2,"manifests":[{"digest":"sha256:00","annotations":{"io.containerd.image.name":"example.com/pause:1"}}]}"#;
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(index.len() as u64);
    h.set_mode(0o644);
    tar.append_data(&mut h, "index.json", index.as_bytes()).unwrap();
    write_file(&root.join("usr/share/kubestrap/images/pause.tar"), tar.into_inner().unwrap());
    let bin = tempfile::tempdir().unwrap();
    let ctr = bin.path().join("ctr");
    std::fs::write(&ctr, FAKE_CTR).unwrap();
    std::fs::set_permissions(&ctr, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap_or_default());
    let run = || {
        let out = std::process::Command::new(&*BIN)
            .args(["boot", "--stage", "pre-kubelet", "--root", &root.display().to_string()])
            .args(["--image-dir", "/usr/share/kubestrap/images"])
            .env("PATH", &path)
            .env_remove("JOURNAL_STREAM")
            .output()
            .expect("run kubestrap");
        Run { out }
    };
    let same = run();
    assert_eq!(same.code(), 0, "{}", same.stderr());
    assert!(!bin.path().join("log").exists(), "a boot at the node's version imported an archive");

    write_file(&root.join("usr/share/kubestrap/image.json"), r#"{"kubernetesVersion": "v1.37.2"}"#);
    let next = run();
    assert_eq!(std::fs::read_to_string(bin.path().join("log")).unwrap_or_default(), "import pause\n");
    let st = status(root);
    assert_eq!(st["images"][0]["state"], "imported", "{st}");
    assert_eq!(st["images"][0]["images"][0], "example.com/pause:1", "{st}");
    assert_ne!(next.code(), 0, "no kubelet.conf: the upgrade check fails after the import");
    assert!(next.stderr().contains("/etc/kubernetes/kubelet.conf"), "{}", next.stderr());
}
