use std::io::Write;

use super::archive::{names, normalize};
use super::{ImageError, archives};

fn tar_with(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap()
}

fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

const INDEX: &str = r#"{"schemaVersion":2,"manifests":[{"digest":"sha256:00","annotations":{
    "io.containerd.image.name":"registry.k8s.io/pause:3.10.2","org.opencontainers.image.ref.name":"3.10.2"}}]}"#;

#[test]
fn oci_archives_name_their_images_even_after_the_layers() {
    let d = tempfile::tempdir().unwrap();
    let big = vec![7u8; 100_000];
    let p = write(
        &d,
        "pause.tar",
        &tar_with(&[("blobs/sha256/aa", &big), ("oci-layout", b"{}"), ("index.json", INDEX.as_bytes())]),
    );
    assert_eq!(names(&p).unwrap(), vec!["registry.k8s.io/pause:3.10.2"]);
}

#[test]
fn docker_save_archives_and_gzip_are_read() {
    let d = tempfile::tempdir().unwrap();
    let m = br#"[{"Config":"c.json","RepoTags":["busybox:1.36","quay.io/x/y:2"],"Layers":[]}]"#;
    let t = tar_with(&[("manifest.json", m)]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&t).unwrap();
    let p = write(&d, "b.tar.gz", &gz.finish().unwrap());
    assert_eq!(names(&p).unwrap(), vec!["docker.io/library/busybox:1.36", "quay.io/x/y:2"]);
}

#[test]
fn references_normalise_as_containerd_does() {
    assert_eq!(normalize("busybox"), "docker.io/library/busybox:latest");
    assert_eq!(normalize("user/app:1"), "docker.io/user/app:1");
    assert_eq!(normalize("localhost/app:1"), "localhost/app:1");
    assert_eq!(normalize("127.0.0.1:5000/app"), "127.0.0.1:5000/app:latest");
}

#[test]
fn bad_archives_are_refused_naming_the_file_and_why() {
    let d = tempfile::tempdir().unwrap();
    let cases: Vec<(std::path::PathBuf, &str)> = vec![
        (
            write(&d, "junk.tar", b"this is not a tar archive at all, just text that goes on for a while"),
            "not a readable tar archive",
        ),
        (write(&d, "empty-index.tar", &tar_with(&[("index.json", b"{\"manifests\":[]}")])), "names no image"),
        (write(&d, "no-index.tar", &tar_with(&[("hello.txt", b"hi")])), "neither index.json (OCI) nor manifest.json"),
        (write(&d, "bad-json.tar", &tar_with(&[("index.json", b"{nope")])), "index.json is not an OCI image index"),
        (
            write(
                &d,
                "tag-only.tar",
                &tar_with(&[(
                    "index.json",
                    br#"{"manifests":[{"annotations":{"org.opencontainers.image.ref.name":"v1"}}]}"#,
                )]),
            ),
            "only by its tag \"v1\"",
        ),
        (write(&d, "z.tar", &[0x28, 0xb5, 0x2f, 0xfd, 0, 0]), "zstd-compressed"),
    ];
    for (path, want) in cases {
        match names(&path) {
            Err(e @ ImageError::Archive { .. }) => {
                let text = e.to_string();
                assert!(text.starts_with(&format!("image archive {}: ", path.display())), "{text}");
                assert!(text.contains(want), "{text} (wanted {want:?})");
            }
            other => panic!("{}: {other:?}", path.display()),
        }
    }
}

#[test]
fn archives_are_listed_in_order_and_a_missing_dir_holds_none() {
    let d = tempfile::tempdir().unwrap();
    for n in ["b.tar", "a.tar.gz", "c.tgz", "notes.txt", ".hidden.tar"] {
        write(&d, n, b"");
    }
    let got = archives(&[d.path().join("missing"), d.path().to_path_buf()]).unwrap();
    let names: Vec<_> = got.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["a.tar.gz", "b.tar", "c.tgz"]);
}

/// A stand-in for `ctr` beside its state: `images list` prints what was imported; `images import`
/// of N.tar logs its start and end around 300 ms of work and lists example.com/N:1, or fails
/// for fail.tar as a truncated archive does.
const FAKE_CTR: &str = r#"#!/bin/sh
state=$(dirname "$0")
while [ "$1" != images ]; do shift; done
case "$2" in
list) cat "$state/listed" 2>/dev/null; exit 0 ;;
esac
for f; do :; done
n=$(basename "$f" .tar)
echo "start $n $(date +%s%N)" >>"$state/log"
sleep 0.3
echo "end $n $(date +%s%N)" >>"$state/log"
[ "$n" = fail ] && { echo "ctr: unexpected EOF" >&2; exit 1; }
echo "example.com/$n:1" >>"$state/listed"
"#;

/// A directory of archives, each naming example.com/N:1, and the fake ctr.
fn fake_node(names: &[&str]) -> (tempfile::TempDir, std::path::PathBuf, super::Ctr) {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let images = d.path().join("images");
    std::fs::create_dir(&images).unwrap();
    for n in names {
        let index = format!(
            r#"{{"schemaVersion":2,"manifests":[{{"digest":"sha256:00","annotations":{{"io.containerd.image.name":"example.com/{n}:1"}}}}]}}"#
        );
        std::fs::write(images.join(format!("{n}.tar")), tar_with(&[("index.json", index.as_bytes())])).unwrap();
    }
    let binary = d.path().join("ctr");
    std::fs::write(&binary, FAKE_CTR).unwrap();
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ctr = super::Ctr { binary, address: d.path().join("containerd.sock") };
    (d, images, ctr)
}

/// The most imports the fake's log shows running at once.
fn most_at_once(dir: &std::path::Path) -> usize {
    let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    let mut edges: Vec<(u128, i32)> = log
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[2].parse().unwrap(), if f[0] == "start" { 1 } else { -1 })
        })
        .collect();
    edges.sort();
    let (mut now, mut most) = (0, 0);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

#[test]
fn archives_import_width_at_a_time_and_report_in_archive_order() {
    let (d, images, ctr) = fake_node(&["a", "b", "c", "d", "e"]);
    let mut heard = Vec::new();
    let done =
        super::preload(std::slice::from_ref(&images), &ctr, 2, false, &mut |p| heard.push(p.archive.clone())).unwrap();
    let order: Vec<_> = done.iter().map(|p| (p.images[0].clone(), p.state.clone())).collect();
    let want: Vec<_> =
        ["a", "b", "c", "d", "e"].iter().map(|n| (format!("example.com/{n}:1"), "imported".into())).collect();
    assert_eq!(order, want);
    assert_eq!(heard.len(), 5);
    assert_eq!(most_at_once(d.path()), 2, "two imports at a time");

    // Again: every image is present, nothing is imported.
    std::fs::remove_file(d.path().join("log")).unwrap();
    let again = super::preload(&[images], &ctr, 2, false, &mut |_| {}).unwrap();
    assert!(again.iter().all(|p| p.state == "present"), "{again:?}");
    assert!(!d.path().join("log").exists(), "an import ran for present images");
}

#[test]
fn one_at_a_time_and_no_new_import_after_a_failure() {
    let (d, images, ctr) = fake_node(&["a", "fail", "z"]);
    let mut heard = Vec::new();
    let err = super::preload(&[images], &ctr, 1, false, &mut |p| heard.push(p.archive.clone())).unwrap_err();
    assert!(matches!(err, ImageError::Archive { ref path, .. } if path.ends_with("fail.tar")), "{err}");
    assert!(err.to_string().contains("unexpected EOF"), "{err}");
    assert_eq!(heard.len(), 1, "only a.tar was reported: {heard:?}");
    let log = std::fs::read_to_string(d.path().join("log")).unwrap();
    assert!(!log.contains(" z "), "z.tar was imported after fail.tar failed:\n{log}");
    assert_eq!(most_at_once(d.path()), 1);
}

#[test]
fn a_worker_leaves_the_control_plane_s_archives_alone() {
    let (d, images, ctr) = fake_node(&["etcd", "kube-apiserver", "kube-proxy"]);
    let done = super::preload(std::slice::from_ref(&images), &ctr, 2, true, &mut |_| {}).unwrap();
    let states: Vec<_> = done.iter().map(|p| (p.images[0].as_str(), p.state.as_str())).collect();
    assert_eq!(
        states,
        [
            ("example.com/etcd:1", "not-needed"),
            ("example.com/kube-apiserver:1", "not-needed"),
            ("example.com/kube-proxy:1", "imported")
        ]
    );
    let log = std::fs::read_to_string(d.path().join("log")).unwrap();
    assert!(!log.contains("etcd") && !log.contains("kube-apiserver"), "imported on a worker:\n{log}");
    // A control plane imports them all.
    let done = super::preload(&[images], &ctr, 2, false, &mut |_| {}).unwrap();
    assert_eq!(done.iter().filter(|p| p.state == "imported").count(), 2, "{done:?}");
}

#[test]
fn control_plane_images_are_known_by_repository_whatever_the_registry() {
    let only = |i: &[&str]| super::control_plane_only(&i.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert!(only(&["registry.k8s.io/kube-apiserver:v1.37.2"]));
    assert!(only(&["localhost:5000/etcd:3.6.5-0", "mirror.example/k8s/kube-scheduler:v1.37.2"]));
    assert!(only(&["registry.example:5000/kube-controller-manager@sha256:0123"]));
    assert!(!only(&["registry.k8s.io/kube-proxy:v1.37.2"]));
    assert!(!only(&["registry.k8s.io/etcd:3.6.5-0", "registry.k8s.io/pause:3.10.1"]));
    assert!(only(&["localhost:5000/etcd"]));
    assert!(!only(&["example.com/etcd-operator:1"]));
    assert!(!only(&[]));
}
