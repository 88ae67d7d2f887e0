//! A worker's post-kubelet stage: its Node seen registered, and the kubelet's CSINode race made up
//! for.
//!
//! Once it reaches the API server, the kubelet (v1.37, pkg/volume/csi/csi_plugin.go) annotates its
//! Node for CSI at about 0, 0.03, 0.27, 2.2 and 17.6 s (±10 %), then not again before about 140 s,
//! and posts NotReady ("failed to initialize CSINode") until a try succeeds. A try fails while the
//! Node is not registered, and a kubelet that registers later than 17.6 s after its start (about
//! 20 s under emulation, for kubeadm's workers as for ours) stays NotReady two more minutes.
//! Restarted once its Node exists, its first try succeeds.

use std::time::Duration;

use log::info;
use serde_json::Value;

use crate::clock::{Clock, boot_ms};
use crate::fsutil::NodeFs;
use crate::kube::Client;
use crate::kubeconfig::Kubeconfig;
use crate::paths::KUBELET_CONF;
use crate::status::Reporter;

/// How long the stage waits for the Node to register before leaving it to the kubelet.
pub(crate) const WATCH: Duration = Duration::from_secs(60);
/// Past the kubelet's last quick try (17.6 s + 10 % after it reaches the API server, which is
/// after its start, which is before this stage's): a CSINode error now lasts until about 140 s.
pub(crate) const LAST_QUICK_TRY: Duration = Duration::from_secs(25);
const POLL: Duration = Duration::from_secs(1);

/// What the API server says of this node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Seen {
    /// No answer.
    Unreachable,
    /// 404: not registered yet.
    Absent,
    Ready,
    /// Registered, not Ready: the Ready condition's message.
    NotReady(String),
}

/// How the watch ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    Ready,
    /// Registered and NotReady for a reason other than CSINode (a CNI not installed yet): the
    /// kubelet's business from here.
    NotReady(String),
    /// The kubelet was restarted for its CSINode.
    Restarted,
    /// Not registered within [`WATCH`].
    NotRegistered,
}

pub(crate) trait Kubelet {
    fn look(&self) -> Seen;
    fn restart(&self);
}

/// Polls the Node every second until it can tell; restarts the kubelet at most once.
pub(crate) fn watch(k: &dyn Kubelet, clock: &dyn Clock, report: Option<&Reporter>) -> Outcome {
    let (start, start_ms) = (clock.now(), boot_ms());
    let mut registered = false;
    loop {
        let age = clock.now().saturating_duration_since(start);
        let seen = k.look();
        if matches!(seen, Seen::Ready | Seen::NotReady(_)) && !registered {
            registered = true;
            if let Some(r) = report {
                r.span("node registered", start_ms);
            }
        }
        match seen {
            Seen::Ready => {
                if let Some(r) = report {
                    r.span("node Ready", start_ms);
                }
                return Outcome::Ready;
            }
            Seen::NotReady(m) if m.contains("CSINode") => {
                if age >= LAST_QUICK_TRY {
                    info!(
                        "[boot] The kubelet registered its Node after its last quick CSINode try (\"{}\"): restarting it, or it stays NotReady until about 140 s",
                        m.chars().take(160).collect::<String>()
                    );
                    k.restart();
                    if let Some(r) = report {
                        r.span("kubelet restarted (CSINode)", start_ms);
                    }
                    return Outcome::Restarted;
                }
            }
            Seen::NotReady(m) => return Outcome::NotReady(m),
            Seen::Absent | Seen::Unreachable => {}
        }
        if age >= WATCH {
            return Outcome::NotRegistered;
        }
        clock.sleep(POLL, "waiting for the kubelet to register its Node");
    }
}

/// The running kubelet of this machine, seen with its own credentials.
pub(crate) struct Live {
    client: Client,
    path: String,
}

impl Live {
    /// `None` (said why) when the kubelet has no identity to ask with.
    pub(crate) fn new(fs: &NodeFs, node_name: &str) -> Option<Live> {
        let kc = fs.read(&KUBELET_CONF).ok().flatten().and_then(|b| Kubeconfig::parse(&b).ok());
        let client = kc.and_then(|kc| {
            Client::from_kubeconfig(&kc, &|p| fs.read_following_link(p).ok().flatten(), Duration::from_secs(5)).ok()
        });
        match client {
            Some(client) => Some(Live { client, path: format!("/api/v1/nodes/{node_name}") }),
            None => {
                info!("[boot] {} is not usable: not watching the kubelet register its Node", KUBELET_CONF.as_str());
                None
            }
        }
    }
}

impl Kubelet for Live {
    fn look(&self) -> Seen {
        match self.client.get(&self.path) {
            Ok(None) => Seen::Absent,
            Ok(Some(node)) => ready(&node),
            Err(_) => Seen::Unreachable,
        }
    }

    fn restart(&self) {
        crate::systemd::queue_kubelet_restart("[boot]");
    }
}

/// A Node's Ready condition.
fn ready(node: &Value) -> Seen {
    let conditions = node["status"]["conditions"].as_array().map(Vec::as_slice).unwrap_or_default();
    match conditions.iter().find(|c| c["type"] == "Ready") {
        Some(c) if c["status"] == "True" => Seen::Ready,
        Some(c) => Seen::NotReady(c["message"].as_str().unwrap_or_default().to_string()),
        None => Seen::NotReady(String::new()),
    }
}

#[cfg(test)]
#[path = "kubelet_watch_tests.rs"]
mod tests;
