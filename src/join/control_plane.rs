//! `join --control-plane`: kubeadm's control-plane-prepare phases (download-certs, certs,
//! kubeconfig, control-plane), then mark-control-plane after the kubelet starts. This node's
//! InitConfig is the cluster's ClusterConfiguration (the kubeadm-config ConfigMap) plus this node's
//! name and LocalAPIEndpoint, so every file it writes is what init would write for it.

use base64::Engine;
use log::info;

use super::{Found, JoinArgs, JoinContext};
use crate::config::InitConfig;
use crate::config::types::{ApiEndpoint, InitConfiguration, NodeRegistrationOptions};
use crate::config::values::CertificateKey;
use crate::error::{Error, Result};
use crate::init::InitContext;
use crate::kube::Client;
use crate::kubeconfig::Kubeconfig;
use crate::paths;
use crate::pki::copycerts;

/// What makes a join a control-plane join.
#[derive(Debug, Clone, Default)]
pub struct ControlPlaneJoin {
    /// Empty: the address of the default-route interface, as kubeadm.
    pub advertise_address: String,
    pub bind_port: Option<i64>,
    /// Without it, the shared CAs and keys must already be on disk (kubeadm's manual-copy mode).
    pub certificate_key: Option<CertificateKey>,
}

const KUBEADM_CONFIG: &str = "/api/v1/namespaces/kube-system/configmaps/kubeadm-config";
const KUBEADM_CERTS: &str = "/api/v1/namespaces/kube-system/secrets/kubeadm-certs";

pub(super) fn control_plane<'a>(ctx: &'a JoinContext, phase: &str) -> Option<&'a ControlPlaneJoin> {
    let cp = ctx.args.control_plane.as_ref();
    if cp.is_none() {
        info!("[{phase}] Skipped: not a control-plane join (see --control-plane)");
    }
    cp
}

/// A client for the cluster: admin.conf once control-plane-prepare wrote it, else the bootstrap
/// token from bootstrap-kubelet.conf.
fn client(ctx: &JoinContext) -> Result<Client> {
    if let Some(bytes) = ctx.node.fs.read(&paths::ADMIN_CONF)? {
        let kc = Kubeconfig::parse(&bytes)?;
        return Ok(ctx.api(Client::from_kubeconfig(
            &kc,
            &|p| ctx.node.fs.read(p).ok().flatten(),
            crate::timeouts::REQUEST,
        )?));
    }
    let found = Found::load(ctx.node.fs)?.ok_or_else(|| {
        Error::bad_file(format!(
            "{} is missing: run `kubestrap join phase discovery` first",
            paths::BOOTSTRAP_KUBELET_CONF
        ))
    })?;
    found.client(ctx)
}

/// This node's InitConfig: the cluster's ClusterConfiguration, this node's registration and
/// LocalAPIEndpoint.
pub(crate) fn node_config<'a>(ctx: &'a JoinContext, cp: &ControlPlaneJoin) -> Result<&'a InitConfig> {
    Ok(&init_context(ctx, cp)?.cfg)
}

/// The init context this node's files are written with, made once per run.
fn init_context<'c, 'a>(ctx: &'c JoinContext<'a>, cp: &ControlPlaneJoin) -> Result<&'c InitContext<'a>> {
    if let Some(c) = ctx.init.get() {
        return Ok(c);
    }
    let ic = InitContext::new(fetch_node_config(ctx, cp)?, ctx.node, Vec::new());
    Ok(ctx.init.get_or_init(|| ic))
}

fn fetch_node_config(ctx: &JoinContext, cp: &ControlPlaneJoin) -> Result<InitConfig> {
    let text = stored_cluster_configuration(ctx, &client(ctx)?, "control-plane-prepare")?;
    node_config_from(&text, ctx.args, cp)
}

/// The ClusterConfiguration the kubeadm-config ConfigMap holds, read through `c` (retried as a
/// bootstrap call, `tag` naming the phase).
pub(super) fn stored_cluster_configuration(ctx: &JoinContext, c: &Client, tag: &str) -> Result<String> {
    let cm = ctx.bootstrap_call(tag, "reading the kubeadm-config ConfigMap", || c.get(KUBEADM_CONFIG))?;
    let cm = cm.ok_or_else(|| {
        Error::cluster("the ConfigMap kube-system/kubeadm-config does not exist: the first control plane has not finished its upload-config phase")
    })?;
    let text = cm["data"]["ClusterConfiguration"]
        .as_str()
        .ok_or_else(|| Error::cluster("ConfigMap kube-system/kubeadm-config has no data.ClusterConfiguration"))?;
    Ok(text.to_string())
}

/// The cluster's stored ClusterConfiguration with this node's own InitConfiguration: its name,
/// runtime, kubelet flags, API endpoint and the JoinConfiguration's timeouts.
fn node_config_from(text: &str, a: &JoinArgs, cp: &ControlPlaneJoin) -> Result<InitConfig> {
    let source = "ConfigMap kube-system/kubeadm-config";
    let mut docs = crate::config::parse_stored(source, text)?;
    docs.init = Some(InitConfiguration {
        api_version: crate::constants::KUBEADM_API_VERSION.into(),
        kind: "InitConfiguration".into(),
        node_registration: NodeRegistrationOptions {
            name: a.node_name.clone(),
            cri_socket: a.cri_socket.clone(),
            taints: None,
            kubelet_extra_args: a.kubelet_extra_args.clone(),
            ..Default::default()
        },
        local_api_endpoint: ApiEndpoint { advertise_address: cp.advertise_address.clone(), bind_port: cp.bind_port },
        timeouts: a.timeouts.clone(),
        patches: a.patches.clone().map(|directory| crate::config::types::Patches { directory }),
        ..Default::default()
    });
    if docs.cluster.as_ref().is_some_and(|c| c.feature_gates.get("RootlessControlPlane") == Some(&true)) {
        // The cluster's control planes run as kubeadm-* users: this one would run as root.
        return Err(Error::bad_config(format!("{source}: featureGates.{}", crate::config::features::ROOTLESS_REFUSED)));
    }
    if docs.cluster.as_ref().is_none_or(|c| c.control_plane_endpoint.is_empty()) {
        // kubeadm's checkIfReadyForAdditionalControlPlane.
        return Err(Error::bad_config(
            "unable to add a new control plane instance to a cluster that doesn't have a stable controlPlaneEndpoint address: set ClusterConfiguration.controlPlaneEndpoint when the first control plane is initialized",
        ));
    }
    Ok(crate::config::resolve_init(source, docs, &crate::host::facts())?)
}

/// `control-plane-prepare/download-certs`: the shared files from kubeadm-certs, all decrypted
/// before any is written, so a wrong key writes nothing.
pub(crate) fn download_certs(ctx: &JoinContext) -> Result<()> {
    let Some(cp) = control_plane(ctx, "download-certs") else { return Ok(()) };
    let Some(key) = &cp.certificate_key else {
        info!("[download-certs] Skipped: no --certificate-key; the shared CAs and keys must already be on disk");
        return Ok(());
    };
    let cfg = node_config(ctx, cp)?;
    let c = client(ctx)?;
    let secret = ctx.bootstrap_call("download-certs", "reading the kubeadm-certs Secret", || c.get(KUBEADM_CERTS))?;
    let secret = secret.ok_or_else(|| {
        Error::cluster("Secret \"kubeadm-certs\" was not found in the \"kube-system\" Namespace. This Secret might have expired. Please, run `kubestrap init phase upload-certs --upload-certs` on a control plane to generate a new one")
    })?;
    let mut files = Vec::new();
    for t in copycerts::files_to_transfer(cfg) {
        let Some(b64) = secret["data"][&t.key].as_str() else {
            return Err(Error::cluster(format!(
                "the Secret does not include the required certificate or key - name: {}, path: {}",
                t.key, t.path
            )));
        };
        if b64.is_empty() {
            info!("[download-certs] {} is empty in the Secret; skipping {}", t.key, t.path);
            continue;
        }
        let blob = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| Error::cluster(format!("kubeadm-certs: {} is not base64: {e}", t.key)))?;
        let plain = key.open(&blob, &t.key)?;
        files.push((t, plain));
    }
    for (t, plain) in files {
        let text = String::from_utf8_lossy(&plain);
        let mode = if text.contains("PRIVATE KEY-----") {
            paths::PRIVATE
        } else if text.contains("-----BEGIN") {
            paths::READABLE
        } else {
            return Err(Error::cluster(format!("unknown data found in Secret entry {}", t.key)));
        };
        ctx.node.fs.write(&paths::File::at(t.path.clone(), mode), &plain)?;
    }
    info!("[download-certs] Saving the certificates to the folder: {:?}", cfg.certs_dir());
    Ok(())
}

/// `control-plane-prepare/certs`: this node's leaf certificates, signed by the shared CAs.
pub fn certs(ctx: &JoinContext) -> Result<()> {
    let Some(cp) = control_plane(ctx, "certs") else { return Ok(()) };
    let ictx = init_context(ctx, cp)?;
    require_shared(ctx, &ictx.cfg)?;
    Ok(crate::pki::ensure_certs(ctx.node.fs, &ictx.cfg, time::OffsetDateTime::now_utc(), &ictx.keys)?)
}

/// kubeadm's SharedCertificateExists: a control-plane join never makes its own CAs.
fn require_shared(ctx: &JoinContext, cfg: &InitConfig) -> Result<()> {
    let dir = cfg.certs_dir();
    let mut need = vec![paths::cert(dir, "ca"), paths::cert(dir, "front-proxy-ca"), paths::key(dir, "sa")];
    if cfg.external_etcd().is_none() {
        need.push(paths::cert(dir, "etcd/ca"));
    }
    let missing: Vec<String> = need.iter().filter(|f| !ctx.node.fs.exists(f)).map(|f| f.to_string()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::bad_file(format!(
        "a control-plane join needs the cluster's shared certificates, and {} is missing: join with --certificate-key (after `init --upload-certs` on the first control plane), or copy the CAs and sa keys first",
        missing.join(", ")
    )))
}

/// `control-plane-prepare/kubeconfig`: admin, controller-manager and scheduler only (no
/// super-admin.conf off the first node; kubelet.conf comes from the TLS bootstrap).
pub fn kubeconfig(ctx: &JoinContext) -> Result<()> {
    let Some(cp) = control_plane(ctx, "kubeconfig") else { return Ok(()) };
    crate::init::kubeconfig::write(init_context(ctx, cp)?, &KUBECONFIGS)
}

/// The kubeconfigs a joining control plane gets.
pub const KUBECONFIGS: [&str; 3] =
    [crate::constants::ADMIN_CONF, crate::constants::CONTROLLER_MANAGER_CONF, crate::constants::SCHEDULER_CONF];

/// `control-plane-prepare/control-plane`: the three static Pod manifests, as init writes them.
pub fn manifests(ctx: &JoinContext) -> Result<()> {
    let Some(cp) = control_plane(ctx, "control-plane") else { return Ok(()) };
    crate::init::control_plane::run(init_context(ctx, cp)?)
}

/// `mark-control-plane`: the labels and taint init gives its node, once the Node exists.
pub fn mark_control_plane(ctx: &JoinContext) -> Result<()> {
    let Some(cp) = control_plane(ctx, "mark-control-plane") else { return Ok(()) };
    let ic = init_context(ctx, cp)?;
    // As kubeadm join: admin.conf as written (controlPlaneEndpoint). Init's API phases point it
    // at their own local API server instead; a joining node's may not serve yet.
    let _ = ic.admin_client.set(client(ctx)?);
    crate::init::api::mark_control_plane(ic)
}

/// `etcd-join` (stacked etcd only): this node as an etcd learner of the existing members (found
/// through the etcd Pods' annotations, then the member list), its etcd manifest with
/// `--initial-cluster` and `--initial-cluster-state=existing`, then — once the kubelet runs it —
/// promotion to a voter and a wait until every member answers. A rerun finds its member by peer
/// URL and neither adds a second nor loses the first.
pub fn etcd_join(ctx: &JoinContext) -> Result<()> {
    let Some(cp) = control_plane(ctx, "etcd-join") else { return Ok(()) };
    let cfg = node_config(ctx, cp)?;
    let Some(local) = cfg.local_etcd() else {
        info!("[etcd-join] Using external etcd - no local stacked instance added");
        return Ok(());
    };
    let api = client(ctx)?;
    let endpoints = crate::etcd::endpoints_from_cluster(&api, cfg.api_call_timeout, ctx.node.clock)?;
    let creds = crate::etcd::Credentials::load(ctx.node.fs, cfg.certs_dir(), crate::etcd::HEALTHCHECK_CLIENT)?;
    let etcd = crate::etcd::connect_recording(
        &endpoints,
        &creds,
        ctx.dry_run_api.clone(),
        cfg.etcd_api_call_timeout,
        ctx.node.clock,
    )?;
    let me = crate::etcd::NewMember::for_node(&cfg.node_name, cfg.advertise_address);
    // add_as_learner and wait_available print kubeadm's lines themselves.
    let announced = crate::etcd::add_as_learner(&etcd, &me, ctx.node.clock)?;
    let ic = init_context(ctx, cp)?;
    let pod = crate::manifests::etcd_join(cfg, &ic.env, &announced.initial_cluster.to_string())
        .ok_or_else(|| Error::internal("internal: stacked etcd without an etcd manifest"))?;
    let pod = ic.patched_pod("etcd", pod, false)?;
    ctx.node.fs.mkdir(&paths::etcd_data_dir(&local.data_dir))?;
    let path = paths::manifest("etcd");
    info!("[etcd] Creating static Pod manifest for \"etcd\"");
    ctx.node.fs.write(&path, crate::manifests::pod::to_yaml(&pod)?.as_bytes())?;
    ctx.node.fs.commit()?;
    if ctx.node.acts() {
        crate::systemd::restart_kubelet();
    }
    crate::etcd::promote(&etcd, &me.peer_url, ctx.node.clock)?;
    Ok(crate::etcd::wait_available(&etcd, ctx.node.clock)?)
}

/// kubeadm's closing words for a control-plane join; the etcd line only when this run added a
/// stacked etcd member.
pub(crate) fn done_message(etcd_member_added: bool) -> String {
    let etcd =
        if etcd_member_added { "* A new etcd member was added to the local/stacked etcd cluster.\n" } else { "" };
    format!(
        "\nThis node has joined the cluster and a new control plane instance was created:\n\n\
         * Certificate signing request was sent to apiserver and approval was received.\n\
         * The Kubelet was informed of the new secure connection details.\n\
         * Control plane label and taint were applied to the new node.\n\
         * The Kubernetes control plane instances scaled up.\n\
         {etcd}\n\
         To start administering your cluster from this node, you need to run the following as a regular user:\n\n\
         \tmkdir -p $HOME/.kube\n\
         \tsudo cp -i {} $HOME/.kube/config\n\
         \tsudo chown $(id -u):$(id -g) $HOME/.kube/config\n\n\
         Run 'kubectl get nodes' to see this node join the cluster.\n",
        paths::ADMIN_CONF
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_joining_control_plane_runs_its_init_phases_under_the_join_timeouts() {
        let mut a = crate::join::resolve(&crate::join::JoinFlags::default(), &Default::default()).unwrap();
        a.timeouts = Some(crate::config::types::Timeouts {
            control_plane_component_health_check: Some("10m0s".into()),
            kubernetes_api_call: Some("5m0s".into()),
            etcd_api_call: Some("4m30s".into()),
            ..Default::default()
        });
        let cp =
            ControlPlaneJoin { advertise_address: "10.0.0.12".into(), bind_port: Some(6443), certificate_key: None };
        let stored = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\n\
                      controlPlaneEndpoint: 10.0.0.11:6443\n";
        let cfg = node_config_from(stored, &a, &cp).unwrap();
        assert_eq!(cfg.control_plane_health_timeout, std::time::Duration::from_secs(600));
        // mark-control-plane's patch, upload-config's writes and etcd-join's member calls.
        assert_eq!(cfg.api_call_timeout, std::time::Duration::from_secs(300));
        assert_eq!(cfg.etcd_api_call_timeout, std::time::Duration::from_secs(270));
        a.timeouts = None;
        let cfg = node_config_from(stored, &a, &cp).unwrap();
        assert_eq!(cfg.control_plane_health_timeout, crate::timeouts::CONTROL_PLANE_COMPONENT_HEALTH_CHECK);
        assert_eq!(cfg.api_call_timeout, crate::timeouts::KUBERNETES_API_CALL);
        assert_eq!(cfg.etcd_api_call_timeout, crate::timeouts::ETCD_API_CALL);
    }

    #[test]
    fn the_etcd_line_only_when_a_member_was_added() {
        let with = done_message(true);
        assert!(with.starts_with("\nThis node has joined the cluster and a new control plane instance was created:\n"));
        assert!(with.contains(
            "* The Kubernetes control plane instances scaled up.\n* A new etcd member was added to the local/stacked etcd cluster.\n\n"
        ));
        assert!(with.contains("\tsudo cp -i /etc/kubernetes/admin.conf $HOME/.kube/config\n"));
        let without = done_message(false);
        assert!(!without.contains("etcd"));
        assert!(without.contains("* The Kubernetes control plane instances scaled up.\n\nTo start administering"));
    }
}
