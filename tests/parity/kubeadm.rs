//! Runs the real kubeadm's on-disk init phases. Its paths are fixed, so it runs in private mount
//! and network namespaces: tmpfs over /etc/kubernetes and /var/lib (so it creates
//! /var/lib/kubelet and /var/lib/etcd itself, with its own modes) and no network at all.

use crate::bins;
use crate::common::sh;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The phases that only write files (kubelet-start writes its files, then fails to reach
/// systemd and only warns).
const PHASES: &[&str] = &["certs all", "kubeconfig all", "etcd local", "control-plane all", "kubelet-start"];

/// Runs the phases on `config` from `dir`, copying what kubeadm wrote to
/// `<dir>/kubeadm/{etc/kubernetes,var/lib/kubelet,var/lib/etcd}`; returns that root.
pub fn init_on_disk(config: &Path, dir: &Path) -> PathBuf {
    let root = dir.join("kubeadm");
    // kubeadm runs in its own mount namespace; a test skips first with `need!(kubeadm_need())`.
    crate::common::needs::require(crate::common::needs::Need::root());
    let kubeadm = bins::bin("kubeadm");
    let mut script = String::from(
        "set -e; mkdir -p /etc/kubernetes; mount -t tmpfs none /etc/kubernetes; mount -t tmpfs none /var/lib\n",
    );
    for phase in PHASES {
        script += &format!("'{}' init phase {phase} --config '{}'\n", kubeadm.display(), config.display());
    }
    let out = root.display();
    script += &format!(
        "mkdir -p '{out}/etc' '{out}/var/lib'\ncp -a /etc/kubernetes '{out}/etc/'\n\
         for d in kubelet etcd; do if [ -e /var/lib/$d ]; then cp -a /var/lib/$d '{out}/var/lib/'; fi; done\n"
    );
    let file = dir.join("kubeadm.sh");
    std::fs::write(&file, script).expect("write kubeadm.sh");
    let (code, stdout, stderr) = sh(&format!("unshare --net --mount --propagation private sh '{}'", file.display()));
    assert_eq!(code, 0, "kubeadm failed:\n{stdout}\n{stderr}");
    root
}

/// Runs shell `body` in private mount and network namespaces, after tmpfs mounts over
/// /etc/kubernetes and /var/lib; keeps the script as `<dir>/<name>.sh`. (code, stdout, stderr).
pub fn in_namespace(dir: &Path, name: &str, body: &str) -> (i32, String, String) {
    // kubeadm runs in its own mount namespace; a test skips first with `need!(kubeadm_need())`.
    crate::common::needs::require(crate::common::needs::Need::root());
    let file = dir.join(format!("{name}.sh"));
    let script = format!(
        "set -e; mkdir -p /etc/kubernetes; mount -t tmpfs none /etc/kubernetes; mount -t tmpfs none /var/lib\n{body}\n"
    );
    std::fs::write(&file, script).expect("write script");
    sh(&format!("unshare --net --mount --propagation private sh '{}'", file.display()))
}

/// What kubeadm did with a patch directory (tests/parity/patches.rs).
pub struct Patched {
    /// The exit code of each phase, in order.
    pub phases: Vec<i32>,
    pub phases_err: String,
    /// The files (of those asked for) that the phases wrote.
    pub files: BTreeMap<&'static str, Vec<u8>>,
    pub dry_code: i32,
    pub dry_out: String,
    pub dry_err: String,
}

/// After `prepare` (shell commands that put the patch directory in place), runs each of
/// `phases` on `config` whatever the last one did, copies `files` (paths under /) out, then runs
/// `init --dry-run`, which logs every target's patches in one process.
pub fn patched(prepare: &str, config: &Path, dir: &Path, phases: &[&str], files: &[&'static str]) -> Patched {
    let out = dir.join("kubeadm");
    std::fs::create_dir_all(&out).expect("mkdir kubeadm out");
    let (bin, cfg, o) = (bins::bin("kubeadm"), config.display(), out.display());
    let bin = bin.display();
    let mut body = format!("{prepare}\nset +e\n");
    for (i, phase) in phases.iter().enumerate() {
        body += &format!(
            "'{bin}' init phase {phase} --config '{cfg}' >'{o}/p{i}.out' 2>'{o}/p{i}.err'; echo $? >'{o}/p{i}.rc'\n"
        );
    }
    for f in files {
        body += &format!("if [ -f '/{f}' ]; then mkdir -p \"$(dirname '{o}/{f}')\"; cp -a '/{f}' '{o}/{f}'; fi\n");
    }
    body += &format!(
        "'{bin}' init --dry-run --config '{cfg}' --ignore-preflight-errors=all >'{o}/dry.out' 2>'{o}/dry.err'; echo $? >'{o}/dry.rc'"
    );
    let (code, stdout, stderr) = in_namespace(dir, "kubeadm-patched", &body);
    assert_eq!(code, 0, "the kubeadm script failed:\n{stdout}\n{stderr}");
    let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let rc = |name: &str| read(name).trim().parse::<i32>().expect("exit code");
    Patched {
        phases: (0..phases.len()).map(|i| rc(&format!("p{i}.rc"))).collect(),
        phases_err: (0..phases.len()).map(|i| read(&format!("p{i}.err"))).collect(),
        files: files.iter().filter_map(|f| std::fs::read(out.join(f)).ok().map(|b| (*f, b))).collect(),
        dry_code: rc("dry.rc"),
        dry_out: read("dry.out"),
        dry_err: read("dry.err"),
    }
}
