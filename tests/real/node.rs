//! A real node: containerd v2 and the kubelet (v1.37.2 unless the node's version says) in one private mount namespace, started
//! from exactly what kubestrap wrote, through the kubeadm drop-in's command line
//! (units/kubelet-dropin/10-kubeadm.conf) with its environment files read from the node root.

use std::path::{Path, PathBuf};

use super::bins;
use super::cluster::at;
use super::net::Netns;
use super::proc::Proc;
use crate::common::{fill, fixture_path};

/// systemd's expansion of the drop-in's ExecStart: `Environment=` and `EnvironmentFile=`
/// (`-` = optional) are read in order, the last non-empty `ExecStart=` wins, `$VAR` splits
/// on whitespace.
pub fn kubelet_argv(root: &Path, dropin: &str) -> Vec<String> {
    let mut env: Vec<(String, String)> = Vec::new();
    let mut exec = String::new();
    for line in dropin.lines() {
        if let Some(v) = line.strip_prefix("Environment=") {
            let v = v.trim_matches('"');
            let (k, val) = v.split_once('=').expect("Environment=K=V");
            env.push((k.to_string(), val.to_string()));
        } else if let Some(f) = line.strip_prefix("EnvironmentFile=") {
            let (optional, f) = match f.strip_prefix('-') {
                Some(f) => (true, f),
                None => (false, f),
            };
            match std::fs::read_to_string(root.join(&f[1..])) {
                Ok(text) => env.extend(read_env_file(&text)),
                Err(_) if optional => {}
                Err(e) => panic!("EnvironmentFile {f}: {e}"),
            }
        } else if let Some(cmd) = line.strip_prefix("ExecStart=") {
            exec = cmd.to_string();
        }
    }
    let mut argv = Vec::new();
    for word in exec.split_whitespace() {
        match word.strip_prefix('$') {
            Some(var) => {
                let value = env.iter().rev().find(|(k, _)| k == var).map(|(_, v)| v.as_str()).unwrap_or("");
                argv.extend(value.split_whitespace().map(str::to_string));
            }
            None => argv.push(word.to_string()),
        }
    }
    assert_eq!(argv.first().map(String::as_str), Some("/usr/bin/kubelet"), "drop-in ExecStart: {exec}");
    argv
}

/// An environment file's `KEY="value"` lines, as systemd reads them.
fn read_env_file(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (k, v) = line.split_once('=').unwrap_or_else(|| panic!("env file line {line:?}"));
        let words = shlex::split(v).unwrap_or_else(|| panic!("env file value {v:?}"));
        out.push((k.to_string(), words.join(" ")));
    }
    out
}

/// Creates the kubelet's `--cgroup-root` (`/kubestrap-<name>`) in every cgroup hierarchy: the
/// kubelet refuses a root that is missing. cpuset's needs its parent's CPUs and memory nodes.
fn make_cgroup_root(name: &str) {
    let base = Path::new("/sys/fs/cgroup");
    let dirs: Vec<PathBuf> = if base.join("cgroup.controllers").exists() {
        vec![base.to_path_buf()]
    } else {
        std::fs::read_dir(base)
            .expect("/sys/fs/cgroup")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("cgroup.procs").exists())
            .collect()
    };
    for h in dirs {
        let dir = h.join(format!("kubestrap-{name}"));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for f in ["cpuset.cpus", "cpuset.mems"] {
            let empty = std::fs::read_to_string(dir.join(f)).is_ok_and(|cur| cur.trim().is_empty());
            if let (true, Ok(v)) = (empty, std::fs::read_to_string(h.join(f))) {
                std::fs::write(dir.join(f), v.trim()).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            }
        }
    }
}

pub struct Node {
    pub proc: Proc,
    name: String,
    state: PathBuf,
}

impl Drop for Node {
    /// Powered off: the kubelet and containerd (their process group), then what leaves that
    /// group: containerd's shims (each its own session) and the containers they started (in
    /// the kubelet's cgroup root), so that nothing a test started outlives it.
    fn drop(&mut self) {
        self.proc.kill();
        let state = self.state.display().to_string();
        for pid in pids() {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            let ours = args.windows(2).any(|w| w[0] == b"-address" && w[1].starts_with(state.as_bytes()));
            if ours {
                kill(pid);
            }
        }
        for procs in cgroup_procs(&format!("kubestrap-{}", self.name)) {
            for pid in std::fs::read_to_string(procs).unwrap_or_default().lines().filter_map(|l| l.parse().ok()) {
                kill(pid);
            }
        }
    }
}

fn pids() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten().filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok())).collect()
}

fn kill(pid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

/// Every cgroup.procs under the cgroup `name` in each hierarchy (v1) or the unified one (v2).
fn cgroup_procs(name: &str) -> Vec<PathBuf> {
    let base = Path::new("/sys/fs/cgroup");
    let roots: Vec<PathBuf> = if base.join("cgroup.controllers").exists() {
        vec![base.join(name)]
    } else {
        std::fs::read_dir(base).map(|d| d.flatten().map(|e| e.path().join(name)).collect()).unwrap_or_default()
    };
    let mut out = Vec::new();
    let mut todo: Vec<PathBuf> = roots.into_iter().filter(|r| r.is_dir()).collect();
    while let Some(d) = todo.pop() {
        out.push(d.join("cgroup.procs"));
        if let Ok(entries) = std::fs::read_dir(&d) {
            todo.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
    }
    out
}

impl Node {
    /// Starts containerd and the kubelet (of Kubernetes `version`, the node image's) of the node
    /// rooted at `root`; the CRI socket is `<state>/containerd.sock` (give it to kubestrap as the
    /// node's criSocket).
    pub fn start(netns: &Netns, name: &str, version: &str, root: &Path, state: &Path, logs: &Path) -> Node {
        let bin = bins::dir();
        let kubelet = bins::bin_of(version, "kubelet");
        make_cgroup_root(name);
        for dir in ["certs.d/_default", "net.d"] {
            std::fs::create_dir_all(state.join(dir)).expect("mkdir state");
        }
        let vars: [(&str, &dyn std::fmt::Display); 2] = [("state", &state.display()), ("bin", &bin.display())];
        let mut toml = fill(&std::fs::read_to_string(fixture_path("real/containerd.toml")).expect("toml"), &vars);
        let standins = std::fs::read_to_string(at(root, super::standins::MARK)).unwrap_or_default();
        if !standins.is_empty() {
            // Pods run here: their OOM scores no lower than ours (the test host lacks CAP_SYS_RESOURCE).
            toml.push_str("[plugins.'io.containerd.cri.v1.runtime']\n  restrict_oom_score_adj = true\n");
        }
        std::fs::write(state.join("containerd.toml"), toml).expect("write containerd.toml");
        std::fs::copy(fixture_path("real/hosts.toml"), state.join("certs.d/_default/hosts.toml")).expect("hosts.toml");
        std::fs::copy(fixture_path("real/net.conflist"), state.join("net.d/10-test.conflist")).expect("conflist");

        let dropin =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("units/kubelet-dropin/10-kubeadm.conf"))
                .expect("drop-in");
        let mut argv = kubelet_argv(root, &dropin);
        argv[0] = kubelet.display().to_string();
        let mut full =
            vec!["sh".to_string(), fixture_path("real/node.sh").display().to_string(), state.display().to_string()];
        full.extend(argv);
        let binds: Vec<(PathBuf, PathBuf)> =
            ["etc/kubernetes", "var/lib/kubelet", "var/log/pods", "var/log/containers"]
                .iter()
                .map(|p| (root.join(p), PathBuf::from("/").join(p)))
                .collect();
        let proc = Proc::start(
            netns,
            &format!("kubelet {name}"),
            &binds,
            &full,
            &[
                ("REAL_BIN", bin.display().to_string()),
                ("CONTAINERD_LOG", logs.join(format!("containerd-{name}.log")).display().to_string()),
                // A node that opted in imports the static Pods' stand-in images too.
                ("STANDIN_IMAGES", standins),
            ],
            &logs.join(format!("kubelet-{name}.log")),
        );
        Node { proc, name: name.to_string(), state: state.to_path_buf() }
    }
}
