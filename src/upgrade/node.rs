//! `upgrade node` on a worker, as kubeadm 1.37's (a control plane's is apply.rs's
//! `run_node_control_plane`): the cluster's configuration read through the node's own credential, then kubeadm's phases (preflight, control-plane, kubeconfig,
//! kubelet-config, addon, post-upgrade). Only kubelet-config writes on a worker: config.yaml
//! backed up to `/etc/kubernetes/tmp/kubeadm-kubelet-config-<stamp>/`, a missing
//! instance-config.yaml written anew, config.yaml rewritten from the kubelet-config ConfigMap.
//! The kubelet is not restarted (kubeadm's neither): the new config takes effect with the new
//! kubelet binary.

use log::{info, warn};

use super::NodeArgs;
use super::cluster::{client_from, cri_socket, get_configmap, get_patiently, node_name};
use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::host::Host;
use crate::objects::kubelet;
use crate::paths::{self, KUBELET_CONF, KUBELET_CONFIG, KUBELET_INSTANCE_CONFIG, KUBERNETES_TMP_DIR};
use crate::phases::{Phase, Stage};

/// What the phases share: the node, its name and CRI socket, and the cluster's KubeletConfiguration.
pub struct NodeRun<'a> {
    pub fs: &'a NodeFs,
    pub host: &'a dyn Host,
    pub live: bool,
    pub args: &'a NodeArgs,
    pub node_name: String,
    pub cri_socket: String,
    /// `data.kubelet` of kube-system/kubelet-config.
    pub kubelet_yaml: String,
    /// The backup directory's stamp (`YYYY-MM-DD-hh-mm-ss`).
    pub stamp: String,
}

pub(crate) type NodeFn = fn(&NodeRun) -> Result<()>;

/// kubeadm 1.37's `upgrade node` phases, in its order (`kubeconfig` is hidden in kubeadm's help).
#[rustfmt::skip]
pub const NODE_PHASES: &[Phase<NodeFn>] = &[
    Phase { name: "preflight", about: "Run upgrade node pre-flight checks", stage: Stage::PostKubelet, commit: true, run: preflight },
    Phase { name: "control-plane", about: "Upgrade the control plane instance deployed on this node, if any", stage: Stage::PostKubelet, commit: true, run: control_plane },
    Phase { name: "kubeconfig", about: "Upgrade kubeconfig files for this node", stage: Stage::PostKubelet, commit: true, run: kubeconfig },
    Phase { name: "kubelet-config", about: "Upgrade the kubelet configuration for this node", stage: Stage::PostKubelet, commit: true, run: kubelet_config },
    Phase { name: "addon/coredns", about: "Upgrade the CoreDNS addon", stage: Stage::PostKubelet, commit: true, run: addon_coredns },
    Phase { name: "addon/kube-proxy", about: "Upgrade the kube-proxy addon", stage: Stage::PostKubelet, commit: true, run: addon_kube_proxy },
    Phase { name: "post-upgrade", about: "Run post upgrade tasks", stage: Stage::PostKubelet, commit: true, run: post_upgrade },
];

/// `kubestrap upgrade node`: refuses a control plane, reads the cluster, runs the phases not
/// skipped. `now` stamps the backup directory.
pub fn run_node(args: &NodeArgs, fs: &NodeFs, host: &dyn Host, now: time::OffsetDateTime) -> Result<()> {
    crate::phases::check_skip(NODE_PHASES, "upgrade node", &args.skip_phases)?;
    if fs.exists(paths::manifest("kube-apiserver")) {
        let a = super::ApplyArgs::for_node(args);
        return super::apply::run_node_control_plane(&a, fs, host, now);
    }
    let kubelet_conf = fs.real(KUBELET_CONF.as_str());
    let kubelet_client = client_from(fs, &kubelet_conf)?;
    // kubelet.conf names the node; --kubeconfig, when given, reads the cluster.
    let given = args.kubeconfig.as_deref().map(|k| client_from(fs, k)).transpose()?;
    let client = given.as_ref().unwrap_or(&kubelet_client);
    info!("[upgrade] Reading configuration from the \"kubeadm-config\" ConfigMap in namespace \"kube-system\"...");
    info!("[upgrade] Use 'kubeadm init phase upload-config kubeadm --config your-config-file' to re-upload it.");
    let kubeadm_config = get_configmap(client, "kubeadm-config")?;
    let cluster_text = kubeadm_config["data"]["ClusterConfiguration"].as_str().ok_or_else(|| {
        Error::cluster(
            "unexpected error when reading kubeadm-config ConfigMap: ClusterConfiguration key value pair missing",
        )
    })?;
    crate::config::cluster_from_configmap(cluster_text)
        .map_err(|e| Error::cluster(format!("the kubeadm-config ConfigMap's ClusterConfiguration: {e}")))?;
    let kubelet_cm = get_configmap(client, "kubelet-config")?;
    let kubelet_yaml = kubelet_cm["data"]["kubelet"]
        .as_str()
        .ok_or_else(|| Error::cluster("the ConfigMap kube-system/kubelet-config has no data.kubelet"))?
        .to_string();
    let node_name = node_name(&kubelet_client)?;
    get_patiently(client, &format!("/api/v1/nodes/{node_name}"), "failed to get corresponding node")?.ok_or_else(
        || {
            Error::cluster(format!(
                "the Node {node_name:?} (the name in {KUBELET_CONF}) does not exist in the cluster: this node is not \
                 part of it (join it first)"
            ))
        },
    )?;
    let cri_socket = cri_socket(fs, &node_name)?;
    let run = NodeRun {
        fs,
        host,
        live: crate::node::is_live(fs.root()),
        args,
        node_name,
        cri_socket,
        kubelet_yaml,
        stamp: crate::pki::check::file_stamp(now),
    };
    for p in NODE_PHASES.iter().filter(|p| !crate::phases::is_skipped(&args.skip_phases, p.name)) {
        (p.run)(&run).and_then(|()| Ok(fs.commit()?)).map_err(|e| {
            fs.discard();
            e.context(format_args!("phase {}", p.name))
        })?;
    }
    if fs.is_dry_run() {
        print_planned(fs);
        info!("[upgrade/successful] Finished dryrunning successfully!");
    } else if !crate::phases::is_skipped(&args.skip_phases, "kubelet-config") {
        info!(
            "[upgrade] The kubelet reads the new {KUBELET_CONFIG} when it restarts: drain the node, install the new \
             kubelet, `systemctl restart kubelet`, uncordon"
        );
    }
    Ok(())
}

fn preflight(r: &NodeRun) -> Result<()> {
    info!("[upgrade/preflight] Running pre-flight checks");
    if r.live {
        super::host_checks(r.host, r.fs.root(), (&r.node_name, &r.cri_socket), &r.args.ignore_preflight)?;
    } else {
        info!("[upgrade/preflight] {} is not this machine's root: the host checks are skipped", r.fs.root().display());
    }
    info!("[upgrade/preflight] Skipping prepull. Not a control plane node.");
    Ok(())
}

fn control_plane(_: &NodeRun) -> Result<()> {
    info!("[upgrade/control-plane] Skipping phase. Not a control plane node.");
    Ok(())
}

fn kubeconfig(_: &NodeRun) -> Result<()> {
    info!("[upgrade/kubeconfig] Skipping phase. Not a control plane node.");
    Ok(())
}

fn kubelet_config(r: &NodeRun) -> Result<()> {
    write_kubelet_config(r.fs, &r.stamp, &r.cri_socket, &r.kubelet_yaml, r.args.patches.as_deref())
}

/// kubeadm's WriteKubeletConfigFiles: config.yaml backed up under
/// `/etc/kubernetes/tmp/kubeadm-kubelet-config-<stamp>/`, a missing instance-config.yaml written,
/// config.yaml from the cluster's KubeletConfiguration with the patches and instance config.
pub(super) fn write_kubelet_config(
    fs: &NodeFs,
    stamp: &str,
    cri_socket: &str,
    kubelet_yaml: &str,
    patches: Option<&str>,
) -> Result<()> {
    let dir = paths::Dir { path: format!("{KUBERNETES_TMP_DIR}/kubeadm-kubelet-config-{stamp}"), mode: 0o700 };
    let dest = format!("{}/config.yaml", dir.path);
    if fs.is_dry_run() {
        info!("[dryrun] Would back up kubelet config file to {dest}");
    } else {
        info!("[upgrade] Backing up kubelet config file to {dest}");
        let old = fs.read(KUBELET_CONFIG.as_str())?.ok_or_else(|| {
            Error::bad_file(format!(
                "error backing up the kubelet config file: {KUBELET_CONFIG} does not exist: this node never ran a kubelet set up by kubeadm or kubestrap"
            ))
        })?;
        let mode = std::fs::metadata(fs.real(KUBELET_CONFIG.as_str()))
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777)
            .unwrap_or(KUBELET_CONFIG.mode);
        fs.mkdir(&dir)?;
        fs.write(&paths::File::at(dest, mode), &old)?;
    }
    if !fs.exists(KUBELET_INSTANCE_CONFIG.as_str()) {
        warn!(
            "The kubelet instance configuration file {} was not found. Creating a new one with defaults. Please verify its contents!",
            KUBELET_INSTANCE_CONFIG.as_str()
        );
        info!("[kubelet-start] Writing kubelet configuration to file {:?}", KUBELET_INSTANCE_CONFIG.as_str());
        fs.write(&KUBELET_INSTANCE_CONFIG, kubelet::instance_config_yaml(cri_socket).as_bytes())?;
    }
    let patches = crate::patches::for_dir(fs, patches)?;
    let config = kubelet::node_config_yaml_patched(kubelet_yaml, cri_socket, patches.as_deref())?;
    crate::patches::log_instance_config();
    info!("[kubelet-start] Writing kubelet configuration to file {:?}", KUBELET_CONFIG.as_str());
    fs.write(&KUBELET_CONFIG, config.as_bytes())?;
    info!("[upgrade/kubelet-config] The kubelet configuration for this node was successfully upgraded!");
    if !fs.is_dry_run() {
        super::backups::prune(fs.root());
    }
    Ok(())
}

fn addon_coredns(_: &NodeRun) -> Result<()> {
    info!("[upgrade/addon] Skipping the addon/coredns phase. Not a control plane node.");
    Ok(())
}

fn addon_kube_proxy(_: &NodeRun) -> Result<()> {
    info!("[upgrade/addon] Skipping the addon/kube-proxy phase. Not a control plane node.");
    Ok(())
}

/// kubeadm 1.37's post-upgrade removes no kubelet flag (its list is empty): nothing to do.
fn post_upgrade(_: &NodeRun) -> Result<()> {
    Ok(())
}

/// A dry run's files, as kubeadm prints them (`[dryrun] Would write file ... with content:`).
fn print_planned(fs: &NodeFs) {
    for f in fs.planned() {
        info!("[dryrun] Would write file {:?} with content:", f.path);
        for line in String::from_utf8_lossy(&f.data).lines() {
            info!("\t{line}");
        }
    }
}
