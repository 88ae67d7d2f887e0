//! The addon phase's two sub-phases, as kubeadm's `addon/coredns` and `addon/kube-proxy`, so
//! `--skip-phases=addon/kube-proxy` (a kube-proxy-free CNI) installs CoreDNS alone.

use log::info;
use serde_json::Value;

use super::InitContext;
use crate::error::Result;
use crate::objects;

fn apply_all(ctx: &InitContext, objs: &[Value]) -> Result<()> {
    super::api::apply_all(ctx, ctx.admin()?, "addon", objs)
}

pub fn coredns(ctx: &InitContext) -> Result<()> {
    let dns = objects::coredns::coredns_objects(&ctx.cfg);
    if dns.is_empty() {
        info!("[addon] CoreDNS is disabled");
        return Ok(());
    }
    apply_all(ctx, &dns)
}

pub fn kube_proxy(ctx: &InitContext) -> Result<()> {
    let proxy = objects::proxy::kube_proxy_objects_with_env(&ctx.cfg, &ctx.env.proxy_env)?;
    if proxy.is_empty() {
        info!("[addon] kube-proxy is disabled");
        return Ok(());
    }
    apply_all(ctx, &proxy)
}
