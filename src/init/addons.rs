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
    coredns_objects_with(ctx, None, quiet)
}

/// The same, the Deployment with `replicas` (the deployed one's, as kubeadm keeps it) set before
/// the patches, as kubeadm's template takes it: a patch still has the last word.
fn coredns_objects_with(ctx: &InitContext, replicas: Option<Value>, quiet: bool) -> Result<Vec<Value>> {
    let mut dns = objects::coredns::coredns_objects(&ctx.cfg);
    if let Some(r) = replicas
        && let Some(d) = dns.iter_mut().find(|o| o["kind"] == "Deployment")
    {
        d["spec"]["replicas"] = r;
    }
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

/// kubeadm's EnsureDNSAddon, in init and upgrade alike: the deployed Deployment's replicas are
/// kept; the `coredns` ConfigMap is created, or replaced only while its Corefile is empty, and
/// otherwise kept as it is (kubeadm's CreateOrRetain: corefile-migration v1.0.34, which kubeadm
/// 1.37 pins, finds no migration between CoreDNS 1.14.x, and kubeadm's own default Corefile is not
/// one of its "default" ones, so kubeadm keeps every non-empty Corefile).
pub fn coredns(ctx: &InitContext) -> Result<()> {
    if ctx.cfg.cluster.dns.disabled {
        info!("[addon] CoreDNS is disabled");
        return Ok(());
    }
    let client = ctx.admin()?;
    let deployments = format!(
        "/apis/apps/v1/namespaces/kube-system/deployments?labelSelector=k8s-app%3D{}",
        objects::coredns::APP_LABEL
    );
    // A GET rather than a list: a dry run's recorder answers an unknown path 404, as none.
    let found = ctx
        .retry("listing the DNS addon's Deployments", "addon", ctx.cfg.api_call_timeout)
        .run(|| crate::kube::ApiError::attempt::<_, crate::error::Error>(client.get(&deployments)))?;
    let found = found.and_then(|l| l["items"].as_array().cloned()).unwrap_or_default();
    let replicas = match &found[..] {
        [] => None,
        [d] => d["spec"].get("replicas").filter(|r| !r.is_null()).cloned(),
        many => {
            let names: Vec<&str> = many.iter().filter_map(|d| d["metadata"]["name"].as_str()).collect();
            return Err(crate::error::Error::failed(format!(
                "multiple DNS addon deployments found: {}; keep one Deployment labelled k8s-app={} in kube-system",
                names.join(", "),
                objects::coredns::APP_LABEL
            )));
        }
    };
    let cm = format!("/api/v1/namespaces/kube-system/configmaps/{}", objects::coredns::NAME);
    let current = ctx
        .retry("reading the coredns ConfigMap", "addon", ctx.cfg.api_call_timeout)
        .run(|| crate::kube::ApiError::attempt::<_, crate::error::Error>(client.get(&cm)))?;
    let keep_corefile = match current.as_ref().map(|c| c["data"].get("Corefile")) {
        None => false,
        Some(Some(Value::String(f))) => !f.is_empty(),
        Some(_) => {
            return Err(crate::error::Error::failed(
                "unable to fetch CoreDNS current installed version and ConfigMap.: unable to find the CoreDNS Corefile data (the coredns ConfigMap in kube-system has no Corefile key; restore it or delete the ConfigMap)",
            ));
        }
    };
    for o in coredns_objects_with(ctx, replicas, false)? {
        if keep_corefile && o["kind"] == "ConfigMap" {
            info!("[addon] Kept the coredns ConfigMap: its Corefile is the cluster's own, as kubeadm keeps it");
            continue;
        }
        ctx.apply(client, "addon", &o)?;
        info!("[addon] Applied {}", crate::kube::paths::describe(&o));
    }
    Ok(())
}

pub fn kube_proxy(ctx: &InitContext) -> Result<()> {
    let proxy = kube_proxy_objects(ctx, false)?;
    if proxy.is_empty() {
        info!("[addon] kube-proxy is disabled");
        return Ok(());
    }
    apply_all(ctx, &proxy)
}
