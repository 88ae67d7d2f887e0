use log::info;

use super::InitContext;
use crate::error::Result;
use crate::objects::kubelet;
use crate::paths::{KUBELET_CONFIG, KUBELET_FLAGS_ENV};

/// Writes the kubelet's config and flags, then (on a real root) restarts it so it runs the
/// static Pods.
pub fn run(ctx: &InitContext) -> Result<()> {
    let cfg = ctx.cfg;
    info!("[kubelet-start] Writing kubelet configuration to file {:?}", KUBELET_CONFIG.as_str());
    ctx.fs.write(&KUBELET_CONFIG, kubelet::config_yaml(cfg)?.as_bytes())?;
    let nr = &cfg.init.node_registration;
    let env = kubelet::kubeadm_flags_env(
        &nr.cri_socket,
        &kubelet::pause_image(cfg),
        &cfg.node_name,
        &crate::host::hostname(),
        None,
        &nr.kubelet_extra_args,
    );
    info!("[kubelet-start] Writing kubelet environment file with flags to file {:?}", KUBELET_FLAGS_ENV.as_str());
    ctx.fs.write(&KUBELET_FLAGS_ENV, env.as_bytes())?;
    ctx.fs.commit()?;
    if ctx.fs.root() == std::path::Path::new("/") {
        crate::systemd::restart_kubelet();
    }
    Ok(())
}
