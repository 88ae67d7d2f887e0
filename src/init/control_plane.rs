use super::{InitContext, write_manifest};
use crate::error::Result;
use crate::manifests;

pub fn run(ctx: &InitContext) -> Result<()> {
    let external_ca = crate::pki::is_external_ca(ctx.node.fs, &ctx.cfg);
    write_manifest(ctx, "kube-apiserver", &manifests::kube_apiserver(&ctx.cfg, &ctx.env))?;
    write_manifest(
        ctx,
        "kube-controller-manager",
        &manifests::kube_controller_manager(&ctx.cfg, &ctx.env, external_ca),
    )?;
    write_manifest(ctx, "kube-scheduler", &manifests::kube_scheduler(&ctx.cfg, &ctx.env))
}
