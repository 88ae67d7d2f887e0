//! One test node: its network namespace, and a thread that plays systemd and the kubelet's
//! static-Pod runner. It starts the real node (containerd + kubelet) once kubestrap has written
//! the kubelet's files, and runs each manifest in /etc/kubernetes/manifests as a process,
//! restarting it when it exits or its manifest changes, as the kubelet restarts a static Pod.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use super::bins;
use super::net::Netns;
use super::node::Node;
use super::proc::{Proc, tail};
use super::static_pods::StaticPod;
use crate::common::Scratch;

pub struct Host {
    pub name: String,
    pub root: PathBuf,
    failure: Arc<Mutex<Option<String>>>,
    /// What runs, in a line each (name, state, restarts) with its log; logs are read only
    /// when a status is asked for, never on the supervisor's 200 ms round.
    status: Arc<Mutex<Vec<(String, PathBuf)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Kept until the processes are gone.
    _scratch: Option<Scratch>,
    pub netns: Arc<Netns>,
}

/// How often the kubelet is started again before its node fails.
const KUBELET_RESTARTS: u32 = 2;

struct Running {
    proc: Proc,
    mtime: SystemTime,
    started: Instant,
    restarts: u32,
}

impl Host {
    /// Starts supervising the node rooted at `root`; `state` holds its containerd. The kubelet
    /// starts once kubelet.conf is written, or with `bootstraps` once bootstrap-kubelet.conf is
    /// (kubeadm's join leaves the TLS bootstrap to the kubelet; kubestrap's does it itself).
    pub fn start(
        name: &str,
        netns: impl Into<Arc<Netns>>,
        root: &Path,
        logs: &Path,
        scratch: Option<Scratch>,
        bootstraps: bool,
    ) -> Host {
        Host::start_at(bins::K8S_VERSION, name, netns, root, logs, scratch, bootstraps)
    }

    /// [`Host::start`] of a node whose kubelet is Kubernetes `version`'s (its static Pods run
    /// their images' versions).
    pub fn start_at(
        version: &'static str,
        name: &str,
        netns: impl Into<Arc<Netns>>,
        root: &Path,
        logs: &Path,
        scratch: Option<Scratch>,
        bootstraps: bool,
    ) -> Host {
        let netns = netns.into();
        let (failure, status, stop) = Default::default();
        let mut host = Host {
            name: name.to_string(),
            root: root.to_path_buf(),
            failure,
            status,
            stop,
            thread: None,
            _scratch: scratch,
            netns,
        };
        let (n, ns, r, l) = (name.to_string(), host.netns.clone(), root.to_path_buf(), logs.to_path_buf());
        let (failure, status, stop) = (host.failure.clone(), host.status.clone(), host.stop.clone());
        host.thread = Some(std::thread::spawn(move || {
            supervise((&n, version), &ns, (&r, bootstraps), &l, &failure, &status, &stop)
        }));
        host
    }

    /// Err when something on the node failed for good (the kubelet exited, a manifest the
    /// runner refuses), with the logs.
    pub fn health(&self) -> Result<(), String> {
        if let Some(f) = self.failure.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            return Err(format!("node {}: {f}\n{}", self.name, self.status()));
        }
        // The supervisor ends only when told to; ended early, it panicked (printed above).
        if self.thread.as_ref().is_some_and(|t| t.is_finished()) && !self.stop.load(Ordering::SeqCst) {
            return Err(format!("node {}: its supervisor thread panicked (see above)", self.name));
        }
        Ok(())
    }

    /// What runs on the node, with restarts, and the last log lines of each.
    pub fn status(&self) -> String {
        let lines = self.status.lock().unwrap_or_else(|e| e.into_inner()).clone();
        lines.iter().map(|(what, log)| format!("--- {what}\n{}\n", tail(log, 40))).collect()
    }

    /// Powers the node off (its kubelet, runtime and static Pods stop) and hands back what it
    /// ran in, so it can be started again on the same root.
    pub fn power_off(mut self) -> (Arc<Netns>, Option<Scratch>) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        (self.netns.clone(), self._scratch.take())
    }

    pub fn pod(&self, name: &str) -> StaticPod {
        StaticPod::read(&self.root, name)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn kubelet_files_ready(root: &Path, bootstraps: bool) -> bool {
    let files =
        ["var/lib/kubelet/config.yaml", "var/lib/kubelet/kubeadm-flags.env"].iter().all(|p| root.join(p).exists());
    let identity = root.join("etc/kubernetes/kubelet.conf").exists()
        || (bootstraps && root.join("etc/kubernetes/bootstrap-kubelet.conf").exists());
    files && identity
}

/// Runs the node rooted at `root` (`bootstraps`: see [`Host::start`]) until `stop`.
fn supervise(
    (name, version): (&str, &str),
    netns: &Netns,
    (root, bootstraps): (&Path, bool),
    logs: &Path,
    failure: &Mutex<Option<String>>,
    status: &Mutex<Vec<(String, PathBuf)>>,
    stop: &AtomicBool,
) {
    let fail = |msg: String| {
        let mut f = failure.lock().expect("failure");
        if f.is_none() {
            *f = Some(msg);
        }
    };
    let mut node: Option<Node> = None;
    // systemd's Restart=always for kubelet.service, its 10 s shortened to 1 s: a kubelet that
    // exits is started again (with its containerd), and a node whose kubelet keeps exiting fails.
    let (mut kubelet_restarts, mut kubelet_exited): (u32, Option<Instant>) = (0, None);
    let mut pods: HashMap<String, Running> = HashMap::new();
    let manifests = root.join("etc/kubernetes/manifests");
    while !stop.load(Ordering::SeqCst) {
        let restart_due = kubelet_exited.is_none_or(|t| t.elapsed() > Duration::from_secs(1));
        if node.is_none() && restart_due && kubelet_files_ready(root, bootstraps) {
            node =
                Some(Node::start(netns, name, version, root, &root.with_file_name(format!("{name}-containerd")), logs));
        }
        if let Some(s) = node.as_mut().and_then(|n| n.proc.exited()) {
            if kubelet_restarts >= KUBELET_RESTARTS {
                fail(format!("the kubelet exited ({s}), after {kubelet_restarts} restarts"));
            } else if let Some(mut n) = node.take() {
                n.proc.kill();
                // The exited kubelet's log is kept beside the next one's.
                let log = &n.proc.log;
                let _ = std::fs::rename(log, log.with_extension(format!("log.{kubelet_restarts}")));
                kubelet_restarts += 1;
                kubelet_exited = Some(Instant::now());
            }
        }
        let mut seen = Vec::new();
        for entry in std::fs::read_dir(&manifests).into_iter().flatten().flatten() {
            let path = entry.path();
            let Some(pod_name) = path.file_stem().and_then(|s| s.to_str()).map(str::to_string) else { continue };
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            seen.push(pod_name.clone());
            let mtime = entry.metadata().and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
            let restart = match pods.get_mut(&pod_name) {
                None => true,
                Some(r) if r.mtime != mtime => true,
                // CrashLoopBackOff, shortened: one second between starts.
                Some(r) => r.proc.exited().is_some() && r.started.elapsed() > Duration::from_secs(1),
            };
            if !restart {
                continue;
            }
            let restarts = pods.remove(&pod_name).map_or(0, |r| r.restarts + 1);
            match StaticPod::read(root, &pod_name).start(netns, root, logs) {
                Ok(proc) => {
                    pods.insert(pod_name, Running { proc, mtime, started: Instant::now(), restarts });
                }
                Err(e) => fail(e),
            }
        }
        pods.retain(|k, _| seen.contains(k));
        let mut s = Vec::new();
        for (k, r) in pods.iter_mut() {
            let state = if r.proc.exited().is_some() { "exited" } else { "running" };
            s.push((format!("{k}: {state}, {} restarts", r.restarts), r.proc.log.clone()));
        }
        if let Some(n) = node.as_ref() {
            s.push((format!("kubelet: {kubelet_restarts} restarts"), n.proc.log.clone()));
        }
        *status.lock().expect("status") = s;
        std::thread::sleep(Duration::from_millis(200));
    }
}
