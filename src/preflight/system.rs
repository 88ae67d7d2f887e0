//! SystemVerification: kubeadm runs system-validators (v1.12.1 for 1.37) here; we check the
//! same things with syscalls and /proc, /sys, /boot: the kernel release (a warning since kubeadm
//! 1.34), cgroup v2 and its controllers, and the kernel config.

use std::path::Path;

use super::Probe;
use crate::host::Host;

/// system-validators' (v1.12.1, kubeadm 1.37) supported kernels, and its note; since kubeadm
/// 1.34 an unsupported kernel only warns.
const KERNEL_NOTE: &str = "Supported LTS versions from the 5.x series are 5.4, 5.10 and 5.15. Any 6.x version is also supported. For cgroups v2 support, the recommended version is 5.10 or newer";
/// cgroup v2 controllers the kubelet needs; hugetlb is optional.
const CGROUP_CONTROLLERS: &[&str] = &["cpu", "cpuset", "memory", "pids"];
/// Kernel options a node needs, checked when the kernel config is readable.
const KERNEL_CONFIG: &[&str] = &[
    "CONFIG_NAMESPACES",
    "CONFIG_NET_NS",
    "CONFIG_PID_NS",
    "CONFIG_IPC_NS",
    "CONFIG_UTS_NS",
    "CONFIG_CGROUPS",
    "CONFIG_CGROUP_CPUACCT",
    "CONFIG_CGROUP_DEVICE",
    "CONFIG_CGROUP_SCHED",
    "CONFIG_CPUSETS",
    "CONFIG_MEMCG",
    "CONFIG_INET",
    "CONFIG_NETFILTER_XT_TARGET_REDIRECT",
    "CONFIG_NETFILTER_XT_MATCH_COMMENT",
    "CONFIG_OVERLAY_FS",
    "CONFIG_SECCOMP",
];

/// system-validators' patterns: `^5\.4.*$`, `^5\.10.*$`, `^5\.15.*$`, and
/// `^([6-9]|[1-9][0-9]+)\.([0-9]+)\.([0-9]+).*$` (so "5.40" passes as "5.4" does there).
fn kernel_supported(release: &str) -> bool {
    if ["5.4", "5.10", "5.15"].iter().any(|p| release.starts_with(p)) {
        return true;
    }
    let digits = |s: &str| s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let mut rest = release;
    let mut parts = Vec::new();
    for i in 0..3 {
        let n = digits(rest);
        if n == 0 {
            return false;
        }
        parts.push(&rest[..n]);
        rest = &rest[n..];
        if i < 2 {
            match rest.strip_prefix('.') {
                Some(r) => rest = r,
                None => return false,
            }
        }
    }
    let major = parts[0];
    (major.len() == 1 && major >= "6") || (major.len() > 1 && !major.starts_with('0'))
}

pub(crate) fn system_verification(h: &dyn Host) -> Probe {
    let release = h.kernel_release();
    let mut problems = Vec::new();
    let mut notes = vec![format!("kernel {release}")];
    let mut warnings = Vec::new();
    if !kernel_supported(&release) {
        warnings.push(format!("kernel release {release} is unsupported. {KERNEL_NOTE}"));
    }
    let cg = Path::new("/sys/fs/cgroup");
    if !h.is_cgroup2(cg) {
        problems.push("cgroup v1 is not supported by kubelet 1.35+: boot with the unified hierarchy (systemd.unified_cgroup_hierarchy=1)".into());
    } else {
        let have = h.read_file(&cg.join("cgroup.controllers")).unwrap_or_default();
        let have: Vec<&str> = have.split_whitespace().collect();
        let missing: Vec<&&str> = CGROUP_CONTROLLERS.iter().filter(|c| !have.contains(c)).collect();
        if missing.is_empty() {
            notes.push("cgroup v2 with cpu, cpuset, memory, pids".into());
        } else {
            problems.push(format!("cgroup v2 controllers missing: {missing:?}"));
        }
    }
    let config = h.read_file(&Path::new("/boot").join(format!("config-{release}")));
    match config {
        Some(cfg) => {
            let missing: Vec<&&str> = KERNEL_CONFIG
                .iter()
                .filter(|opt| !cfg.lines().any(|l| l == format!("{opt}=y") || l == format!("{opt}=m")))
                .collect();
            if missing.is_empty() {
                notes.push("kernel config ok".into());
            } else {
                problems.push(format!("kernel config lacks {missing:?}"));
            }
        }
        None => notes.push(format!("/boot/config-{release} not found; kernel options not checked")),
    }
    match (problems.is_empty(), warnings.is_empty()) {
        (true, true) => Probe::Pass(notes.join("; ")),
        (true, false) => Probe::Warn(warnings.join("; ")),
        // An error's message carries the warnings too: one row per check.
        (false, _) => Probe::Fail(problems.into_iter().chain(warnings).collect::<Vec<_>>().join("; ")),
    }
}
