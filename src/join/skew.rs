//! The kubelet against the cluster's version, once discovery has verified the cluster and before
//! any of the node's files is written: kubeadm runs its KubeletVersion check with the cluster's
//! `kubernetesVersion` (kubeadm-config) for a control-plane join; kubestrap runs it for a worker
//! too (a kubelet newer than the control plane is outside Kubernetes' skew policy; kubeadm lets a
//! worker join with one). `--ignore-preflight-errors=KubeletVersion` lets it through, as kubeadm's.
//! Under `--root` the kubelet asked is the root's (`/usr/bin/kubelet`), when it has one.

use log::{info, warn};

use super::JoinContext;
use super::control_plane;
use super::discover::Found;
use crate::config::values::Version;
use crate::error::{Error, Result};

pub(super) fn check(ctx: &JoinContext, found: &Found) -> Result<()> {
    let a = ctx.args;
    if ctx.dry_run_api.is_some() {
        return Ok(());
    }
    // Under `--root` (an image being prepared, a test's node) the node's kubelet is the root's
    // own, not this machine's; with none there, there is nothing to check.
    let kubelet = if ctx.node.live {
        None
    } else {
        let Some(p) = ROOT_KUBELETS.iter().map(|p| ctx.node.fs.real(p)).find(|p| crate::host::is_executable(p)) else {
            return Ok(());
        };
        Some(p)
    };
    let version = match cluster_version(ctx, found) {
        Ok(v) => v,
        // kubeadm needs the cluster's configuration to join a control plane; a worker does not.
        Err(e) if a.control_plane.is_none() => {
            warn!("[preflight] The kubelet's version is not checked against the cluster's: {e}");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    info!("[preflight] Checking the kubelet against the cluster's version {version} (kubeadm-config)");
    let host = a.discovery.as_ref().and_then(super::Discovery::endpoint_host);
    let mut input =
        crate::preflight::Input::worker(ctx.node.fs.root(), a.node_name.clone(), Some(a.cri_socket.clone()), host);
    input.kubernetes_version = version;
    input.kubelet = kubelet;
    let pf = crate::preflight::run_only(ctx.node.host, &input, &a.ignore_preflight, &["KubeletVersion"]);
    Ok(crate::preflight::enforce(&pf)?)
}

/// Where an image keeps its kubelet (distribution packages, then release tarballs).
const ROOT_KUBELETS: [&str; 2] = ["/usr/bin/kubelet", "/usr/local/bin/kubelet"];

/// kubeadm-config's `kubernetesVersion`, read with the bootstrap token (kubeadm's RBAC lets
/// bootstrappers read that ConfigMap).
fn cluster_version(ctx: &JoinContext, found: &Found) -> Result<Version> {
    let text = control_plane::stored_cluster_configuration(ctx, &found.client(ctx)?, "preflight")?;
    let source = "ConfigMap kube-system/kubeadm-config";
    let v = crate::config::parse_stored(source, &text)?.cluster.map(|c| c.kubernetes_version).unwrap_or_default();
    Version::parse(&v).map_err(|e| Error::cluster(format!("{source}: kubernetesVersion {v:?}: {e}")))
}
