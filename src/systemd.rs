//! systemd integration: starting the kubelet once its files are in place.

use log::{info, warn};

/// `systemctl daemon-reload && systemctl restart kubelet`, as kubeadm does, when this machine
/// runs systemd and has a kubelet unit; otherwise says why it did not.
pub fn restart_kubelet() {
    if !std::path::Path::new("/run/systemd/system").exists() {
        info!("[kubelet-start] systemd is not running here; start the kubelet yourself");
        return;
    }
    let run = |args: &[&str]| std::process::Command::new("systemctl").args(args).status();
    match run(&["daemon-reload"]).and_then(|_| run(&["restart", "kubelet.service"])) {
        Ok(s) if s.success() => info!("[kubelet-start] Restarted kubelet.service"),
        Ok(s) => {
            warn!("[kubelet-start] systemctl restart kubelet.service exited with {s}; check `journalctl -u kubelet`")
        }
        Err(e) => warn!("[kubelet-start] could not run systemctl: {e}"),
    }
}
