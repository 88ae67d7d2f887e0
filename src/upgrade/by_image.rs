//! A control plane booted on the image of the next version, once its kubelet runs: one control
//! plane at a time (the Lease in lease.rs), the first to find the cluster at the old version runs
//! `upgrade apply <image's version>`, every later one `upgrade node`. Both are idempotent (an
//! unchanged component is skipped), so a run cut short converges when the next boot runs it again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use log::info;

use super::cluster::{client_from, node_name_within};
use crate::clock::Clock;
use crate::config::values::Version;
use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::host::Host;
use crate::paths::{ADMIN_CONF, KUBELET_CONF};
use crate::timeouts::KUBERNETES_API_CALL;

/// What a control plane did: `apply` or `node`. `patches`: the node's own patches directory
/// (its init's or join's), applied again to the new static Pods and kubelet config.
pub fn control_plane_by_image(
    fs: &NodeFs,
    host: &dyn Host,
    image: &Version,
    patches: Option<String>,
    wait: Duration,
    clock: &dyn Clock,
    waiting: &dyn Fn(&str),
) -> Result<&'static str> {
    let admin = fs.real(ADMIN_CONF.as_str());
    let client = client_from(fs, &admin)?;
    let renewer = client_from(fs, &admin)?;
    // One budget for the three waits (the API server, the lease, the control planes Ready), so
    // that with the rollout they fit kubestrap-post.service's TimeoutStartSec: never a kill
    // mid-rollout.
    let deadline = clock.now() + wait;
    let left = || deadline.saturating_duration_since(clock.now());
    // The kubelet has just started this node's static Pods: its API server may take minutes.
    waiting("waiting for the API server (this node's kubelet is starting it)");
    let me = node_name_within(&client_from(fs, &fs.real(KUBELET_CONF.as_str()))?, left().max(KUBERNETES_API_CALL))?;
    super::lease::acquire(&client, &me, clock, left(), waiting)?;
    info!("[upgrade] {me} holds kube-system/kubestrap-upgrade");
    let done = AtomicBool::new(false);
    let result = std::thread::scope(|s| {
        s.spawn(|| super::lease::keep(&renewer, &me, &done));
        let r = run(fs, host, &client, image, patches, &Patience { wait: left(), clock, waiting });
        done.store(true, Ordering::SeqCst);
        r
    });
    super::lease::release(&client, &me);
    result
}

/// How long to wait for the control planes to be Ready, on which clock, and whom to tell.
struct Patience<'a> {
    wait: Duration,
    clock: &'a dyn Clock,
    waiting: &'a dyn Fn(&str),
}

fn run(
    fs: &NodeFs,
    host: &dyn Host,
    client: &crate::kube::Client,
    image: &Version,
    patches: Option<String>,
    patience: &Patience<'_>,
) -> Result<&'static str> {
    let Patience { wait, clock, waiting } = *patience;
    // kubeadm's preflight wants every control plane Ready; after a reboot they may still be starting.
    let deadline = clock.now() + wait;
    loop {
        let not_ready = super::apply::not_ready_control_planes(client)?;
        if not_ready.is_empty() {
            break;
        }
        if clock.now() >= deadline {
            return Err(Error::cluster(format!(
                "control planes {not_ready:?} stayed NotReady for {}s; the next boot tries again",
                wait.as_secs()
            )));
        }
        waiting(&format!("waiting for the control planes {not_ready:?} to be Ready before upgrading"));
        clock.sleep(Duration::from_secs(5), "the control planes to be Ready");
    }
    let cluster = super::stored_version(client)?;
    let behind = (cluster.major, cluster.minor, cluster.patch) < (image.major, image.minor, image.patch);
    // An `apply` cut short after it stored the new kubeadm-config finds the cluster "current":
    // the marker says it was an apply, so it is one again (kubelet-config, the bootstrap-token
    // rules and the add-ons are apply's alone).
    let marked = fs.read(crate::paths::UPGRADE_IN_PROGRESS.as_str())?;
    let was_apply = marked.is_some_and(|m| String::from_utf8_lossy(&m).trim() == format!("apply {image}"));
    let now = clock.wall();
    // kubeadm's defaults, as `upgrade node` with no flags; apply at the image's version.
    let mut args = super::apply::ApplyArgs::for_node(&super::NodeArgs::for_boot(fs.root(), patches));
    if behind || was_apply {
        (args.version, args.node) = (image.to_string(), false);
        if behind {
            fs.write(&crate::paths::UPGRADE_IN_PROGRESS, format!("apply {image}\n").as_bytes())?;
            fs.commit()?;
            info!("[upgrade] The cluster runs {cluster}: this control plane upgrades it to {image} (upgrade apply)");
        } else {
            info!("[upgrade] This control plane's upgrade apply to {image} was cut short: running it again");
        }
        super::apply::run_apply(&args, fs, host, now, &mut std::io::empty())?;
        Ok("apply")
    } else {
        info!("[upgrade] The cluster runs {cluster}: upgrading this control plane (upgrade node)");
        super::apply::run_node_control_plane(&args, fs, host, now)?;
        Ok("node")
    }
}
