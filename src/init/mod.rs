//! `kubestrap init`'s steps: one file per phase (the table is `phases::INIT_PHASES`), and
//! the context they share. A control-plane join reuses the writers; nothing here knows `join`.

pub mod addons;
pub mod api;
pub mod certs;
pub mod control_plane;
pub mod etcd;
pub(crate) mod in_order;
pub mod kubeconfig;
pub mod kubelet_finalize;
pub mod kubelet_start;
pub mod preflight;
pub mod upload_certs;

use log::info;
use time::OffsetDateTime;

use crate::clock::Clock;
use crate::config::InitConfig;
use crate::error::Result;
use crate::fsutil::NodeFs;
use crate::manifests::HostEnv;
use crate::node::Node;
use crate::pki::keys::KeyPool;
use crate::retry::Retry;
use crate::status::Reporter;

pub use kubeconfig::{KUBECONFIGS, KubeconfigSpec};
pub use upload_certs::UploadCerts;

/// Everything an init phase may read: the validated config, the node, the start time
/// (certificates are backdated from it) and host facts for the manifests. It owns its config so
/// a control-plane join can keep one for all its phases.
pub struct InitContext<'a> {
    pub cfg: InitConfig,
    pub node: Node<'a>,
    pub start: OffsetDateTime,
    pub env: HostEnv,
    /// `--ignore-preflight-errors` plus nodeRegistration.ignorePreflightErrors.
    pub ignore_preflight: Vec<String>,
    /// `--upload-certs` and its key (off unless asked for, as kubeadm).
    pub upload: UploadCerts,
    /// Dry run: the API phases talk to this recorder instead of the cluster (set by the caller).
    pub dry_run_api: Option<crate::kube::Recorder>,
    /// `--skip-token-print`: the join command shows `<value withheld>` instead of the token.
    pub skip_token_print: bool,
    /// A boot's control-plane phase writes the API server's manifest only (init::in_order).
    pub(crate) apiserver_first: bool,
    /// New private keys, made ahead on every core (RSA); the certs and kubeconfig phases take them.
    pub keys: KeyPool,
    /// admin.conf's client, made once per run: the API phases share its TLS connection.
    pub(crate) admin_client: std::cell::OnceCell<crate::kube::Client>,
    /// The kubeadm:cluster-admins binding is known to exist (checked once per run).
    pub(crate) admin_bound: std::cell::Cell<bool>,
}

impl InitContext<'_> {
    /// Starts making every key the certs and kubeconfig phases will need, on every core, while
    /// the phases before and between them run (RSA generation is most of init's time).
    pub(crate) fn reserve_keys(&self, certs: bool, kubeconfig: bool) {
        let certs_keys = if certs { crate::pki::keys_needed(self.node.fs, &self.cfg) } else { 0 };
        let kubeconfig_keys = if kubeconfig { kubeconfig::keys_needed(self) } else { 0 };
        self.keys.reserve(certs_keys + kubeconfig_keys);
    }
    /// The patch directory's patches (`--patches` or patches.directory), read once per run.
    pub(crate) fn patches(&self) -> Result<Option<std::sync::Arc<crate::patches::Patches>>> {
        let dir = self.cfg.init.patches.as_ref().map(|p| p.directory.as_str());
        Ok(crate::patches::for_dir(self.node.fs, dir)?)
    }
    /// A static Pod with the patches for it applied (`quiet`: no log lines, for a check ahead).
    pub(crate) fn patched_pod(&self, name: &str, pod: serde_json::Value, quiet: bool) -> Result<serde_json::Value> {
        match self.patches()? {
            Some(p) => Ok(p.pod(name, pod, quiet)?),
            None => Ok(pod),
        }
    }
    /// admin.conf's client (see `api::admin`): made once per run, its RBAC binding ensured.
    pub fn admin(&self) -> Result<&crate::kube::Client> {
        api::admin(self)
    }
    /// The key that seals kubeadm-certs (see `upload_certs::certificate_key`).
    pub(crate) fn certificate_key(&self) -> Result<crate::config::values::CertificateKey> {
        upload_certs::certificate_key(self)
    }
    /// Retrying against the control plane, with kubeadm's poll figures and this run's clock.
    pub fn retry<'b>(&'b self, what: &'b str, tag: &'b str, timeout: std::time::Duration) -> Retry<'b> {
        Retry { what, tag, timeout, backoff: &crate::timeouts::API_BACKOFF, clock: self.node.clock }
    }
    /// One API write, its transient errors (a restarting or overloaded API server) waited out
    /// for `timeouts.kubernetesAPICall`, as kubeadm's CreateOrUpdate helpers poll.
    pub(crate) fn apply(&self, client: &crate::kube::Client, tag: &str, obj: &serde_json::Value) -> Result<()> {
        let what = format!("applying {}", crate::kube::paths::describe(obj));
        self.retry(&what, tag, self.cfg.api_call_timeout).run(|| crate::kube::ApiError::attempt(client.apply(obj)))
    }
    /// Waiting for the local kubelet and API server (kubeadm's poll; see `CONTROL_PLANE_CHECK_RETRY`).
    pub(crate) fn poll<'b>(&'b self, what: &'b str, tag: &'b str, timeout: std::time::Duration) -> Retry<'b> {
        Retry { what, tag, timeout, backoff: &crate::timeouts::CONTROL_PLANE_CHECK_RETRY, clock: self.node.clock }
    }
}

impl<'a> InitContext<'a> {
    /// The context for an init run: cleans what an interrupted run left (temp files, never
    /// trusted) and merges the config's ignorePreflightErrors.
    pub fn new(cfg: InitConfig, node: Node<'a>, mut ignore_preflight: Vec<String>) -> InitContext<'a> {
        node.fs.remove_stale_temps(cfg.certs_dir());
        ignore_preflight.extend(cfg.init.node_registration.ignore_preflight_errors.iter().cloned());
        InitContext {
            keys: KeyPool::new(cfg.key_algorithm),
            env: host_env(node.fs),
            cfg,
            node,
            start: OffsetDateTime::now_utc(),
            ignore_preflight,
            upload: UploadCerts::default(),
            dry_run_api: None,
            skip_token_print: false,
            apiserver_first: false,
            admin_client: std::cell::OnceCell::new(),
            admin_bound: std::cell::Cell::new(false),
        }
    }
}

/// Applies every patch of the run's patch directory to its target in memory, quietly, so a
/// patch that cannot apply fails init before its first write (kubeadm finds it in the phase).
/// Only the phases `runs` names are checked.
pub(crate) fn check_patches(ctx: &InitContext, runs: impl Fn(&str) -> bool) -> Result<()> {
    if ctx.patches()?.is_none() {
        return Ok(());
    }
    if runs("etcd")
        && let Some(pod) = crate::manifests::etcd(&ctx.cfg, &ctx.env)
    {
        ctx.patched_pod("etcd", pod, true)?;
    }
    if runs("control-plane") {
        control_plane::pods(ctx, true)?;
    }
    if runs("kubelet-start") {
        kubelet_start::patched_config(ctx, true)?;
    }
    if runs("addon/coredns") {
        addons::coredns_objects(ctx, true)?;
    }
    if runs("addon/kube-proxy") {
        addons::kube_proxy_objects(ctx, true)?;
    }
    Ok(())
}

/// [`InitContext::new`] for a node built from its parts (tests use it).
pub fn context<'a>(
    cfg: &InitConfig,
    fs: &'a NodeFs,
    ignore_preflight: Vec<String>,
    report: Option<&'a Reporter<'a>>,
    clock: &'a dyn Clock,
) -> InitContext<'a> {
    InitContext::new(cfg.clone(), Node::new(fs, clock, report), ignore_preflight)
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

/// Writes `/etc/kubernetes/manifests/<name>.yaml`.
pub(crate) fn write_manifest(ctx: &InitContext, name: &str, pod: &serde_json::Value) -> Result<()> {
    let path = crate::paths::manifest(name);
    let yaml = crate::manifests::pod::to_yaml(pod)?;
    if ctx.node.fs.read(&path)?.as_deref() == Some(yaml.as_bytes()) {
        info!("[manifests] {path} is up to date");
    } else {
        info!("[manifests] Writing static Pod manifest for {name:?} to {:?}", path.as_str());
    }
    Ok(ctx.node.fs.write(&path, yaml.as_bytes())?)
}
