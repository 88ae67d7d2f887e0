//! A control plane booted on the image of the next version, after its kubelet has started the old
//! static Pods (kubestrap-post.service, every boot after the first): `upgrade apply` or `upgrade
//! node`, one control plane at a time (crate::upgrade::control_plane_by_image). A failed run
//! has rolled its static Pods back; the failure file says why and the next boot tries again.

use log::info;

use super::image_upgrade::{Change, Env, ImageUpgrade, change, control_plane_version, image_version};
use crate::error::Result;
use crate::fsutil::NodeFs;
use crate::paths;
use crate::status::Reporter;

pub(crate) fn run(fs: &NodeFs, report: &Reporter, env: &Env) -> Result<()> {
    if !super::image_upgrade::is_control_plane(fs) {
        return Ok(());
    }
    let Some(image) = image_version(fs)? else { return Ok(()) };
    let Some(node) = control_plane_version(fs)? else { return Ok(()) };
    let marked = fs.read(paths::UPGRADE_IN_PROGRESS.as_str())?;
    let resuming =
        marked.is_some_and(|m| crate::upgrade::marker_target(&String::from_utf8_lossy(&m)) == image.to_string());
    if change(&node, &image) != Change::Upgrade && !resuming {
        return Ok(());
    }
    if resuming {
        info!(
            "[upgrade] An upgrade to {image} was cut short ({}): running it again to finish it",
            paths::UPGRADE_IN_PROGRESS
        );
    }
    if !resuming {
        // Resumed, the marker is kept as it is: it may say `apply` (crate::upgrade::by_image).
        fs.write(&paths::UPGRADE_IN_PROGRESS, format!("{image}\n").as_bytes())?;
        fs.commit()?;
    }
    let kubelet_config = fs.read(paths::KUBELET_CONFIG.as_str())?;
    let start = crate::clock::boot_ms();
    let mut u = ImageUpgrade { image: image.to_string(), node: node.to_string(), ..Default::default() };
    info!("[upgrade] This control plane runs {node}; its image carries {image}");
    let waiting = |m: &str| {
        info!("[upgrade] {m}");
        report.waiting(m);
    };
    let result = crate::upgrade::control_plane_by_image(
        fs,
        env.host,
        &image,
        env.patches.clone(),
        env.wait,
        env.clock,
        &waiting,
    );
    report.span("upgrade by image", start);
    match result {
        Ok(how) => {
            // The version file a first boot wrote, kept true for those who read it (a worker's
            // check reads it; a control plane's reads its manifests).
            fs.write(&paths::DEPLOYED_VERSION, format!("{image}\n").as_bytes())?;
            fs.commit()?;
            fs.remove(paths::UPGRADE_IN_PROGRESS.as_str())?;
            // The kubelet already runs (the image's); it reads a rewritten config.yaml only when
            // it restarts (its static Pods' containers keep running across that).
            if fs.read(paths::KUBELET_CONFIG.as_str())? != kubelet_config {
                if crate::node::is_live(fs.root()) {
                    crate::systemd::queue_kubelet_restart("[upgrade]");
                } else {
                    info!("[upgrade] {} changed: restart the kubelet to load it", paths::KUBELET_CONFIG);
                }
            }
            u.state = "upgraded".into();
            u.reason = format!("upgrade {how}");
            u.control_plane = image.to_string();
            report.set(|s| s.upgrade = Some(u));
            Ok(())
        }
        Err(e) => {
            u.state = "failed".into();
            u.reason = e.message.clone();
            report.set(|s| s.upgrade = Some(u));
            Err(e)
        }
    }
}
