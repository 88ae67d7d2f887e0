//! At boot, a first control plane's controller-manager and scheduler started after its API server.
//!
//! kubeadm writes etcd's manifest and the three control-plane ones before it starts the kubelet,
//! which starts the four Pods. On a small or emulated VM the kubelet brings them up one after
//! another, ~10 s apart, in no set order: with etcd last, the API server started ~30 s before it
//! and exited ("etcd grpc connection not ready") to start again; and the controller-manager and
//! scheduler, which can do nothing before the API server answers, took its CPU. So a boot's
//! pre-kubelet stage writes etcd's and the API server's manifests (the control-plane phase with
//! `apiserver_first`), and its post-kubelet stage writes the other two once the API server answers
//! its startup probe. The wait is bounded ([`HOLD`]): past it they are written anyway, kubeadm's
//! order at worst. The files are kubeadm's.

use std::time::Duration;

use log::{info, warn};

use super::{InitContext, control_plane, write_manifest};
use crate::error::Result;
use crate::retry::{Attempt, GaveUp};

/// How long the wait holds the controller-manager and scheduler back.
pub(crate) const HOLD: Duration = Duration::from_secs(120);

/// Whether a boot's init holds the controller-manager and scheduler back: a local etcd whose
/// manifest this run writes, and neither phase skipped (`skipped`: phases::is_skipped on the
/// user's skipPhases; init does not import phases, which imports it).
pub(crate) fn applies(ctx: &InitContext, skipped: impl Fn(&str) -> bool) -> bool {
    ctx.cfg.local_etcd().is_some() && !skipped("etcd") && !skipped("control-plane")
}

/// A component's health endpoint, asked once.
pub(crate) trait Health {
    fn ask(&self, url: &str) -> std::result::Result<(), String>;
}

/// Over HTTPS, unverified as the kubelet's probes are (`https_ok_unverified`, as the upgrade's
/// wait for a new manifest asks).
struct Probe;

impl Health for Probe {
    fn ask(&self, url: &str) -> std::result::Result<(), String> {
        crate::kube::https_ok_unverified(url, crate::timeouts::REQUEST).map_err(|e| e.to_string())
    }
}

/// The control-plane phase of a boot's post-kubelet stage.
pub(crate) fn run(ctx: &InitContext) -> Result<()> {
    run_with(ctx, &Probe)
}

pub(crate) fn run_with(ctx: &InitContext, health: &dyn Health) -> Result<()> {
    // All three patched before any is written, as the phase does: a bad patch writes nothing.
    let pods = control_plane::pods(ctx, false)?;
    let Some((_, api)) = pods.iter().find(|(name, _)| *name == "kube-apiserver") else {
        return Err(crate::error::Error::internal("the control-plane phase has no kube-apiserver Pod"));
    };
    // Written before the kubelet started; again only if a changed config asks for it.
    write_manifest(ctx, "kube-apiserver", api)?;
    // Writes are staged until a commit: the kubelet sees a manifest only from there.
    ctx.node.fs.commit()?;
    if let Some(url) = crate::manifests::pod::probe_url(api) {
        wait(ctx, "kube-apiserver", &url, health);
    }
    for (name, pod) in pods.iter().filter(|(name, _)| *name != "kube-apiserver") {
        write_manifest(ctx, name, pod)?;
    }
    Ok(())
}

/// Waits up to [`HOLD`] for `what` to answer at `url`; gives up with a warning.
fn wait(ctx: &InitContext, what: &str, url: &str, health: &dyn Health) {
    info!(
        "[control-plane] Waiting for {what} at {url} before writing the controller-manager and scheduler manifests (up to {})",
        crate::config::values::go_duration(HOLD)
    );
    let since = crate::clock::boot_ms();
    let asking = format!("waiting for {what}");
    let waited = ctx.poll(&asking, "control-plane", HOLD).run::<_, GaveUp>(|| match health.ask(url) {
        Ok(()) => Attempt::Done(()),
        Err(e) => Attempt::Wait(e),
    });
    match waited {
        Ok(()) => {
            if let Some(r) = ctx.node.report {
                r.span(&format!("{what} answered"), since);
            }
        }
        Err(e) => warn!("[control-plane] {e}; writing the controller-manager and scheduler manifests anyway"),
    }
}

#[cfg(test)]
#[path = "in_order_tests.rs"]
mod tests;
