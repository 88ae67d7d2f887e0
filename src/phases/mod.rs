//! The init phases as data: a name, a one-line description and a function. `kubestrap phases`
//! prints this table; `init` runs it in order; `init phase <name>` runs one entry.

mod api;
mod certs;
mod control_plane;
mod etcd;
mod kubeconfig;
mod kubelet_start;
mod preflight;

use log::info;
use time::OffsetDateTime;

use crate::config::InitConfig;
use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::manifests::HostEnv;

pub use api::GENERATED_TOKEN;
pub use kubeconfig::{KUBECONFIGS, KubeconfigSpec};

/// Everything a phase may read: the validated config, the node's filesystem, the start time
/// (certificates are backdated from it) and host facts for the manifests.
pub struct InitContext<'a> {
    pub cfg: &'a InitConfig,
    pub fs: &'a NodeFs,
    pub start: OffsetDateTime,
    pub env: HostEnv,
    /// `--ignore-preflight-errors` plus nodeRegistration.ignorePreflightErrors.
    pub ignore_preflight: Vec<String>,
    /// Progress for the boot status file and console; `None` on the command line.
    pub report: Option<&'a crate::status::Reporter<'a>>,
}

/// The context for a run: cleans what an interrupted run left (temp files, never trusted) and
/// merges the config's ignorePreflightErrors.
pub fn context<'a>(
    cfg: &'a InitConfig,
    fs: &'a NodeFs,
    mut ignore_preflight: Vec<String>,
    report: Option<&'a crate::status::Reporter<'a>>,
) -> InitContext<'a> {
    fs.remove_stale_temps(cfg.certs_dir());
    ignore_preflight.extend(cfg.init.node_registration.ignore_preflight_errors.iter().cloned());
    InitContext { cfg, env: host_env(fs), fs, start: OffsetDateTime::now_utc(), ignore_preflight, report }
}

pub struct Phase {
    pub name: &'static str,
    pub description: &'static str,
    pub run: fn(&InitContext) -> Result<()>,
}

/// `kubeadm init`'s phases, in kubeadm's order (upload-certs, kubelet-finalize are not ours:
/// no control-plane joins, and kubelet.conf already uses an embedded certificate).
#[rustfmt::skip]
pub const INIT_PHASES: &[Phase] = &[
    Phase { name: "preflight", description: "Check that this machine can become a control-plane node", run: preflight::run },
    Phase { name: "certs", description: "Generate the CAs, leaf certificates and the service-account key pair", run: certs::run },
    Phase { name: "kubeconfig", description: "Write admin, super-admin, kubelet, controller-manager and scheduler kubeconfigs", run: kubeconfig::run },
    Phase { name: "etcd", description: "Write the static Pod manifest for local etcd", run: etcd::run },
    Phase { name: "control-plane", description: "Write the static Pod manifests for the API server, controller-manager and scheduler", run: control_plane::run },
    Phase { name: "kubelet-start", description: "Write the kubelet's config.yaml and flags, and (re)start the kubelet", run: kubelet_start::run },
    Phase { name: "wait-control-plane", description: "Wait for the kubelet, then for the API server's /livez", run: api::wait_control_plane },
    Phase { name: "upload-config", description: "Upload the kubeadm-config and kubelet-config ConfigMaps and their RBAC", run: api::upload_config },
    Phase { name: "mark-control-plane", description: "Wait for the Node, then label and taint it as control-plane", run: api::mark_control_plane },
    Phase { name: "bootstrap-token", description: "Create bootstrap tokens, their RBAC, and the signed cluster-info ConfigMap", run: api::bootstrap_token },
    Phase { name: "addon", description: "Install CoreDNS and kube-proxy", run: api::addons },
    Phase { name: "show-join-command", description: "Print how to use admin.conf and the join command", run: api::show_join_command },
];

/// The phases that write the node's files before any kubelet runs (`--on-disk-only`).
pub const ON_DISK_PHASES: &[&str] = &["preflight", "certs", "kubeconfig", "etcd", "control-plane", "kubelet-start"];

pub fn find(name: &str) -> Option<&'static Phase> {
    INIT_PHASES.iter().find(|p| p.name == name)
}

/// Checks `--skip-phases` names so a typo is an error rather than a phase that silently runs.
pub fn check_skip(skip: &[String]) -> Result<()> {
    for s in skip {
        if find(s).is_none() {
            let known: Vec<&str> = INIT_PHASES.iter().map(|p| p.name).collect();
            return Err(Error::usage(format!("unknown phase {s:?} in skip list; phases are: {}", known.join(", "))));
        }
    }
    Ok(())
}

/// Runs the phases not in `skip`, in order.
pub fn run_init(ctx: &InitContext, skip: &[String]) -> Result<()> {
    check_skip(skip)?;
    for p in INIT_PHASES {
        if skip.iter().any(|s| s == p.name) {
            log::debug!("[{}] Skipped", p.name);
            continue;
        }
        run_one(ctx, p)?;
    }
    Ok(())
}

/// Runs one phase and commits its writes; a failed phase leaves no trace of its own writes.
pub fn run_one(ctx: &InitContext, p: &Phase) -> Result<()> {
    if let Some(r) = ctx.report {
        r.phase(p.name);
    }
    match (p.run)(ctx).and_then(|()| ctx.fs.commit()) {
        Ok(()) => Ok(()),
        Err(e) => {
            ctx.fs.discard();
            Err(e.context(format_args!("phase {}", p.name)))
        }
    }
}

/// Host facts the manifests need, read under the node root.
pub fn host_env(fs: &NodeFs) -> HostEnv {
    HostEnv {
        proxy_env: crate::host::proxy_env(),
        ca_dirs: crate::manifests::OPTIONAL_CA_DIRS
            .iter()
            .filter(|d| fs.real(d).is_dir())
            .map(|d| d.to_string())
            .collect(),
    }
}

pub const MANIFEST_MODE: u32 = 0o600;
pub const MANIFEST_DIR_MODE: u32 = 0o700;

/// Writes `/etc/kubernetes/manifests/<name>.yaml`.
fn write_manifest(ctx: &InitContext, name: &str, pod: &serde_json::Value) -> Result<()> {
    let path = format!("{}/{name}.yaml", crate::constants::MANIFESTS_DIR);
    let yaml = crate::manifests::pod::to_yaml(pod)?;
    if ctx.fs.read(&path)?.as_deref() == Some(yaml.as_bytes()) {
        info!("[manifests] {path} is up to date");
    } else {
        info!("[manifests] Writing static Pod manifest for {name:?} to {path:?}");
    }
    ctx.fs.write(&path, yaml.as_bytes(), MANIFEST_MODE, MANIFEST_DIR_MODE)
}
