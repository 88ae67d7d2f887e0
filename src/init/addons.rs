//! The addon phase's two sub-phases, as kubeadm's `addon/coredns` and `addon/kube-proxy`, so
//! `--skip-phases=addon/kube-proxy` (a kube-proxy-free CNI) installs CoreDNS alone.

use log::info;
use serde_json::Value;

use super::InitContext;
use crate::error::Result;
use crate::objects;
use crate::patches::Target;

fn apply_all(ctx: &InitContext, objs: &[Value]) -> Result<()> {
    super::api::apply_all(ctx, ctx.admin()?, "addon", objs)
}

/// The CoreDNS objects, the Deployment patched (target `corednsdeployment`).
pub(crate) fn coredns_objects(ctx: &InitContext, quiet: bool) -> Result<Vec<Value>> {
    let mut dns = objects::coredns::coredns_objects(&ctx.cfg);
    patch_kind(ctx, &mut dns, Target::CorednsDeployment, ("apps/v1", "Deployment"), quiet)?;
    Ok(dns)
}

/// The kube-proxy objects, the DaemonSet patched (target `kubeproxydaemonset`); the host's
/// proxy variables are added to its env after the patches, as kubeadm adds them.
pub(crate) fn kube_proxy_objects(ctx: &InitContext, quiet: bool) -> Result<Vec<Value>> {
    let mut proxy = objects::proxy::kube_proxy_objects_with_env(&ctx.cfg, &[])?;
    patch_kind(ctx, &mut proxy, Target::KubeproxyDaemonset, ("apps/v1", "DaemonSet"), quiet)?;
    let extra = objects::proxy::proxy_env_vars(&ctx.env.proxy_env);
    if let Some(ds) = proxy.iter_mut().find(|o| o["kind"] == "DaemonSet")
        && let Some(c) = ds.pointer_mut("/spec/template/spec/containers/0")
        && !extra.is_empty()
    {
        match c.get_mut("env").and_then(Value::as_array_mut) {
            Some(env) => env.extend(extra),
            None => c["env"] = Value::Array(extra),
        }
    }
    Ok(proxy)
}

fn patch_kind(ctx: &InitContext, objs: &mut [Value], target: Target, kind: (&str, &str), quiet: bool) -> Result<()> {
    let Some(patches) = ctx.patches()? else { return Ok(()) };
    if let Some(o) = objs.iter_mut().find(|o| o["kind"] == kind.1) {
        *o = patches.object(target, std::mem::take(o), kind, quiet)?;
    }
    Ok(())
}

pub fn coredns(ctx: &InitContext) -> Result<()> {
    let dns = coredns_objects(ctx, false)?;
    if dns.is_empty() {
        info!("[addon] CoreDNS is disabled");
        return Ok(());
    }
    apply_all(ctx, &dns)
}

pub fn kube_proxy(ctx: &InitContext) -> Result<()> {
    let proxy = kube_proxy_objects(ctx, false)?;
    if proxy.is_empty() {
        info!("[addon] kube-proxy is disabled");
        return Ok(());
    }
    apply_all(ctx, &proxy)
}
