//! `kubestrap reset`: kubeadm v1.37's reset, phase for phase (`preflight`, `remove-etcd-member`,
//! `cleanup-node`), plus kubestrap's own state, so the next `kubestrap boot` is a first boot.
//! What it leaves (CNI configuration, packet-filtering rules, users' kubeconfigs) it says, as
//! kubeadm does. The machine is asked through the `Host` trait (stopping the kubelet, the CRI's
//! pod sandboxes) and the etcd cluster through [`EtcdConnect`], so tests use fakes for both.

mod cleanup;
mod etcd_member;

use std::io::{BufRead, Write};
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::host::Host;

pub use etcd_member::{EtcdConnect, EtcdMembers, RealEtcd};

/// reset's phases, in order: (name, kubeadm's one-line description).
pub const RESET_PHASES: &[(&str, &str)] = &[
    ("preflight", "Run reset pre-flight checks"),
    ("remove-etcd-member", "Remove a local etcd member."),
    ("cleanup-node", "Run cleanup node."),
];

/// What `kubestrap reset` was asked.
#[derive(Debug, Clone)]
pub struct ResetArgs {
    pub root: PathBuf,
    /// Do not ask for confirmation.
    pub force: bool,
    /// Say what would be done; change nothing.
    pub dry_run: bool,
    pub skip_phases: Vec<String>,
    /// The CRI socket (`unix://` prefix optional); default containerd's.
    pub cri_socket: Option<String>,
    /// The certificates directory to empty (default /etc/kubernetes/pki).
    pub cert_dir: String,
    /// Also empty /etc/kubernetes/tmp.
    pub cleanup_tmp_dir: bool,
    /// Accepted as kubeadm's flag; kubestrap reads the node's own files, not kubeadm-config.
    pub kubeconfig: Option<String>,
    /// `reset phase <name>`: only this phase.
    pub only: Option<String>,
}

/// Where reset acts: the machine and the cluster's etcd (fakes in tests), the node's files, and
/// the terminal (the confirmation prompt and kubeadm's stdout lines).
pub struct ResetEnv<'a> {
    pub host: &'a dyn Host,
    /// The node root is this machine's `/`: the kubelet and the CRI runtime are this node's.
    pub live: bool,
    pub etcd: &'a dyn EtcdConnect,
    /// Waits between etcd retries.
    pub clock: &'a dyn crate::clock::Clock,
    pub input: &'a mut dyn BufRead,
    pub out: &'a mut dyn Write,
}

/// Runs reset (or one phase of it).
pub fn run(args: &ResetArgs, env: &mut ResetEnv<'_>) -> Result<()> {
    let selected = select(args)?;
    let fs = NodeFs::new(&args.root);
    // Preflight (the question) comes first and leaves no trace, not even the run lock.
    if selected.contains(&"preflight") {
        preflight(args, env)?;
    }
    // A boot running meanwhile would write what reset deletes: wait for it.
    let _lock = if args.dry_run { None } else { fs.lock()? };
    for name in &selected {
        match *name {
            "remove-etcd-member" => etcd_member::run(&fs, args, env)?,
            "cleanup-node" => cleanup::run(&fs, args, env)?,
            _ => {}
        }
    }
    if args.only.is_none() {
        say(env, &cleanup::LEFT_IN_PLACE.join("\n"))?;
    }
    Ok(())
}

/// The phases to run: one by `reset phase`, else all but the skipped ones (unknown names refused).
fn select(args: &ResetArgs) -> Result<Vec<&'static str>> {
    let known = || RESET_PHASES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
    let find =
        |n: &str| RESET_PHASES.iter().map(|(p, _)| *p).find(|p| *p == n || (*p == "preflight" && n == "pre-flight"));
    if let Some(only) = &args.only {
        let p = find(only)
            .ok_or_else(|| Error::bad_flag(format!("unknown reset phase {only:?}; reset's phases: {}", known())))?;
        return Ok(vec![p]);
    }
    let mut skip = Vec::new();
    for s in &args.skip_phases {
        skip.push(find(s).ok_or_else(|| {
            Error::bad_flag(format!("--skip-phases: unknown reset phase {s:?}; reset's phases: {}", known()))
        })?);
    }
    Ok(RESET_PHASES.iter().map(|(n, _)| *n).filter(|n| !skip.contains(n)).collect())
}

/// A line on stdout, as kubeadm prints its reset progress.
pub(crate) fn say(env: &mut ResetEnv<'_>, line: &str) -> Result<()> {
    writeln!(env.out, "{line}").map_err(|e| Error::failed(format!("writing to stdout: {e}")))
}

/// kubeadm's reset preflight: the confirmation (unless `--force` or `--dry-run`), then the root
/// check on this machine.
fn preflight(args: &ResetArgs, env: &mut ResetEnv<'_>) -> Result<()> {
    if !args.force && !args.dry_run {
        log::warn!(
            "[reset] WARNING: Changes made to this host by 'kubestrap init', 'join' or 'boot' will be reverted."
        );
        write!(env.out, "[reset] Are you sure you want to proceed? [y/N]: ")
            .and_then(|()| env.out.flush())
            .map_err(|e| Error::failed(format!("writing to stdout: {e}")))?;
        let mut answer = String::new();
        env.input.read_line(&mut answer).map_err(|e| Error::failed(format!("reading the answer from stdin: {e}")))?;
        if !matches!(answer.trim(), "y" | "Y") {
            return Err(Error::failed(
                "won't proceed; the user didn't answer (Y|y) in order to continue (use --force to skip the question)",
            ));
        }
    }
    say(env, "[preflight] Running pre-flight checks")?;
    if env.live && env.host.euid() != 0 {
        return Err(Error::preflight(
            "[preflight] Some fatal errors occurred: [ERROR IsPrivilegedUser]: user is not running as root; run reset as root",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
