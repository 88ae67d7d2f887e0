use log::info;

use super::InitContext;
use crate::error::Result;
use crate::paths;
use crate::preflight::{self, Input};

pub fn run(ctx: &InitContext) -> Result<()> {
    if !ctx.node.live {
        // Building a node root elsewhere (an image, a test): this machine is not the node.
        info!(
            "[preflight] Skipped: --root {} is not this machine's root, so its checks would not describe the node",
            ctx.node.fs.root().display()
        );
        return Ok(());
    }
    let mut input = Input::control_plane(&ctx.cfg, ctx.node.fs.root());
    input.resuming = ctx.node.fs.exists(&paths::INIT_IN_PROGRESS);
    info!(
        "[preflight] Running pre-flight checks{}",
        if input.resuming { " (resuming an interrupted init)" } else { "" }
    );
    let report = preflight::run(ctx.node.host, &input, &ctx.ignore_preflight);
    if let Some(r) = ctx.node.report {
        r.set(|s| s.preflight = serde_json::to_value(&report).ok());
    }
    preflight::enforce(&report)?;
    Ok(ctx.node.fs.write(&paths::INIT_IN_PROGRESS, b"")?)
}
