//! reset's `cleanup-node`, as kubeadm's: stop the kubelet, remove the Kubernetes pods through
//! the CRI, empty the manifests, kubelet and certificates directories (and /etc/kubernetes/tmp
//! with `--cleanup-tmp-dir`), delete the kubeconfigs; then kubestrap's own state, so the next
//! boot is a first boot. kubeadm unmounts everything under /var/lib/kubelet first; kubestrap
//! unmounts nothing it did not mount: a mount point found while emptying a directory is left in
//! place (never descended into) and named, so no volume's data is ever deleted through it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{ResetArgs, ResetEnv, say};
use crate::error::Result;
use crate::fsutil::NodeFs;
use crate::host::Host;
use crate::paths;

/// What reset leaves, said after a whole reset (kubeadm's closing text, then the paths).
pub(crate) const LEFT_IN_PLACE: &[&str] = &[
    "",
    "The reset process does not perform cleanup of CNI plugin configuration,",
    "network filtering rules and kubeconfig files.",
    "",
    "For information on how to perform this cleanup manually, please see:",
    "    https://k8s.io/docs/reference/setup-tools/kubeadm/kubeadm-reset/",
    "",
    "Left in place: the CNI configuration in /etc/cni/net.d, iptables/nftables rules and IPVS tables,",
    "and $HOME/.kube/config. kubestrap's state in /var/lib/kubestrap is gone: the next `kubestrap boot`",
    "is a first boot.",
];

/// The kubeconfigs kubeadm's reset deletes.
const KUBECONFIGS: &[&str] = &[
    "admin.conf",
    "super-admin.conf",
    "kubelet.conf",
    "bootstrap-kubelet.conf",
    "controller-manager.conf",
    "scheduler.conf",
];

/// kubestrap's own files outside /var/lib/kubestrap: the status and the failure file (under
/// /run, gone at reboot anyway) and Cluster API's success sentinel, which would now lie.
const OWN_RUN_FILES: &[&str] = &[
    "/run/kubestrap/status.json",
    "/run/cluster-api/bootstrap-failure.json",
    "/run/cluster-api/bootstrap-success.complete",
];

/// The kubeadm tmp dir (`--cleanup-tmp-dir`).
const TMP_DIR: &str = "/etc/kubernetes/tmp";

/// The directories emptied, as kubeadm lists them.
pub(crate) fn dirs_to_clean(args: &ResetArgs) -> Vec<String> {
    let mut dirs = vec![paths::MANIFESTS_DIR.to_string(), paths::KUBELET_DIR.to_string(), args.cert_dir.clone()];
    if args.cleanup_tmp_dir {
        dirs.push(TMP_DIR.into());
    }
    dirs
}

/// The files deleted, as kubeadm lists them.
pub(crate) fn files_to_clean() -> Vec<String> {
    KUBECONFIGS.iter().map(|k| paths::kubeconfig(k).path.into_owned()).collect()
}

pub(crate) fn run(fs: &NodeFs, args: &ResetArgs, env: &mut ResetEnv<'_>) -> Result<()> {
    stop_kubelet(args, env)?;
    remove_pods(args, env)?;
    if args.cert_dir != paths::DEFAULT_CERTS_DIR {
        log::warn!("[reset] WARNING: Cleaning a non-default certificates directory: {:?}", args.cert_dir);
    }
    let dirs = dirs_to_clean(args);
    let files = files_to_clean();
    let state = paths::STATE_DIR;
    if args.dry_run {
        say(env, &format!("[reset] Would delete contents of directories: [{}]", dirs.join(" ")))?;
        say(env, &format!("[reset] Would delete files: [{}]", files.join(" ")))?;
        say(
            env,
            &format!(
                "[reset] Would delete kubestrap's state: {state} (done stamps, plan, status) and [{}]",
                OWN_RUN_FILES.join(" ")
            ),
        )?;
        return Ok(());
    }
    let mounts = mount_points(env.host);
    say(env, &format!("[reset] Deleting contents of directories: [{}]", dirs.join(" ")))?;
    for d in &dirs {
        let left = empty_dir(&fs.real(d), &mounts, Path::new(d));
        warn_left(&left, d);
    }
    say(env, &format!("[reset] Deleting files: [{}]", files.join(" ")))?;
    for f in files.iter().map(String::as_str).chain(OWN_RUN_FILES.iter().copied()) {
        if let Err(e) = fs.remove(f) {
            log::warn!("[reset] Failed to remove file: {f:?} [{e}]");
        }
    }
    say(
        env,
        &format!(
            "[reset] Deleting kubestrap's state: {state} (done stamps, plan, status): the next `kubestrap boot` is a first boot"
        ),
    )?;
    let left = empty_dir(&fs.real(state), &mounts, Path::new(state));
    warn_left(&left, state);
    Ok(())
}

fn stop_kubelet(args: &ResetArgs, env: &mut ResetEnv<'_>) -> Result<()> {
    if args.dry_run {
        return say(env, "[reset] Would stop the kubelet service");
    }
    if !env.live {
        return say(
            env,
            &format!(
                "[reset] The node root is {}, not this machine: the kubelet service is left alone",
                args.root.display()
            ),
        );
    }
    say(env, "[reset] Stopping the kubelet service")?;
    if let Err(e) = env.host.stop_service("kubelet") {
        log::warn!("[reset] The kubelet service could not be stopped by kubestrap: [{e}]");
        log::warn!("[reset] Please ensure kubelet is stopped manually");
    }
    Ok(())
}

fn remove_pods(args: &ResetArgs, env: &mut ResetEnv<'_>) -> Result<()> {
    if args.dry_run {
        return say(env, "[reset] Would remove Kubernetes-managed containers");
    }
    if !env.live {
        return say(
            env,
            &format!(
                "[reset] The node root is {}, not this machine: its containers are left alone",
                args.root.display()
            ),
        );
    }
    let socket = args.cri_socket.as_deref().unwrap_or(crate::constants::DEFAULT_CRI_SOCKET);
    let path = PathBuf::from(socket.trim_start_matches("unix://"));
    log::info!("[reset] Removing Kubernetes-managed containers");
    let t = crate::timeouts::CRI_RESET_CALL;
    let ids = match env.host.cri_pod_sandboxes(&path, t) {
        Ok(ids) => ids,
        Err(e) => {
            log::warn!("[reset] Failed to remove containers: {e}");
            return Ok(());
        }
    };
    let mut failed = Vec::new();
    for id in &ids {
        if let Err(e) = env.host.cri_remove_pod_sandbox(&path, id, t) {
            failed.push(e.to_string());
        }
    }
    if failed.is_empty() {
        say(env, &format!("[reset] Removed {} pod sandbox(es) and their containers through {socket}", ids.len()))
    } else {
        log::warn!("[reset] Failed to remove containers: {}", failed.join("; "));
        Ok(())
    }
}

/// The mount points on this machine (`/proc/self/mountinfo`, field 5, octal escapes decoded).
pub(crate) fn mount_points(host: &dyn Host) -> Vec<PathBuf> {
    let Some(info) = host.read_file(Path::new("/proc/self/mountinfo")) else { return Vec::new() };
    info.lines().filter_map(|l| l.split(' ').nth(4)).map(|p| PathBuf::from(unescape(p))).collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 4).and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(c) => {
                out.push(char::from(c));
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Removes everything inside `real` (the directory itself stays), never crossing a mount point
/// (in `mounts`, or on another device). Returns what was left and why, named by host path.
pub(crate) fn empty_dir(real: &Path, mounts: &[PathBuf], host: &Path) -> Vec<String> {
    let mut left = Vec::new();
    let Ok(meta) = std::fs::symlink_metadata(real) else { return left };
    if !meta.is_dir() {
        return left;
    }
    let Ok(entries) = std::fs::read_dir(real) else {
        left.push(format!("{}: unreadable", host.display()));
        return left;
    };
    for e in entries.flatten() {
        remove_tree(&e.path(), meta.dev(), mounts, &host.join(e.file_name()), &mut left);
    }
    left
}

fn remove_tree(real: &Path, dev: u64, mounts: &[PathBuf], host: &Path, left: &mut Vec<String>) {
    let Ok(meta) = std::fs::symlink_metadata(real) else { return };
    if meta.is_dir() {
        if meta.dev() != dev || mounts.iter().any(|m| m == real) {
            left.push(format!("{}: a mount point, left mounted", host.display()));
            return;
        }
        if let Ok(entries) = std::fs::read_dir(real) {
            for e in entries.flatten() {
                remove_tree(&e.path(), dev, mounts, &host.join(e.file_name()), left);
            }
        }
        if let Err(e) = std::fs::remove_dir(real) {
            left.push(format!("{}: {e}", host.display()));
        }
    } else if let Err(e) = std::fs::remove_file(real) {
        left.push(format!("{}: {e}", host.display()));
    }
}

/// Warns about what could not be removed from `dir`.
pub(crate) fn warn_left(left: &[String], dir: &str) {
    for l in left.iter().filter(|l| !l.ends_with("Directory not empty (os error 39)")) {
        log::warn!("[reset] Failed to delete contents of {dir:?}: {l}");
    }
    if left.iter().any(|l| l.contains("a mount point")) {
        log::warn!(
            "[reset] kubestrap unmounts nothing it did not mount: unmount what is named above and run reset again"
        );
    }
}

#[cfg(test)]
pub(crate) fn tests_unescape(s: &str) -> String {
    unescape(s)
}
