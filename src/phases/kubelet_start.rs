use log::info;

use super::InitContext;
use crate::error::Result;
use crate::objects::kubelet;

pub const CONFIG: &str = "/var/lib/kubelet/config.yaml";
pub const FLAGS_ENV: &str = "/var/lib/kubelet/kubeadm-flags.env";

/// Writes the kubelet's config and flags, then (on a real root) restarts it so it runs the
/// static Pods.
pub fn run(ctx: &InitContext) -> Result<()> {
    let cfg = ctx.cfg;
    info!("[kubelet-start] Writing kubelet configuration to file {CONFIG:?}");
    ctx.fs.write(CONFIG, kubelet::config_yaml(cfg)?.as_bytes(), 0o644, 0o700)?;
    let nr = &cfg.init.node_registration;
    let env = kubelet::kubeadm_flags_env(
        &nr.cri_socket,
        &kubelet::pause_image(cfg),
        &cfg.node_name,
        &crate::host::hostname(),
        None,
        &nr.kubelet_extra_args,
    );
    info!("[kubelet-start] Writing kubelet environment file with flags to file {FLAGS_ENV:?}");
    ctx.fs.write(FLAGS_ENV, env.as_bytes(), 0o644, 0o700)?;
    ctx.fs.commit()?;
    if ctx.fs.root() == std::path::Path::new("/") {
        crate::systemd::restart_kubelet();
    }
    Ok(())
}
