//! Runs the real kubeadm's on-disk init phases. Its paths are fixed, so it runs in private mount
//! and network namespaces: tmpfs over /etc/kubernetes and /var/lib (so it creates
//! /var/lib/kubelet and /var/lib/etcd itself, with its own modes) and no network at all.

use crate::bins;
use crate::common::sh;
use std::path::{Path, PathBuf};

/// The phases that only write files (kubelet-start writes its files, then fails to reach
/// systemd and only warns).
const PHASES: &[&str] = &["certs all", "kubeconfig all", "etcd local", "control-plane all", "kubelet-start"];

/// Runs the phases on `config` from `dir`, copying what kubeadm wrote to
/// `<dir>/kubeadm/{etc/kubernetes,var/lib/kubelet,var/lib/etcd}`; returns that root.
pub fn init_on_disk(config: &Path, dir: &Path) -> PathBuf {
    let root = dir.join("kubeadm");
    assert!(rustix::process::geteuid().is_root(), "tests/parity needs root: kubeadm runs in its own mount namespace");
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
