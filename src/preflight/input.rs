//! Building the checks' input from a validated config, and turning a report into log lines and
//! an exit status.

use std::path::Path;

use log::{info, warn};

use super::{BindAddresses, Input, Report, Role};
use crate::config::InitConfig;
use crate::config::values::Version;
use crate::constants::{DEFAULT_CERTS_DIR, DEFAULT_CRI_SOCKET, DEFAULT_KUBERNETES_VERSION};

/// Unignored preflight errors: the `[ERROR ...]` lines and the names to pass to
/// `--ignore-preflight-errors`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "[preflight] Some fatal errors occurred:\n{}\n[preflight] If you know what you are doing, you can make a check \
     non-fatal with `--ignore-preflight-errors={}`",
    .lines.join("\n"),
    .names.join(",")
)]
pub struct PreflightError {
    pub lines: Vec<String>,
    pub names: Vec<String>,
}

impl Input {
    pub fn control_plane(cfg: &InitConfig, root: &Path) -> Input {
        Input {
            role: Role::ControlPlane,
            root: root.to_path_buf(),
            node_name: cfg.node_name.clone(),
            cri_socket: cfg.init.node_registration.cri_socket.clone(),
            kubernetes_version: cfg.version.clone(),
            bind_port: cfg.bind_port,
            advertise_address: Some(cfg.advertise_address),
            service_subnets: cfg.service_subnets.clone(),
            pod_subnets: cfg.pod_subnets.clone(),
            etcd_data_dir: cfg.local_etcd().map(|l| l.data_dir.clone()),
            discovery_host: None,
            ca_cert_path: format!("{}/ca.crt", cfg.certs_dir()),
            certs_dir: cfg.certs_dir().to_string(),
            resuming: false,
            bind: bind_addresses(cfg),
            images: crate::images::required(cfg),
            image_pull_policy: cfg.init.node_registration.image_pull_policy.clone(),
            kubelet: None,
        }
    }

    /// A control-plane join, before discovery: the cluster's configuration is not known yet, so
    /// stacked etcd in the default data dir and the default version are assumed (kubeadm reads
    /// them from the cluster first; the etcd-join phase checks the data dir again).
    pub(crate) fn control_plane_join(
        root: &Path,
        node_name: String,
        cri_socket: String,
        discovery_host: Option<String>,
        bind_port: u16,
    ) -> Input {
        let mut i = Input::worker(root, node_name, Some(cri_socket), discovery_host);
        i.role = Role::ControlPlaneJoin;
        i.bind_port = bind_port;
        i.etcd_data_dir = Some(crate::paths::ETCD_DATA_DIR.into());
        i
    }

    pub fn worker(root: &Path, node_name: String, cri_socket: Option<String>, discovery_host: Option<String>) -> Input {
        Input {
            role: Role::Worker,
            root: root.to_path_buf(),
            node_name,
            cri_socket: cri_socket.unwrap_or_else(|| DEFAULT_CRI_SOCKET.into()),
            // Invariant: the built-in default version always parses.
            kubernetes_version: Version::parse(DEFAULT_KUBERNETES_VERSION).unwrap_or(Version {
                major: 1,
                minor: 37,
                patch: 0,
                suffix: String::new(),
            }),
            bind_port: crate::constants::DEFAULT_API_PORT,
            advertise_address: None,
            service_subnets: Vec::new(),
            pod_subnets: Vec::new(),
            etcd_data_dir: None,
            discovery_host,
            ca_cert_path: format!("{DEFAULT_CERTS_DIR}/ca.crt"),
            certs_dir: DEFAULT_CERTS_DIR.into(),
            resuming: false,
            bind: BindAddresses::default(),
            images: Vec::new(),
            image_pull_policy: String::new(),
            kubelet: None,
        }
    }
}

/// kubeadm's `GetArgValue(args, name, -1)`: the last value given, if not empty.
fn last_arg(args: &[crate::config::types::Arg], name: &str) -> Option<String> {
    args.iter().rev().find(|a| a.name == name).map(|a| a.value.clone()).filter(|v| !v.is_empty())
}

fn bind_addresses(cfg: &InitConfig) -> BindAddresses {
    let c = &cfg.cluster;
    BindAddresses {
        api_server: last_arg(&c.api_server.extra_args, "bind-address"),
        scheduler: last_arg(&c.scheduler.extra_args, "bind-address"),
        controller_manager: last_arg(&c.controller_manager.extra_args, "bind-address"),
        etcd: Some(
            last_arg(&c.api_server.extra_args, "advertise-address")
                .unwrap_or_else(|| cfg.advertise_address.to_string()),
        ),
    }
}

/// Logs the report kubeadm-style and fails (exit 3) when an unignored error remains.
pub fn enforce(report: &Report) -> Result<(), PreflightError> {
    info!("[preflight] Ran {} checks in {} µs", report.rows.len(), report.duration_us);
    for r in report.rows.iter().filter(|r| r.duration_us >= 10_000) {
        log::debug!("[preflight] {} took {} µs", r.name, r.duration_us);
    }
    let errors = report.errors();
    for line in report.lines().into_iter().filter(|l| !l.starts_with("[ERROR")) {
        warn!("\t{line}");
    }
    if errors.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> =
        report.lines().into_iter().filter(|l| l.starts_with("[ERROR")).map(|l| format!("\t{l}")).collect();
    let names: Vec<String> = errors.iter().map(|r| r.name.clone()).collect();
    Err(PreflightError { lines, names })
}

#[cfg(test)]
mod tests {
    use super::*;

    // error.rs gives it exit 3.
    #[test]
    fn error_names_the_checks_to_ignore() {
        let e = PreflightError {
            lines: vec!["\t[ERROR Port-6443]: port 6443 is in use".into()],
            names: vec!["Port-6443".into(), "Swap".into()],
        }
        .to_string();
        assert!(e.starts_with("[preflight] Some fatal errors occurred:\n\t[ERROR Port-6443]"), "{e}");
        assert!(e.ends_with("`--ignore-preflight-errors=Port-6443,Swap`"), "{e}");
    }
}
