//! The shipped systemd units pass `systemd-analyze verify` on this machine's systemd (Debian 12's
//! 252 here, the image's), and every credential they import stays optional.

use crate::common::*;

use std::path::{Path, PathBuf};

/// Every unit kubestrap ships, plus the test image's (its report unit and kubeadm's kubelet unit).
fn units() -> Vec<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = repo.join("units");
    let mut out = Vec::new();
    for d in [dir.clone(), dir.join("test"), repo.join("image/test-node")] {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "service") {
                out.push(p);
            }
        }
    }
    out.sort();
    assert!(out.len() >= 4, "{out:?}");
    out
}

/// A copy of the unit whose ExecStart= binary exists on this machine (the image's paths do not
/// exist here, and verify checks that the binary is executable); the rest is byte-identical.
fn with_local_binary(unit: &Path, dir: &Path, bin: &Path) -> PathBuf {
    let text = std::fs::read_to_string(unit).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        match line.strip_prefix("ExecStart=") {
            Some(cmd) => {
                let args = cmd.split_once(' ').map(|(_, a)| a).unwrap_or("");
                out.push_str(&format!("ExecStart={} {args}\n", bin.display()));
            }
            None => out.push_str(&format!("{line}\n")),
        }
    }
    let copy = dir.join(unit.file_name().unwrap());
    std::fs::write(&copy, out).unwrap();
    copy
}

#[test]
fn units_pass_systemd_analyze_verify() {
    require_tool("systemd-analyze");
    let (_, version, _) = sh("systemctl --version | head -1");
    let d = tempfile::tempdir().unwrap();
    let copies: Vec<PathBuf> = units().iter().map(|u| with_local_binary(u, d.path(), Path::new(&*BIN))).collect();
    let mut cmd = std::process::Command::new("systemd-analyze");
    cmd.arg("verify").args(&copies);
    let (code, out, err) = capture(&mut cmd);
    assert_eq!(code, 0, "systemd-analyze verify ({version}):\n{out}{err}");
    // verify reports a bad directive as a warning and still exits 0 in some versions: any
    // output about our units is a failure.
    assert!(out.trim().is_empty() && err.trim().is_empty(), "{version}:\n{out}{err}");
}

#[test]
fn units_verify_catches_what_systemd_252_rejects() {
    // The check above would see the old empty SetCredential= default (invalid on 252).
    require_tool("systemd-analyze");
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.service");
    std::fs::write(
        &bad,
        format!("[Service]\nType=oneshot\nExecStart={} version\nSetCredential=kubestrap.token:\n", &*BIN),
    )
    .unwrap();
    let (code, out, err) = capture(std::process::Command::new("systemd-analyze").arg("verify").arg(&bad));
    let (_, version, _) = sh("systemctl --version | head -1");
    let major: u32 = version.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    // The images ship Debian 12's systemd 252, the oldest the units support: this check is
    // about its parser, so it runs on that version only, and says so on another.
    assert_eq!(major, 252, "systemd {version:?}: this check needs the images' systemd 252");
    assert!(err.contains("Invalid syntax") || out.contains("Invalid syntax"), "{code}\n{out}{err}");
}

#[test]
fn credentials_are_imported_and_optional() {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("units/kubestrap.service")).unwrap();
    for name in kubestrap::datasource::CREDENTIAL_NAMES {
        // A bare credential name: systemd looks among its own credentials and skips a missing one.
        assert!(text.lines().any(|l| l == format!("LoadCredential={name}")), "{name}:\n{text}");
    }
    assert!(!text.lines().any(|l| l.starts_with("SetCredential=") || l.starts_with("ImportCredential=")), "{text}");
}

/// The first-boot unit waits only for what it needs, is part of the boot's assessment, and the
/// kubelet follows it without a restart (`systemd::restart_kubelet` relies on that ordering inside kubestrap.service).
#[test]
fn units_wait_only_for_what_the_first_boot_needs() {
    let read = |n: &str| std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("units").join(n)).unwrap();
    let values = |text: &str, key: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
            .flat_map(|v| v.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .collect()
    };
    let pre = read("kubestrap.service");
    let after = values(&pre, "After");
    for needed in ["network-online.target", "containerd.service"] {
        assert!(after.iter().any(|u| u == needed), "kubestrap.service must be After={needed}: {after:?}");
        assert!(values(&pre, "Wants").iter().any(|u| u == needed), "kubestrap.service must want {needed}");
    }
    assert!(!after.iter().any(|u| u.contains("udev-settle")), "no udev settle: {after:?}");
    // boot-complete.target: a failed kubestrap.service marks the boot bad (boot assessment).
    assert_eq!(values(&pre, "Before"), ["kubelet.service", "boot-complete.target"]);
    assert_eq!(values(&pre, "RequiredBy"), ["boot-complete.target"]);
    let post = read("kubestrap-post.service");
    assert!(values(&post, "After").iter().any(|u| u == "kubelet.service"), "{post}");
    assert!(values(&post, "Wants").iter().any(|u| u == "kubelet.service"), "{post}");
    // A failed post-kubelet stage (a control plane's upgrade by image rolled back) counts too.
    assert_eq!(values(&post, "Before"), ["boot-complete.target"]);
    assert_eq!(values(&post, "RequiredBy"), ["boot-complete.target"]);
}
