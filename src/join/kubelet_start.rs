//! The `kubelet-start` phase: from bootstrap-kubelet.conf (the discovery phase's product) to a
//! kubelet with its config, flags and its own client certificate. A failure removes
//! bootstrap-kubelet.conf: the bootstrap token must not outlive a join that did not finish.

use log::{info, warn};

use super::{Found, JoinContext, tls_bootstrap};
use crate::error::{Error, Result};
use crate::kube::{Auth, Client, Trust};
use crate::objects::kubelet;
use crate::paths::{
    BOOTSTRAP_KUBELET_CONF, KUBELET_CLIENT_KEY_TMP, KUBELET_CONFIG, KUBELET_FLAGS_ENV, KUBELET_INSTANCE_CONFIG,
};

pub fn kubelet_start(ctx: &JoinContext) -> Result<()> {
    let Some(found) = Found::load(ctx.node.fs)? else {
        if let Some(why) = tls_bootstrap::identity_from_disk(ctx) {
            info!("[kubelet-start] Already done: {why}");
            return Ok(());
        }
        return Err(Error::bad_file(format!(
            "{BOOTSTRAP_KUBELET_CONF} is missing: run `kubestrap join phase discovery` first"
        )));
    };
    let result = start(ctx, &found);
    if result.is_err() {
        ctx.node.fs.discard();
        if let Err(e) = ctx.node.fs.remove(&BOOTSTRAP_KUBELET_CONF) {
            warn!("[kubelet-start] could not remove {BOOTSTRAP_KUBELET_CONF}: {e}");
        }
        let _ = ctx.node.fs.remove(&KUBELET_CLIENT_KEY_TMP);
    }
    result
}

fn start(ctx: &JoinContext, found: &Found) -> Result<()> {
    let (fs, a) = (ctx.node.fs, ctx.args);
    let client = ctx.api(Client::new(
        &found.server,
        Trust::Ca(found.ca_pem.clone()),
        Auth::Token(found.tls_token.clone()),
        crate::timeouts::REQUEST,
    )?);
    // A Ready Node of our name is our own kubelet's when we already hold its identity (a rerun
    // of a join killed after kubelet-start); otherwise another machine uses the name.
    match tls_bootstrap::existing_identity(fs, &found.ca_pem, &a.node_name) {
        Some(why) => info!("[kubelet-start] {why}: the Node {:?} is this node's own", a.node_name),
        None => refuse_ready_node(ctx, &client, &a.node_name)?,
    }

    let cm = ctx.bootstrap_call("kubelet-start", "reading the kubelet-config ConfigMap", || {
        client.get("/api/v1/namespaces/kube-system/configmaps/kubelet-config")
    })?
    .ok_or_else(|| Error::cluster("the ConfigMap kube-system/kubelet-config does not exist: the control plane has not finished its upload-config phase"))?;
    let kubelet_yaml = cm["data"]["kubelet"]
        .as_str()
        .ok_or_else(|| Error::cluster("ConfigMap kube-system/kubelet-config has no data.kubelet"))?;
    // kubeadm 1.37 join's order: instance config, config.yaml (with it merged), flags env.
    info!("[kubelet-start] Writing kubelet configuration to file {:?}", KUBELET_INSTANCE_CONFIG.as_str());
    fs.write(&KUBELET_INSTANCE_CONFIG, kubelet::instance_config_yaml(&a.cri_socket).as_bytes())?;
    info!("[kubelet-start] Writing kubelet configuration to file {:?}", KUBELET_CONFIG.as_str());
    let patches = crate::patches::for_dir(fs, a.patches.as_deref())?;
    let config = kubelet::node_config_yaml_patched(kubelet_yaml, &a.cri_socket, patches.as_deref())?;
    crate::patches::log_instance_config();
    fs.write(&KUBELET_CONFIG, config.as_bytes())?;
    // A control plane's taint is set by mark-control-plane, not registered by the kubelet.
    let taints = if a.control_plane.is_some() { None } else { kubelet::taints_flag(&a.taints) };
    let env = kubelet::kubeadm_flags_env(&a.node_name, &a.hostname, taints, &a.kubelet_extra_args);
    info!("[kubelet-start] Writing kubelet environment file with flags to file {:?}", KUBELET_FLAGS_ENV.as_str());
    fs.write(&KUBELET_FLAGS_ENV, env.as_bytes())?;
    fs.commit()?;

    tls_bootstrap::run(ctx, &client, found)?;
    fs.remove(&BOOTSTRAP_KUBELET_CONF)?;
    if ctx.node.acts() {
        crate::systemd::restart_kubelet();
    }
    // A control plane has more phases to go; its own summary comes at the end (commands/join).
    if a.control_plane.is_none() {
        info!(
            "This node has joined the cluster: the kubelet's client certificate was issued and kubelet.conf points at it."
        );
        info!("Run 'kubectl get nodes' on the control plane to see this node join the cluster.");
    }
    Ok(())
}

/// kubeadm refuses to join a name that a Ready Node already has: two kubelets would fight.
fn refuse_ready_node(ctx: &JoinContext, client: &Client, name: &str) -> Result<()> {
    let node = ctx.bootstrap_call("kubelet-start", "checking for an existing Node", || {
        match client.get(&format!("/api/v1/nodes/{name}")) {
            Err(e) if e.code() == Some(403) => {
                warn!("[preflight] cannot check for an existing Node {name:?}: {e}");
                Ok(None)
            }
            r => r,
        }
    })?;
    let ready = node
        .as_ref()
        .and_then(|n| n["status"]["conditions"].as_array())
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
    if ready {
        return Err(Error::bad_file(format!(
            "a Node named {name:?} already exists in the cluster and is Ready; join with another --node-name, or delete that Node first"
        )));
    }
    Ok(())
}
