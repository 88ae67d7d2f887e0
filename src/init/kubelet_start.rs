use log::info;

use super::InitContext;
use crate::error::Result;
use crate::objects::kubelet;
use crate::paths::{KUBELET_CONFIG, KUBELET_FLAGS_ENV, KUBELET_INSTANCE_CONFIG};

/// Writes the kubelet's flags, instance config and config (kubeadm 1.37's order), then (on a
/// real root) restarts it so it runs the static Pods.
pub fn run(ctx: &InitContext) -> Result<()> {
    let cfg = &ctx.cfg;
    let nr = &cfg.init.node_registration;
    // No taints flag: mark-control-plane sets a control plane's taints.
    let env = kubelet::kubeadm_flags_env(&cfg.node_name, &crate::host::hostname(), None, &nr.kubelet_extra_args);
    info!("[kubelet-start] Writing kubelet environment file with flags to file {:?}", KUBELET_FLAGS_ENV.as_str());
    ctx.node.fs.write(&KUBELET_FLAGS_ENV, env.as_bytes())?;
    info!("[kubelet-start] Writing kubelet configuration to file {:?}", KUBELET_INSTANCE_CONFIG.as_str());
    ctx.node.fs.write(&KUBELET_INSTANCE_CONFIG, kubelet::instance_config_yaml(&nr.cri_socket).as_bytes())?;
    info!("[kubelet-start] Writing kubelet configuration to file {:?}", KUBELET_CONFIG.as_str());
    let config = patched_config(ctx, false)?;
    crate::patches::log_instance_config();
    ctx.node.fs.write(&KUBELET_CONFIG, kubelet::init_node_config_yaml_from(config, cfg)?.as_bytes())?;
    ctx.node.fs.commit()?;
    if ctx.node.live {
        crate::systemd::restart_kubelet();
    }
    Ok(())
}

/// The KubeletConfiguration with the patches for `kubeletconfiguration` (the node's
/// instance-config.yaml is merged after them, as kubeadm merges it).
pub(crate) fn patched_config(ctx: &InitContext, quiet: bool) -> Result<serde_yaml::Mapping> {
    let m = kubelet::kubelet_configuration(&ctx.cfg);
    match ctx.patches()? {
        Some(p) => Ok(p.kubelet_config(m, quiet)?),
        None => Ok(m),
    }
}
