//! Upgrade by booting the next image: at every boot after the first, before the kubelet starts,
//! the Kubernetes version the image was built for (`/usr/share/kubestrap/image.json`, written at
//! image build time) is compared with the version the node was set up for. A worker whose image
//! is one minor (or patches) newer runs `upgrade node` once its control plane runs that minor;
//! until then it waits, bounded, with the kubelet held back (a kubelet newer than the API server
//! breaks Kubernetes' skew policy). A downgrade, a skipped minor or a wait that ran out is refused:
//! nothing changes, the failure file names the rule, and the kubelet stays held so the node can
//! boot its previous image. A control plane's kubelet starts on its old static Pods; its upgrade
//! runs in the post-kubelet stage (image_upgrade_cp.rs).

use std::time::Duration;

use log::{info, warn};
use serde::Deserialize;

use crate::clock::Clock;
use crate::config::values::Version;
use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::paths::{self, DEPLOYED_VERSION, IMAGE_INFO, KUBELET_HOLD};
use crate::status::Reporter;

/// How long a worker waits for its control plane to reach the image's minor, by default.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(20 * 60);
/// How often it asks the API server's version while it waits.
const POLL: Duration = Duration::from_secs(5);
/// Answers of the new minor in a row, `AGREE_POLL` apart, before a worker believes its control
/// plane: behind a load balancer one answer may come from the one API server already upgraded
/// while the others are not (a kubelet newer than any API server breaks the skew policy).
const AGREE: u32 = 6;
const AGREE_POLL: Duration = Duration::from_secs(2);

/// `image.json`: what the image was built for. Other fields (component versions, image tags)
/// are the image builder's and ignored here.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ImageInfo {
    kubernetes_version: String,
}

pub use crate::status::ImageUpgrade;

/// What a version change asks for.
#[derive(Debug, PartialEq)]
pub(crate) enum Change {
    None,
    Upgrade,
    Refused(String),
}

/// The rules between the version a node runs and its new image's (kubeadm's upgrade rules: no
/// downgrade, no skipped minor, no new major).
pub(crate) fn change(node: &Version, image: &Version) -> Change {
    if node == image {
        return Change::None;
    }
    let (n, i) = ((node.major, node.minor, node.patch), (image.major, image.minor, image.patch));
    if image.major != node.major {
        Change::Refused(format!("the image carries Kubernetes {image} and this node runs {node}: a new major version"))
    } else if i < n {
        Change::Refused(format!(
            "the image carries Kubernetes {image}, older than the {node} this node runs: Kubernetes nodes are not \
             downgraded (boot the image of {node})"
        ))
    } else if image.minor > node.minor + 1 {
        Change::Refused(format!(
            "the image carries Kubernetes {image} and this node runs {node}: an upgrade may not skip a minor version \
             (boot an image of v{}.{} first)",
            node.major,
            node.minor + 1
        ))
    } else {
        Change::Upgrade
    }
}

/// The image's version, if it says (a missing file: an image that does not take part).
pub(crate) fn image_version(fs: &NodeFs) -> Result<Option<Version>> {
    let Some(bytes) = fs.read(IMAGE_INFO)? else { return Ok(None) };
    let bad = |m: String| Error::bad_file(format!("{IMAGE_INFO}: {m}: the image was built wrong; rebuild it"));
    let info: ImageInfo = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
    Version::parse(&info.kubernetes_version).map(Some).map_err(|e| bad(format!("kubernetesVersion: {e}")))
}

/// At the end of a first boot: the node was set up for its image's version.
pub(crate) fn record_first_boot(fs: &NodeFs) {
    match image_version(fs) {
        Ok(Some(v)) => {
            if let Err(e) = fs.write(&DEPLOYED_VERSION, format!("{v}\n").as_bytes()) {
                warn!("[upgrade] recording the node's version in {DEPLOYED_VERSION}: {e}");
            }
        }
        Ok(None) => {}
        Err(e) => warn!("[upgrade] {e}"),
    }
}

/// An upgrade by image is due on this node (its image says a version one minor or patches newer
/// than the node's): the image's archives are imported before the check, as at a first boot, so
/// the new version's images are in the runtime without a registry. Unreadable state: not due
/// (the check itself says why).
pub(crate) fn due(fs: &NodeFs) -> bool {
    let Ok(Some(image)) = image_version(fs) else { return false };
    let node =
        if is_control_plane(fs) { control_plane_version(fs).ok().flatten() } else { worker_version(fs).ok().flatten() };
    node.is_some_and(|n| change(&n, &image) == Change::Upgrade)
}

/// A control plane has its API server's manifest; a worker has none.
pub(crate) fn is_control_plane(fs: &NodeFs) -> bool {
    fs.exists(paths::manifest("kube-apiserver"))
}

/// The node's CRI socket (instance-config.yaml), else containerd's.
pub(crate) fn cri_socket(fs: &NodeFs) -> String {
    let text = fs.read(crate::paths::KUBELET_INSTANCE_CONFIG.as_str()).ok().flatten().unwrap_or_default();
    let m: serde_yaml::Mapping = serde_yaml::from_slice(&text).unwrap_or_default();
    m.get("containerRuntimeEndpoint")
        .and_then(serde_yaml::Value::as_str)
        .filter(|s| !s.is_empty())
        .map_or_else(|| crate::constants::DEFAULT_CRI_SOCKET.to_string(), str::to_string)
}

/// What the check needs from outside.
pub(crate) struct Env<'a> {
    pub clock: &'a dyn Clock,
    pub host: &'a dyn crate::host::Host,
    /// How long a worker waits for its control plane to reach the image's minor.
    pub wait: Duration,
    /// The patches directory the node was made with (its init's or join's): the upgrade applies
    /// it again.
    pub patches: Option<String>,
}

/// The every-boot check. An error leaves the node as it was (and a worker's kubelet held).
pub(crate) fn run(fs: &NodeFs, report: &Reporter, env: &Env) -> Result<()> {
    fs.remove(&KUBELET_HOLD)?;
    let Some(image) = image_version(fs)? else { return Ok(()) };
    let start = crate::clock::boot_ms();
    let result = if is_control_plane(fs) { control_plane(fs, report, &image) } else { worker(fs, report, env, &image) };
    report.span("upgrade by image", start);
    result
}

fn set(report: &Reporter, u: &ImageUpgrade) {
    let u = u.clone();
    report.set(|s| s.upgrade = Some(u));
}

/// A refusal: in the status, and on a worker the kubelet held (its unit's condition).
fn refuse(fs: &NodeFs, report: &Reporter, mut u: ImageUpgrade, hold: bool, reason: String) -> Result<()> {
    u.state = "refused".into();
    u.reason = reason.clone();
    set(report, &u);
    if hold {
        fs.write(&KUBELET_HOLD, format!("{reason}\n").as_bytes())?;
        fs.commit()?;
    }
    Err(Error::skew(reason))
}

/// A control plane's version: the oldest of its three components' image tags (so a rollout cut
/// short still counts as the old version). None when a manifest names no versioned image.
pub(crate) fn control_plane_version(fs: &NodeFs) -> Result<Option<Version>> {
    let mut oldest: Option<Version> = None;
    for c in ["kube-apiserver", "kube-controller-manager", "kube-scheduler"] {
        let manifest = paths::manifest(c);
        let Some(bytes) = fs.read(manifest.as_str())? else { return Ok(None) };
        let pod: serde_yaml::Value =
            serde_yaml::from_slice(&bytes).map_err(|e| Error::bad_file(format!("{manifest}: {e}")))?;
        let tag = crate::images::tag_of(pod["spec"]["containers"][0]["image"].as_str().unwrap_or_default());
        let Ok(v) = Version::parse(&tag.replace('_', "+")) else { return Ok(None) };
        if oldest.as_ref().is_none_or(|o| (v.major, v.minor, v.patch) < (o.major, o.minor, o.patch)) {
            oldest = Some(v);
        }
    }
    Ok(oldest)
}

/// Before the kubelet: a control plane's rules. One minor (or patches) up is for the
/// post-kubelet stage, once the kubelet runs the static Pods (image_upgrade_cp.rs).
fn control_plane(fs: &NodeFs, report: &Reporter, image: &Version) -> Result<()> {
    let Some(node) = control_plane_version(fs)? else {
        warn!("[upgrade] the static Pod manifests name no versioned image: the image's version is not compared");
        return Ok(());
    };
    let u = ImageUpgrade { image: image.to_string(), node: node.to_string(), ..Default::default() };
    // The cluster's newer patch, rolled here by `upgrade node` while this image's kubelet ran: a
    // kubelet a patch behind its static Pods is within the skew policy, not a downgrade.
    let patch_behind = (image.major, image.minor) == (node.major, node.minor) && image.patch < node.patch;
    let verdict = if patch_behind { Change::None } else { change(&node, image) };
    match verdict {
        Change::None => {
            if patch_behind {
                info!(
                    "[upgrade] This control plane runs the cluster's {node}; its image's kubelet {image} is a patch behind, which is allowed"
                );
            }
            set(report, &ImageUpgrade { state: "current".into(), ..u });
            Ok(())
        }
        Change::Refused(r) => refuse(fs, report, u, false, r),
        Change::Upgrade => {
            let reason = format!(
                "this control plane runs {node}; it is upgraded to {image} once its kubelet runs (kubestrap-post.service)"
            );
            info!("[upgrade] {reason}");
            set(report, &ImageUpgrade { state: "pending".into(), reason, ..u });
            Ok(())
        }
    }
}

fn worker(fs: &NodeFs, report: &Reporter, env: &Env, image: &Version) -> Result<()> {
    let node = match worker_version(fs)? {
        Some(v) => v,
        // Set up before its image said its version: the kubelet that last ran, as its Node says.
        None => match crate::upgrade::reported_kubelet_version(fs) {
            Ok(v) => {
                fs.write(&DEPLOYED_VERSION, format!("{v}\n").as_bytes())?;
                fs.commit()?;
                v
            }
            Err(e) => {
                warn!("[upgrade] {DEPLOYED_VERSION} is missing and {e}: the image's version is not compared this boot");
                return Ok(());
            }
        },
    };
    let mut u = ImageUpgrade { image: image.to_string(), node: node.to_string(), ..Default::default() };
    match change(&node, image) {
        Change::None => {
            u.state = "current".into();
            set(report, &u);
            return Ok(());
        }
        Change::Refused(r) => return refuse(fs, report, u, true, r),
        Change::Upgrade => {}
    }
    info!("[upgrade] This node runs Kubernetes {node}; its image carries {image}");
    let client = crate::upgrade::kubelet_client(fs)?;
    let cp = match wait_for_control_plane(&client, report, env, image, &mut u) {
        Ok(cp) => cp,
        Err(reason) => return refuse(fs, report, u, true, reason),
    };
    u.control_plane = cp.to_string();
    info!("[upgrade] The control plane runs {cp}: upgrading this node to {image}");
    let args = crate::upgrade::NodeArgs::for_boot(fs.root(), env.patches.clone());
    crate::upgrade::run_node(&args, fs, env.host, env.clock.wall())?;
    fs.write(&DEPLOYED_VERSION, format!("{image}\n").as_bytes())?;
    fs.commit()?;
    info!("[upgrade] This node was upgraded from {node} to {image}");
    u.state = "upgraded".into();
    set(report, &u);
    Ok(())
}

/// The version a worker was set up for: recorded, or (a node set up before its image said it)
/// `None`.
fn worker_version(fs: &NodeFs) -> Result<Option<Version>> {
    let Some(bytes) = fs.read(DEPLOYED_VERSION.as_str())? else { return Ok(None) };
    let text = String::from_utf8_lossy(&bytes);
    Version::parse(text.trim()).map(Some).map_err(|e| {
        Error::bad_file(format!("{DEPLOYED_VERSION}: {e}: remove it and the next boot records the image's version"))
    })
}

/// Why the cluster is not yet ready for a worker of `image`'s minor, beyond its API server's
/// version: the first control plane's `upgrade apply` must have stored the new configuration
/// (kubeadm-config's kubernetesVersion; its kubelet-config follows in the same run).
fn cluster_behind(client: &crate::kube::Client, image: &Version) -> Option<String> {
    match crate::upgrade::stored_version(client) {
        Ok(v) if (v.major, v.minor) >= (image.major, image.minor) => None,
        Ok(v) => Some(format!(
            "kubeadm-config still says kubernetesVersion {v}: the control plane's `upgrade apply` has not stored \
             {image}'s configuration yet; waiting for it"
        )),
        Err(e) => Some(e.to_string()),
    }
}

/// Waits until the API server runs the image's minor or newer, `AGREE` answers in a row, and
/// the cluster's configuration is that minor's; the reason when it does not in time.
fn wait_for_control_plane(
    client: &crate::kube::Client,
    report: &Reporter,
    env: &Env,
    image: &Version,
    u: &mut ImageUpgrade,
) -> std::result::Result<Version, String> {
    let deadline = env.clock.now() + env.wait;
    let mut said = String::new();
    let mut agreed = 0u32;
    loop {
        let seen = match client.get("/version") {
            Ok(Some(v)) => v["gitVersion"].as_str().and_then(|s| Version::parse(s).ok()).ok_or_else(|| {
                format!(
                    "the API server's /version has no gitVersion: {}",
                    v.to_string().chars().take(200).collect::<String>()
                )
            }),
            Ok(None) => Err("the API server has no /version".to_string()),
            Err(e) => Err(format!("the API server does not answer: {e}")),
        };
        let why = match seen {
            Ok(cp) if (cp.major, cp.minor) >= (image.major, image.minor) => match cluster_behind(client, image) {
                None if agreed + 1 >= AGREE => return Ok(cp),
                None => {
                    agreed += 1;
                    env.clock.sleep(AGREE_POLL, "the control plane's version, again");
                    continue;
                }
                Some(why) => why,
            },
            Ok(cp) => {
                u.control_plane = cp.to_string();
                format!(
                    "the control plane runs {cp}: this image's kubelet {image} would be newer than its API server, \
                     which Kubernetes' version skew policy forbids; waiting for the control plane to be upgraded"
                )
            }
            Err(e) => e,
        };
        agreed = 0;
        if why != said {
            warn!("[upgrade] {why}");
            u.state = "waiting".into();
            u.reason = why.clone();
            set(report, u);
            report.waiting(&why);
            said = why;
        }
        if env.clock.now() >= deadline {
            return Err(format!(
                "{said} (waited {}s). Upgrade the control plane to {image}'s minor and reboot this node, or boot the \
                 image of {}",
                env.wait.as_secs(),
                u.node
            ));
        }
        env.clock.sleep(POLL.min(env.wait), "the control plane's version");
    }
}

#[cfg(test)]
#[path = "image_upgrade_tests.rs"]
mod tests;
