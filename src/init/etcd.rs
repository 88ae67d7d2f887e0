use log::info;

use super::{InitContext, write_manifest};
use crate::error::Result;

pub fn run(ctx: &InitContext) -> Result<()> {
    let Some(pod) = crate::manifests::etcd(&ctx.cfg, &ctx.env) else {
        info!("[etcd] External etcd mode: skipping the local etcd manifest");
        return Ok(());
    };
    if let Some(local) = ctx.cfg.local_etcd() {
        ctx.node.fs.mkdir(&crate::paths::etcd_data_dir(&local.data_dir))?;
    }
    let pod = ctx.patched_pod("etcd", pod, false)?;
    write_manifest(ctx, "etcd", &pod)
}
