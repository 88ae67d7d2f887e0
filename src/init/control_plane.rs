use super::{InitContext, write_manifest};
use crate::error::Result;
use crate::manifests;

pub fn run(ctx: &InitContext) -> Result<()> {
    // All three patched in memory before the first is written: a bad patch writes nothing.
    for (name, pod) in pods(ctx, false)? {
        // At boot the other two follow the API server's answer (init::in_order).
        if ctx.apiserver_first && name != "kube-apiserver" {
            continue;
        }
        write_manifest(ctx, name, &pod)?;
    }
    Ok(())
}

/// The three control-plane static Pods, with their patches.
pub(crate) fn pods(ctx: &InitContext, quiet: bool) -> Result<Vec<(&'static str, serde_json::Value)>> {
    let external_ca = crate::pki::is_external_ca(ctx.node.fs, &ctx.cfg);
    let pods = [
        ("kube-apiserver", manifests::kube_apiserver(&ctx.cfg, &ctx.env)),
        ("kube-controller-manager", manifests::kube_controller_manager(&ctx.cfg, &ctx.env, external_ca)),
        ("kube-scheduler", manifests::kube_scheduler(&ctx.cfg, &ctx.env)),
    ];
    pods.into_iter().map(|(name, pod)| Ok((name, ctx.patched_pod(name, pod, quiet)?))).collect()
}
