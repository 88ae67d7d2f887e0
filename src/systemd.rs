//! systemd integration: starting the kubelet once its files are in place.

use log::{info, warn};

/// `systemctl daemon-reload && systemctl restart kubelet`, as kubeadm does, when this machine
/// runs systemd; otherwise says why it did not. Inside a unit (kubestrap.service is
/// Before=kubelet.service) a blocking restart would wait for our own unit to finish — a
/// deadlock — and the ordering starts the kubelet right after us anyway, so there we only queue
/// the restart. In kubestrap.service itself even that is skipped: kubestrap-post.service Wants=
/// the kubelet, after us, so it starts anyway, and spawning systemctl costs a first boot a few
/// hundred ms on a slow VM.
pub fn restart_kubelet() {
    if in_pre_kubelet_unit() {
        info!("[kubelet-start] kubelet.service starts once this unit is done (it is ordered after it)");
        return;
    }
    if !std::path::Path::new("/run/systemd/system").exists() {
        info!("[kubelet-start] systemd is not running here; start the kubelet yourself");
        return;
    }
    if std::env::var_os("INVOCATION_ID").is_some() {
        queue_kubelet_restart("[kubelet-start]");
        return;
    }
    said("[kubelet-start]", systemctl(&["daemon-reload"]).and_then(|_| systemctl(&["restart", "kubelet.service"])));
}

/// `systemctl restart --no-block kubelet.service`, from a unit ordered after the kubelet (or
/// inside any unit, where a blocking restart could wait on the unit itself); `tag` starts the
/// lines it logs.
pub fn queue_kubelet_restart(tag: &str) {
    said(tag, systemctl(&["restart", "--no-block", "kubelet.service"]));
}

fn systemctl(args: &[&str]) -> std::io::Result<std::process::ExitStatus> {
    std::process::Command::new("systemctl").args(args).status()
}

/// Logs how a restart went.
fn said(tag: &str, result: std::io::Result<std::process::ExitStatus>) {
    match result {
        Ok(s) if s.success() => info!("{tag} Restarted kubelet.service"),
        Ok(s) => warn!("{tag} systemctl restart kubelet.service exited with {s}; check `journalctl -u kubelet`"),
        Err(e) => warn!("{tag} could not run systemctl: {e}"),
    }
}

/// Is this process kubestrap.service (the unit ordered Before=kubelet.service)?
fn in_pre_kubelet_unit() -> bool {
    std::fs::read_to_string("/proc/self/cgroup").is_ok_and(|c| c.lines().any(|l| l.ends_with("/kubestrap.service")))
}
