//! The `kubelet-start` phase: from bootstrap-kubelet.conf (the discovery phase's product) to a
//! kubelet with its config, flags and its own client certificate. A failure removes
//! bootstrap-kubelet.conf: the bootstrap token must not outlive a join that did not finish.

use log::{info, warn};

use super::{Found, JoinContext, tls_bootstrap};
use crate::constants::DEFAULT_IMAGE_REPOSITORY;
use crate::error::{Error, Result};
use crate::kube::{Auth, Client, Trust};
use crate::paths::{BOOTSTRAP_KUBELET_CONF, KUBELET_CLIENT_KEY_TMP, KUBELET_CONFIG, KUBELET_FLAGS_ENV};

pub fn kubelet_start(ctx: &JoinContext) -> Result<()> {
    let Some(found) = Found::load(ctx.fs)? else {
        if let Some(why) = tls_bootstrap::identity_from_disk(ctx) {
            info!("[kubelet-start] Already done: {why}");
            return Ok(());
        }
        return Err(Error::state(format!(
            "{BOOTSTRAP_KUBELET_CONF} is missing: run `kubestrap join phase discovery` first"
        )));
    };
    let result = start(ctx, &found);
    if result.is_err() {
        ctx.fs.discard();
        if let Err(e) = ctx.fs.remove(&BOOTSTRAP_KUBELET_CONF) {
            warn!("[kubelet-start] could not remove {BOOTSTRAP_KUBELET_CONF}: {e}");
        }
        let _ = ctx.fs.remove(&KUBELET_CLIENT_KEY_TMP);
    }
    result
}

fn start(ctx: &JoinContext, found: &Found) -> Result<()> {
    let (fs, a) = (ctx.fs, ctx.args);
    let client = Client::new(
        &found.server,
        Trust::Ca(found.ca_pem.clone()),
        Auth::Token(found.tls_token.clone()),
        crate::timeouts::REQUEST,
    )?;
    // A Ready Node of our name is our own kubelet's when we already hold its identity (a rerun
    // of a join killed after kubelet-start); otherwise another machine uses the name.
    match tls_bootstrap::existing_identity(fs, &found.ca_pem, &a.node_name) {
        Some(why) => info!("[kubelet-start] {why}: the Node {:?} is this node's own", a.node_name),
        None => refuse_ready_node(&client, &a.node_name)?,
    }

    info!("[kubelet-start] Writing kubelet configuration to file {:?}", KUBELET_CONFIG.as_str());
    let cm = client
        .get("/api/v1/namespaces/kube-system/configmaps/kubelet-config")?
        .ok_or_else(|| Error::runtime("the ConfigMap kube-system/kubelet-config does not exist: the control plane has not finished its upload-config phase"))?;
    let kubelet_yaml = cm["data"]["kubelet"]
        .as_str()
        .ok_or_else(|| Error::runtime("ConfigMap kube-system/kubelet-config has no data.kubelet"))?;
    fs.write(&KUBELET_CONFIG, kubelet_yaml.as_bytes())?;
    let pause = pause_image(&client)?;
    // A control plane's taint is set by mark-control-plane, not registered by the kubelet.
    let taints = if a.control_plane.is_some() { None } else { crate::objects::kubelet::taints_flag(&a.taints) };
    let env = crate::objects::kubelet::kubeadm_flags_env(
        &a.cri_socket,
        &pause,
        &a.node_name,
        &a.hostname,
        taints,
        &a.kubelet_extra_args,
    );
    fs.write(&KUBELET_FLAGS_ENV, env.as_bytes())?;
    fs.commit()?;

    tls_bootstrap::run(ctx, &client, found)?;
    fs.remove(&BOOTSTRAP_KUBELET_CONF)?;
    if fs.root() == std::path::Path::new("/") {
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
    let text = client
        .get("/api/v1/namespaces/kube-system/configmaps/kubeadm-config")?
        .and_then(|cm| cm["data"]["ClusterConfiguration"].as_str().map(str::to_string));
    Ok(pause_image_from(text.as_deref()))
}

/// The pause image named by the kubeadm-config ConfigMap's ClusterConfiguration, v1beta3 or
/// v1beta4. kubeadm reads the ConfigMap leniently (a newer kubeadm may have added fields): if the
/// typed read fails, the repository is taken from the raw document, with a warning.
fn pause_image_from(cluster_configuration: Option<&str>) -> String {
    let repo = cluster_configuration.and_then(|text| match crate::config::cluster_from_configmap(text) {
        Ok(c) => Some(c.image_repository),
        Err(e) => {
            warn!("[kubelet-start] reading the kubeadm-config ConfigMap: {e}; taking only its imageRepository");
            serde_yaml::from_str::<serde_yaml::Value>(text)
                .ok()
                .and_then(|v| v["imageRepository"].as_str().map(str::to_string))
        }
    });
    let repo = repo.filter(|r| !r.is_empty()).unwrap_or_else(|| DEFAULT_IMAGE_REPOSITORY.to_string());
    format!("{repo}/pause:{}", crate::objects::kubelet::PAUSE_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What kubeadm 1.22-1.30 (v1beta3) and 1.31+ (v1beta4) store in the ConfigMap.
    #[test]
    fn pause_image_from_either_configmap_version() {
        let v1beta3 = "apiServer:\n  extraArgs:\n    authorization-mode: Node,RBAC\n  timeoutForControlPlane: 4m0s\n\
                       apiVersion: kubeadm.k8s.io/v1beta3\ncertificatesDir: /etc/kubernetes/pki\nclusterName: kubernetes\n\
                       controllerManager: {}\ndns: {}\netcd:\n  local:\n    dataDir: /var/lib/etcd\n\
                       imageRepository: mirror.example/k8s\nkind: ClusterConfiguration\nkubernetesVersion: v1.26.1\n\
                       networking:\n  dnsDomain: cluster.local\n  serviceSubnet: 10.96.0.0/12\nscheduler: {}\n";
        let v1beta4 = "apiServer: {}\napiVersion: kubeadm.k8s.io/v1beta4\ncaCertificateValidityPeriod: 87600h0m0s\n\
                       controllerManager:\n  extraArgs:\n  - name: cloud-provider\n    value: external\n\
                       encryptionAlgorithm: RSA-2048\nimageRepository: mirror.example/k8s\nkind: ClusterConfiguration\n\
                       kubernetesVersion: v1.33.4\nproxy: {}\n";
        let want = format!("mirror.example/k8s/pause:{}", crate::objects::kubelet::PAUSE_VERSION);
        assert_eq!(pause_image_from(Some(v1beta3)), want);
        assert_eq!(pause_image_from(Some(v1beta4)), want);
        // A field from a newer kubeadm: the repository still counts.
        let newer = format!("{v1beta4}someFutureField: 1\n");
        assert_eq!(pause_image_from(Some(&newer)), want);
        assert_eq!(
            pause_image_from(None),
            format!("{DEFAULT_IMAGE_REPOSITORY}/pause:{}", crate::objects::kubelet::PAUSE_VERSION)
        );
    }
}
