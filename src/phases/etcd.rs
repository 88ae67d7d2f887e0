use log::info;

use super::{InitContext, write_manifest};
use crate::error::Result;

pub fn run(ctx: &InitContext) -> Result<()> {
    let Some(pod) = crate::manifests::etcd(ctx.cfg, &ctx.env) else {
        info!("[etcd] External etcd mode: skipping the local etcd manifest");
        return Ok(());
    };
    if let Some(local) = ctx.cfg.local_etcd() {
        // etcd refuses a data dir readable by others.
        ctx.fs.mkdir(&local.data_dir, 0o700)?;
    }
    write_manifest(ctx, "etcd", &pod)
}
