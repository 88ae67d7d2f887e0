//! `kubestrap join`: make a fresh node trust the cluster (discovery) and the cluster trust the
//! node (TLS bootstrap, done here rather than by the kubelet), then leave the kubelet files in
//! the kubelet's own layout so it starts with a valid identity and rotates it itself.

mod discover;
mod tls_bootstrap;

use std::path::Path;
use std::time::Duration;

use log::{info, warn};

use crate::config::types::{Arg, Taint};
use crate::constants::*;
use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::kube::{Auth, Client, Trust};

pub use discover::Discovery;

pub const BOOTSTRAP_KUBELET_CONF: &str = "/etc/kubernetes/bootstrap-kubelet.conf";
pub const KUBELET_CONFIG: &str = "/var/lib/kubelet/config.yaml";
pub const KUBELET_FLAGS_ENV: &str = "/var/lib/kubelet/kubeadm-flags.env";
/// Per-request timeout (kubeadm's discovery client uses 10 s).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything join needs, resolved from flags and/or a JoinConfiguration.
pub struct JoinArgs {
    pub discovery: Discovery,
    pub node_name: String,
    pub hostname: String,
    pub cri_socket: String,
    pub ca_cert_path: String,
    pub kubelet_extra_args: Vec<Arg>,
    pub taints: Vec<Taint>,
    pub discovery_timeout: Duration,
    pub tls_bootstrap_timeout: Duration,
    pub ignore_preflight: Vec<String>,
}

pub fn run(fs: &NodeFs, a: &JoinArgs, report: Option<&crate::status::Reporter>) -> Result<()> {
    fs.remove_stale_temps(DEFAULT_CERTS_DIR);
    if fs.root() == Path::new("/") {
        let host = a.discovery.endpoint_host();
        let input = crate::preflight::Input::worker(fs.root(), a.node_name.clone(), Some(a.cri_socket.clone()), host);
        info!("[preflight] Running pre-flight checks");
        let pf = crate::preflight::run(&crate::host::LinuxHost, &input, &a.ignore_preflight);
        if let Some(r) = report {
            r.set(|s| s.preflight = serde_json::to_value(&pf).ok());
        }
        crate::preflight::enforce(&pf)?;
    } else {
        info!("[preflight] Skipped: --root {} is not this machine's root", fs.root().display());
    }
    let found = discover::discover(&a.discovery, a.discovery_timeout)?;
    info!("[discovery] Cluster {} verified (CA {})", found.server, found.ca_pin);

    // From here on a failure must not leave the bootstrap token behind.
    let result = bootstrap(fs, a, &found);
    if result.is_err() {
        fs.discard();
        if let Err(e) = fs.remove(BOOTSTRAP_KUBELET_CONF) {
            warn!("[kubelet-start] could not remove {BOOTSTRAP_KUBELET_CONF}: {e}");
        }
        let _ = fs.remove(tls_bootstrap::KEY_TMP);
    }
    result
}

fn bootstrap(fs: &NodeFs, a: &JoinArgs, found: &discover::Found) -> Result<()> {
    let bootstrap_conf =
        crate::objects::kubelet::bootstrap_kubelet_conf(&found.server, &found.ca_pem, &found.tls_token);
    fs.write(BOOTSTRAP_KUBELET_CONF, bootstrap_conf.to_yaml()?.as_bytes(), 0o600, 0o755)?;
    if !fs.exists(&a.ca_cert_path) {
        fs.write(&a.ca_cert_path, &found.ca_pem, 0o644, 0o755)?;
    }
    fs.commit()?;

    let client = Client::new(
        &found.server,
        Trust::Ca(found.ca_pem.clone()),
        Auth::Token(found.tls_token.clone()),
        REQUEST_TIMEOUT,
    )?;
    refuse_ready_node(&client, &a.node_name)?;

    info!("[kubelet-start] Writing kubelet configuration to file {KUBELET_CONFIG:?}");
    let cm = client
        .get("/api/v1/namespaces/kube-system/configmaps/kubelet-config")?
        .ok_or_else(|| Error::runtime("the ConfigMap kube-system/kubelet-config does not exist: the control plane has not finished its upload-config phase"))?;
    let kubelet_yaml = cm["data"]["kubelet"]
        .as_str()
        .ok_or_else(|| Error::runtime("ConfigMap kube-system/kubelet-config has no data.kubelet"))?;
    fs.write(KUBELET_CONFIG, kubelet_yaml.as_bytes(), 0o644, 0o700)?;
    let pause = pause_image(&client)?;
    let taints = crate::objects::kubelet::taints_flag(&a.taints);
    let env = crate::objects::kubelet::kubeadm_flags_env(
        &a.cri_socket,
        &pause,
        &a.node_name,
        &a.hostname,
        taints,
        &a.kubelet_extra_args,
    );
    fs.write(KUBELET_FLAGS_ENV, env.as_bytes(), 0o644, 0o700)?;
    fs.commit()?;

    tls_bootstrap::run(fs, &client, found, &a.node_name, a.tls_bootstrap_timeout)?;
    fs.remove(BOOTSTRAP_KUBELET_CONF)?;
    if fs.root() == Path::new("/") {
        crate::systemd::restart_kubelet();
    }
    info!(
        "This node has joined the cluster: the kubelet's client certificate was issued and kubelet.conf points at it."
    );
    info!("Run 'kubectl get nodes' on the control plane to see this node join the cluster.");
    Ok(())
}

/// kubeadm refuses to join a name that a Ready Node already has: two kubelets would fight.
fn refuse_ready_node(client: &Client, name: &str) -> Result<()> {
    match client.get(&format!("/api/v1/nodes/{name}")) {
        Ok(Some(node)) => {
            let ready = node["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
            if ready {
                return Err(Error::state(format!(
                    "a Node named {name:?} already exists in the cluster and is Ready; join with another --node-name, or delete that Node first"
                )));
            }
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(e) if e.code() == Some(403) => {
            warn!("[preflight] cannot check for an existing Node {name:?}: {e}");
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// The pause image for the kubelet flags, from the cluster's ClusterConfiguration.
fn pause_image(client: &Client) -> Result<String> {
    let repo = client
        .get("/api/v1/namespaces/kube-system/configmaps/kubeadm-config")?
        .and_then(|cm| cm["data"]["ClusterConfiguration"].as_str().map(str::to_string))
        .and_then(|y| serde_yaml::from_str::<serde_yaml::Value>(&y).ok())
        .and_then(|c| c["imageRepository"].as_str().map(str::to_string))
        .unwrap_or_else(|| DEFAULT_IMAGE_REPOSITORY.to_string());
    Ok(format!("{repo}/pause:{}", crate::objects::kubelet::PAUSE_VERSION))
}
