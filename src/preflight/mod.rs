//! Preflight: can this machine become a node? kubeadm's checks under kubeadm's names (so
//! `--ignore-preflight-errors` values and runbooks carry over), probed with syscalls through the
//! `Host` seam, plus a few of our own (clock, disk space, entropy). Every check runs; the report
//! lists all failures at once.

mod checks;
mod input;
pub use checks::RUNTIME_CONFIG_MISSING;
pub use input::{PreflightError, enforce};
mod proxy;
mod system;

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde::Serialize;

use crate::config::values::{Cidr, Version};
use crate::host::Host;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    ControlPlane,
    Worker,
    /// `join --control-plane`: kubeadm's join checks plus its control-plane node checks.
    ControlPlaneJoin,
}

impl Role {
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "control-plane" => Some(Role::ControlPlane),
            "worker" => Some(Role::Worker),
            "control-plane-join" => Some(Role::ControlPlaneJoin),
            _ => None,
        }
    }
}

/// What a failing check is, before `--ignore-preflight-errors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Severity {
    Error,
    Warning,
}

/// What a probe found.
#[derive(Debug, Clone, PartialEq)]
pub enum Probe {
    Pass(String),
    /// Failed: reported at the check's severity.
    Fail(String),
    /// A soft failure: a warning even for an error-severity check.
    Warn(String),
    Skip(String),
}

/// The node facts the checks look at.
#[derive(Debug, Clone)]
pub struct Input {
    pub role: Role,
    /// Node root: node-state paths (manifests, kubeconfigs, etcd dir, units) are read under it.
    pub root: PathBuf,
    pub node_name: String,
    pub cri_socket: String,
    pub kubernetes_version: Version,
    pub bind_port: u16,
    pub advertise_address: Option<IpAddr>,
    pub service_subnets: Vec<Cidr>,
    pub pod_subnets: Vec<Cidr>,
    /// Local etcd data dir on a control plane; `None` with external etcd or on a worker.
    pub etcd_data_dir: Option<String>,
    /// Host of the API endpoint a worker joins (for HTTPProxy and the forwarding check).
    pub discovery_host: Option<String>,
    pub ca_cert_path: String,
    pub certs_dir: String,
    /// An earlier kubestrap run got past preflight: its own files are not leftovers.
    pub resuming: bool,
    /// Where the Port-* checks listen (kubeadm 1.37); `None` is all addresses.
    pub bind: BindAddresses,
    /// The images kubeadm would pull (ImagePull); none where the configuration is not known yet.
    pub images: Vec<String>,
    /// nodeRegistration.imagePullPolicy (`IfNotPresent` when empty).
    pub image_pull_policy: String,
    /// The kubelet binary KubeletVersion asks; `None` is the one on `PATH` (a `--root` join
    /// names the root's own).
    pub kubelet: Option<PathBuf>,
}

/// The address each control-plane port check binds, as kubeadm 1.37 chooses it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BindAddresses {
    /// apiServer.extraArgs `bind-address` (the last one).
    pub api_server: Option<String>,
    /// scheduler.extraArgs `bind-address`.
    pub scheduler: Option<String>,
    /// controllerManager.extraArgs `bind-address`.
    pub controller_manager: Option<String>,
    /// apiServer.extraArgs `advertise-address`, else localAPIEndpoint.advertiseAddress.
    pub etcd: Option<String>,
}

/// A check's probe: asks the machine, says what it found. Probes run concurrently.
pub(crate) type ProbeFn<'a> = Box<dyn Fn(&dyn Host) -> Probe + Send + Sync + 'a>;

/// Probes run on this many threads: the slow ones wait on other programs (`kubelet --version`,
/// the CRI, DNS), so a first boot need not wait for them one after another. The report keeps
/// the table's order.
const PROBE_THREADS: usize = 4;

/// One check: kubeadm's name, what a failure is, the roles it applies to, what to do when it
/// fails, and the probe.
pub(crate) struct Check<'a> {
    pub name: String,
    pub severity: Severity,
    pub roles: &'static [Role],
    pub hint: &'static str,
    pub probe: ProbeFn<'a>,
}

pub(crate) const BOTH: &[Role] = &[Role::ControlPlane, Role::Worker, Role::ControlPlaneJoin];
/// A node that will run the control-plane components (init, or a control-plane join).
pub(crate) const CONTROL_PLANE: &[Role] = &[Role::ControlPlane, Role::ControlPlaneJoin];
/// A node that joins (the kubelet's bootstrap files must be free).
pub(crate) const JOINING: &[Role] = &[Role::Worker, Role::ControlPlaneJoin];
pub const WORKER: &[Role] = &[Role::Worker];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Pass,
    Warning,
    Error,
    Skipped,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub name: String,
    pub result: Outcome,
    pub message: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub hint: String,
    /// An error turned into a warning by --ignore-preflight-errors.
    pub ignored: bool,
    pub duration_us: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub role: String,
    pub rows: Vec<Row>,
    /// Names given to --ignore-preflight-errors that match no check.
    pub unknown_ignores: Vec<String>,
    pub duration_us: u64,
}

impl Report {
    pub fn errors(&self) -> Vec<&Row> {
        self.rows.iter().filter(|r| r.result == Outcome::Error).collect()
    }
    pub fn warnings(&self) -> Vec<&Row> {
        self.rows.iter().filter(|r| r.result == Outcome::Warning).collect()
    }

    /// kubeadm's lines: `[WARNING Name]: message` and `[ERROR Name]: message`, each with what
    /// to do about it.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for r in self.rows.iter().filter(|r| matches!(r.result, Outcome::Warning | Outcome::Error)) {
            let tag = if r.result == Outcome::Error { "ERROR" } else { "WARNING" };
            let ignored = if r.ignored { " (ignored)" } else { "" };
            let hint = if r.hint.is_empty() { String::new() } else { format!(" — {}", r.hint) };
            out.push(format!("[{tag} {}]: {}{ignored}{hint}", r.name, r.message));
        }
        for u in &self.unknown_ignores {
            out.push(format!("[WARNING IgnorePreflightErrors]: {u:?} names no preflight check; it was not applied"));
        }
        out
    }
}

/// Runs every check for `input.role` (on `PROBE_THREADS` threads; rows in table order); `ignore`
/// names (case-insensitive, or `all`) turn errors into warnings.
pub fn run(host: &dyn Host, input: &Input, ignore: &[String]) -> Report {
    run_where(host, input, ignore, &|_| true)
}

/// [`run`] for the named checks of `input.role` only (a check that needs what only discovery
/// learns, such as the cluster's version); `ignore` is still judged against the whole set.
pub fn run_only(host: &dyn Host, input: &Input, ignore: &[String], names: &[&str]) -> Report {
    run_where(host, input, ignore, &|c| names.contains(&c.name.as_str()))
}

fn run_where(host: &dyn Host, input: &Input, ignore: &[String], keep: &dyn Fn(&Check) -> bool) -> Report {
    let start = Instant::now();
    let table: Vec<Check> = checks::table(input).into_iter().filter(|c| c.roles.contains(&input.role)).collect();
    let ignore: Vec<String> = ignore.iter().map(|s| s.trim().to_lowercase()).filter(|s| !s.is_empty()).collect();
    let all = ignore.iter().any(|i| i == "all");
    let unknown_ignores =
        ignore.iter().filter(|i| *i != "all" && !table.iter().any(|c| c.name.to_lowercase() == **i)).cloned().collect();
    let table: Vec<Check> = table.into_iter().filter(|c| keep(c)).collect();
    let row = |c: &Check| {
        let t = Instant::now();
        let probe = (c.probe)(host);
        let duration_us = t.elapsed().as_micros() as u64;
        let (mut result, message) = match probe {
            Probe::Pass(m) => (Outcome::Pass, m),
            Probe::Skip(m) => (Outcome::Skipped, m),
            Probe::Warn(m) => (Outcome::Warning, m),
            Probe::Fail(m) if c.severity == Severity::Error => (Outcome::Error, m),
            Probe::Fail(m) => (Outcome::Warning, m),
        };
        let mut ignored = false;
        if result == Outcome::Error && (all || ignore.contains(&c.name.to_lowercase())) {
            result = Outcome::Warning;
            ignored = true;
        }
        let hint = if matches!(result, Outcome::Warning | Outcome::Error) { c.hint.to_string() } else { String::new() };
        Row { name: c.name.clone(), result, message, hint, ignored, duration_us }
    };
    let next = AtomicUsize::new(0);
    let mut rows: Vec<(usize, Row)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..PROBE_THREADS.min(table.len()))
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(c) = table.get(i) else { return done };
                        done.push((i, row(c)));
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    rows.sort_by_key(|(i, _)| *i);
    let rows = rows.into_iter().map(|(_, r)| r).collect();
    let role = match input.role {
        Role::ControlPlane => "control-plane",
        Role::Worker => "worker",
        Role::ControlPlaneJoin => "control-plane-join",
    };
    Report { role: role.into(), rows, unknown_ignores, duration_us: start.elapsed().as_micros() as u64 }
}

/// The check names for a role, for help output and validation.
pub fn names(input: &Input) -> Vec<String> {
    checks::table(input).into_iter().filter(|c| c.roles.contains(&input.role)).map(|c| c.name).collect()
}

/// kubeadm's name for a path-based check: `/` becomes `-`.
pub(crate) fn path_name(prefix: &str, path: &str) -> String {
    format!("{prefix}-{}", path.replace('/', "-"))
}

#[cfg(test)]
pub(crate) mod tests;
