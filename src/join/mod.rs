//! `kubestrap join`: make a fresh node trust the cluster (discovery) and the cluster trust the
//! node (TLS bootstrap, done here rather than by the kubelet), then leave the kubelet files in
//! the kubelet's own layout so it starts with a valid identity and rotates it itself.
//!
//! The phases (the table is `phases::JOIN_PHASES`), each runnable alone and each reading its
//! input from disk: `preflight` (leaves join-in-progress so a resumed join accepts its own files),
//! `discovery` (writes bootstrap-kubelet.conf: the trusted server, CA and bootstrap token; a
//! resumed join reuses it), `kubelet-start` (reads bootstrap-kubelet.conf, gets the certificate,
//! writes kubelet.conf, removes bootstrap-kubelet.conf); a control-plane join adds
//! `control_plane`'s phases and `wait_control_plane`.

mod args;
pub mod control_plane;
mod discover;
pub mod dry_run;
mod kubelet_start;
mod skew;
mod tls_bootstrap;
pub mod wait_control_plane;

use std::time::Duration;

use log::info;

use crate::clock::Clock;
use crate::config::types::{Arg, Taint};
use crate::error::Result;
use crate::fsutil::NodeFs;
use crate::kube::ApiError;
use crate::node::Node;
use crate::paths;
use crate::retry::{Attempt, Retry};
use crate::status::Reporter;

pub(crate) use args::node_name;
pub use args::{JoinFlags, resolve};
pub use discover::{Discovery, Found};
pub use kubelet_start::kubelet_start;

/// Everything join needs, resolved from flags and/or a JoinConfiguration.
pub struct JoinArgs {
    /// `Some` for `--control-plane` / JoinConfiguration.controlPlane.
    pub control_plane: Option<control_plane::ControlPlaneJoin>,
    /// `None` when no discovery input was given (enough for `join phase kubelet-start`).
    pub discovery: Option<Discovery>,
    pub node_name: String,
    pub hostname: String,
    pub cri_socket: String,
    pub ca_cert_path: String,
    pub kubelet_extra_args: Vec<Arg>,
    pub taints: Vec<Taint>,
    pub discovery_timeout: Duration,
    pub tls_bootstrap_timeout: Duration,
    /// Control-plane joins: wait-control-plane's waits (JoinConfiguration `timeouts`).
    pub kubelet_health_timeout: Duration,
    pub control_plane_health_timeout: Duration,
    /// The JoinConfiguration's `timeouts` as given: a control-plane join's init phases
    /// (mark-control-plane, the etcd and API calls) run under them, as kubeadm join's do.
    pub timeouts: Option<crate::config::types::Timeouts>,
    pub ignore_preflight: Vec<String>,
    /// The patch directory on the node (`--patches`, else patches.directory), if any.
    pub patches: Option<String>,
}

/// What a join phase may read: the resolved arguments and the node.
pub struct JoinContext<'a> {
    pub args: &'a JoinArgs,
    pub node: Node<'a>,
    /// A control plane's init context (the cluster's kubeadm-config as this node's InitConfig),
    /// made once per run: every control-plane phase needs it.
    init: std::cell::OnceCell<crate::init::InitContext<'a>>,
    /// Dry run: every API, etcd and health request goes to this recorder (see `dry_run`).
    pub dry_run_api: Option<crate::kube::Recorder>,
}

impl<'a> JoinContext<'a> {
    /// [`JoinContext::on`] a node built from its parts.
    pub fn new(
        args: &'a JoinArgs,
        fs: &'a NodeFs,
        clock: &'a dyn Clock,
        report: Option<&'a Reporter<'a>>,
    ) -> JoinContext<'a> {
        JoinContext::on(args, Node::new(fs, clock, report))
    }

    /// The context for a run: temp files a killed run left are removed (never trusted).
    pub fn on(args: &'a JoinArgs, node: Node<'a>) -> JoinContext<'a> {
        node.fs.remove_stale_temps(paths::DEFAULT_CERTS_DIR);
        JoinContext { args, node, init: std::cell::OnceCell::new(), dry_run_api: None }
    }

    /// The client as this run uses it: in a dry run, answered by the recorder.
    pub fn api(&self, client: crate::kube::Client) -> crate::kube::Client {
        match &self.dry_run_api {
            Some(r) => client.recording(r.clone()),
            None => client,
        }
    }

    /// One API call made with the bootstrap token (kubelet-start's, and a control plane's reads
    /// of kubeadm-config and kubeadm-certs), retried while the control plane is briefly
    /// unreachable (an API server restarting or overloaded; the kubelet's own TLS bootstrap
    /// retries too), for up to the JoinConfiguration's `timeouts.tlsBootstrap`. A 401 is waited
    /// out too: discovery has just proved the token (cluster-info carried its signature), and an
    /// API server that restarted since rejects bootstrap tokens until its Secret cache syncs.
    /// Other errors end the phase at once.
    pub(crate) fn bootstrap_call<T>(
        &self,
        tag: &str,
        what: &str,
        mut f: impl FnMut() -> std::result::Result<T, ApiError>,
    ) -> Result<T> {
        let retry = Retry {
            what,
            tag,
            timeout: self.args.tls_bootstrap_timeout,
            backoff: &crate::timeouts::API_BACKOFF,
            clock: self.node.clock,
        };
        retry.run(|| match f() {
            Err(e) if e.code() == Some(401) => Attempt::Wait(format!(
                "{e} (discovery proved this bootstrap token moments ago: an API server that has just restarted rejects it until it has read the token's Secret)"
            )),
            r => ApiError::attempt::<_, crate::error::Error>(r),
        })
    }
}

/// The `preflight` phase: kubeadm's worker checks, on this machine only.
pub fn preflight(ctx: &JoinContext) -> Result<()> {
    let a = ctx.args;
    if ctx.node.live {
        let host = a.discovery.as_ref().and_then(Discovery::endpoint_host);
        let (root, name) = (ctx.node.fs.root(), a.node_name.clone());
        let mut input = match &a.control_plane {
            // kubeadm runs its control-plane node checks too: ports, manifests, the etcd data dir.
            Some(cp) => {
                let port =
                    cp.bind_port.and_then(|p| u16::try_from(p).ok()).unwrap_or(crate::constants::DEFAULT_API_PORT);
                crate::preflight::Input::control_plane_join(root, name, a.cri_socket.clone(), host, port)
            }
            None => crate::preflight::Input::worker(root, name, Some(a.cri_socket.clone()), host),
        };
        if let Some(cp) = &a.control_plane {
            // kubeadm 1.37 checks etcd's ports on this node's advertise address (defaulted as
            // kubeadm defaults it); the other ports' bind-address would need the cluster's config.
            input.bind.etcd = match cp.advertise_address.as_str() {
                "" => crate::host::default_address().map(|ip| ip.to_string()),
                a => Some(a.to_string()),
            };
        }
        input.ca_cert_path = a.ca_cert_path.clone();
        input.resuming = ctx.node.fs.exists(&paths::JOIN_IN_PROGRESS);
        info!(
            "[preflight] Running pre-flight checks{}",
            if input.resuming { " (resuming an interrupted join)" } else { "" }
        );
        let pf = crate::preflight::run(ctx.node.host, &input, &a.ignore_preflight);
        if let Some(r) = ctx.node.report {
            r.set(|s| s.preflight = serde_json::to_value(&pf).ok());
        }
        crate::preflight::enforce(&pf)?;
    } else {
        info!("[preflight] Skipped: --root {} is not this machine's root", ctx.node.fs.root().display());
    }
    Ok(ctx.node.fs.write(&paths::JOIN_IN_PROGRESS, b"")?)
}

/// The `discovery` phase; the kubelet's version is checked against the verified cluster's
/// before discovery writes its files.
pub fn discovery(ctx: &JoinContext) -> Result<()> {
    discover::phase(ctx, &|found| skew::check(ctx, found))
}
