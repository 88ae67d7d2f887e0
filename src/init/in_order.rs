//! At boot, a first control plane's static Pods written in the order they need each other.
//!
//! kubeadm writes etcd's manifest and the three control-plane ones before it starts the kubelet,
//! which then starts all four Pods at once. On a small or emulated VM the kubelet brings them up
//! one after another, ~10 s apart, in no set order: an API server started before etcd exits after
//! ~20 s ("etcd grpc connection not ready") and starts again, and the controller-manager and
//! scheduler starting beside it slow the API server everything waits for. So a boot's
//! pre-kubelet stage writes etcd's manifest (as kubeadm does) and holds the control-plane phase
//! back; the post-kubelet stage runs it here: the API server's manifest once etcd answers its
//! probe, the other two once the API server answers its own. Each wait is bounded ([`HOLD`]):
//! past it the manifests are written anyway, kubeadm's order at worst. The files are kubeadm's.

use std::time::Duration;

use log::{info, warn};

use super::{InitContext, control_plane, write_manifest};
use crate::error::Result;
use crate::retry::{Attempt, GaveUp};

/// How long each wait holds the next manifests back.
pub(crate) const HOLD: Duration = Duration::from_secs(120);

/// Whether a boot's init writes the control-plane manifests after the kubelet starts: a local
/// etcd whose manifest this run writes, and neither phase skipped by the user.
pub(crate) fn applies(ctx: &InitContext) -> bool {
    let skipped = |p: &str| crate::phases::is_skipped(&ctx.cfg.init.skip_phases, p);
    ctx.cfg.local_etcd().is_some() && !skipped("etcd") && !skipped("control-plane")
}

/// A component's health endpoint, asked once.
pub(crate) trait Health {
    fn ask(&self, url: &str) -> std::result::Result<(), String>;
}

/// Over HTTP(S), unverified as the kubelet's probes are.
struct Probe;

impl Health for Probe {
    fn ask(&self, url: &str) -> std::result::Result<(), String> {
        let t = crate::timeouts::REQUEST;
        let r = if url.starts_with("https:") {
            crate::kube::https_ok_unverified(url, t)
        } else {
            crate::kube::http_ok(url, t)
        };
        r.map_err(|e| e.to_string())
    }
}

/// The control-plane phase of a boot's post-kubelet stage.
pub(crate) fn run(ctx: &InitContext) -> Result<()> {
    run_with(ctx, &Probe)
}

pub(crate) fn run_with(ctx: &InitContext, health: &dyn Health) -> Result<()> {
    // All three patched before the first is written, as the phase does: a bad patch writes nothing.
    let pods = control_plane::pods(ctx, false)?;
    let etcd = crate::manifests::etcd(&ctx.cfg, &ctx.env).map(|p| ctx.patched_pod("etcd", p, true)).transpose()?;
    let mut before = etcd.as_ref().and_then(crate::manifests::pod::probe_url).map(|u| ("etcd", u));
    for (name, pod) in &pods {
        // The controller-manager and the scheduler wait for the same answer.
        if let Some((what, url)) = before.take() {
            // Writes are staged until a commit: the kubelet sees each manifest only from there.
            ctx.node.fs.commit()?;
            wait(ctx, what, &url, name, health);
        }
        write_manifest(ctx, name, pod)?;
        if *name == "kube-apiserver" {
            before = crate::manifests::pod::probe_url(pod).map(|u| ("kube-apiserver", u));
        }
    }
    Ok(())
}

/// Waits up to [`HOLD`] for `what` to answer at `url` before `next`'s manifest; gives up quietly.
fn wait(ctx: &InitContext, what: &str, url: &str, next: &str, health: &dyn Health) {
    info!(
        "[control-plane] Waiting for {what} at {url} before writing the {next} manifest (up to {})",
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
                r.span(&format!("{what} answered (before {next})"), since);
            }
        }
        Err(e) => warn!("[control-plane] {e}; writing the {next} manifest anyway"),
    }
}

#[cfg(test)]
#[path = "in_order_tests.rs"]
mod tests;
