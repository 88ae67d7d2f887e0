use super::InitContext;
use crate::error::Result;

pub fn run(ctx: &InitContext) -> Result<()> {
    Ok(crate::pki::ensure_certs(ctx.node.fs, &ctx.cfg, ctx.start, &ctx.keys)?)
}
