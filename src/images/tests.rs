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
