//! A whole cluster of real components on loopback: kubestrap init's on-disk phases, the four
//! control-plane processes started from its manifests, a real node (containerd + kubelet), then
//! init's API phases; workers join with kubestrap join and run their own real kubelet.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;

use super::bins;
use super::node::Node;
use super::proc::{Netns, Proc, wait_for};
use super::static_pods::{StaticPod, wait_probes};
use crate::common::*;

/// etcd, the controller-manager and the scheduler keep kubeadm's fixed ports on 127.0.0.1, so
/// one cluster runs at a time in this binary.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The control plane's address and the workers' node IPs, on the test's own network namespace.
pub const CP_ADDR: &str = "192.0.2.10";
pub const WORKER_ADDRS: &[&str] = &["192.0.2.21", "192.0.2.22"];
const STARTUP: Duration = Duration::from_secs(120);

pub struct Cluster {
    _lock: MutexGuard<'static, ()>,
    pub scratch: Scratch,
    pub port: u16,
    pub logs: PathBuf,
    pub init: Run,
    pub node: Node,
    pub procs: Vec<Proc>,
    /// Last: every process above is gone before the namespace is deleted.
    pub netns: Netns,
}

impl Cluster {
    /// Brings up a control plane; `signing` is the controller-manager's
    /// --cluster-signing-duration (short ones make kubelets rotate their certificates).
    pub fn init(signing: &str) -> Cluster {
        let lock = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let mut addrs = vec![CP_ADDR];
        addrs.extend_from_slice(WORKER_ADDRS);
        let netns = Netns::new(&addrs);
        let port = free_port();
        let scratch = Scratch::new("");
        let state = scratch.dir.path().join("cp-1-node");
        let cri = Node::cri_socket(&state);
        let config = fill(
            fixture!("real/init.yaml"),
            &[("cri", &cri), ("port", &port), ("signing", &signing), ("addr", &CP_ADDR)],
        );
        std::fs::write(scratch.config(), config).expect("write config");
        // Outside the scratch dir, so they outlive a failed test.
        let logs = std::env::temp_dir().join(format!("kubestrap-real-logs-{}", std::process::id()));
        std::fs::create_dir_all(&logs).expect("logs dir");
        let root = scratch.root();
        let (config, root_arg) = (scratch.config(), scratch.root_str());
        run_in(&netns, &["init", "--on-disk-only", "--config", &config, "--root", &root_arg]).ok();

        let mut procs = Vec::new();
        for name in ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"] {
            let pod = StaticPod::read(&root, name);
            let mut p = pod.start(&netns, &root, &logs);
            wait_probes(&netns, &pod, &mut p, STARTUP);
            procs.push(p);
        }
        let mut node = Node::start(&netns, "cp-1", &root, &state, &logs);
        let args = ["init", "--config", config.as_str(), "--root", root_arg.as_str()];
        let mut watched: Vec<&mut Proc> = procs.iter_mut().collect();
        watched.push(&mut node.proc);
        let init = run_watched(&netns, &args, &logs, &mut watched);
        let mut c = Cluster { _lock: lock, scratch, port, logs, init, node, procs, netns };
        assert_eq!(c.init.code(), 0, "init failed:\n{}\n{}\n{}", c.init.stdout(), c.init.stderr(), c.tails());
        c.wait_ready("cp-1", None);
        c
    }

    pub fn root(&self) -> PathBuf {
        self.scratch.root()
    }

    pub fn admin_conf(&self) -> PathBuf {
        self.scratch.path("/etc/kubernetes/admin.conf")
    }

    /// The real kubectl v1.37.2 as admin: (code, stdout, stderr).
    pub fn kubectl(&self, args: &[&str]) -> (i32, String, String) {
        capture(
            self.netns
                .command(bins::bin("kubectl"))
                .arg("--kubeconfig")
                .arg(self.admin_conf())
                .args(args)
                .env_remove("KUBECONFIG"),
        )
    }

    /// `kubectl get -o json`, which must succeed.
    pub fn get(&self, args: &[&str]) -> Value {
        let mut all = vec!["get", "-o", "json"];
        all.extend_from_slice(args);
        let (code, out, err) = self.kubectl(&all);
        assert_eq!(code, 0, "kubectl {all:?}: {err}");
        serde_json::from_str(&out).expect("kubectl json")
    }

    pub fn tails(&self) -> String {
        let mut all: Vec<&Proc> = self.procs.iter().collect();
        all.push(&self.node.proc);
        all.iter().map(|p| format!("--- {}:\n{}", p.name, p.tail())).collect::<Vec<_>>().join("\n")
    }

    /// Polls `check` for up to two minutes.
    pub fn wait<T>(&self, what: &str, check: impl FnMut() -> Option<T>) -> T {
        wait_for(what, Duration::from_secs(120), &mut [], check)
    }

    /// Waits for the Node's Ready condition to be True.
    pub fn wait_ready(&mut self, node: &str, worker: Option<&mut Proc>) {
        let admin = self.admin_conf();
        let kubectl = bins::bin("kubectl");
        let netns = &self.netns;
        let mut procs: Vec<&mut Proc> = self.procs.iter_mut().collect();
        procs.push(&mut self.node.proc);
        procs.extend(worker);
        wait_for(&format!("Node {node} Ready"), Duration::from_secs(180), &mut procs, || {
            let (code, out, _) = capture(netns.command(&kubectl).arg("--kubeconfig").arg(&admin).args([
                "get",
                "node",
                node,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
            ]));
            (code == 0 && out == "True").then_some(())
        });
    }

    /// The CA pin for join commands.
    pub fn ca_hash(&self) -> String {
        ca_hash(&self.scratch.pki("ca.crt"))
    }

    /// Joins a worker named `name` with kubestrap join and starts its real kubelet; returns
    /// its root dir, the join run and the node.
    pub fn join_worker(&mut self, name: &str, ip: &str, kport: u16, hport: u16) -> (Scratch, Run, Node) {
        let dir = self.scratch.dir.path().join(format!("{name}-node"));
        let cri = Node::cri_socket(&dir);
        let config = fill(
            fixture!("real/join.yaml"),
            &[
                ("name", &name),
                ("cri", &cri),
                ("kport", &kport),
                ("hport", &hport),
                ("port", &self.port),
                ("hash", &self.ca_hash()),
                ("addr", &CP_ADDR),
                ("ip", &ip),
            ],
        );
        let w = Scratch::new(&config);
        let (c, r) = (w.config(), w.root_str());
        let run = run_in(&self.netns, &["join", "--config", &c, "--root", &r]);
        assert_eq!(run.code(), 0, "join failed:\n{}\n{}", run.stdout(), run.stderr());
        let node = Node::start(&self.netns, name, &w.root(), &dir, &self.logs);
        (w, run, node)
    }
}

/// kubestrap in the test's network namespace; its logs must hold no secret.
pub fn run_in(netns: &Netns, args: &[&str]) -> Run {
    let run = Run { out: netns.command(BIN).args(args).env_remove("JOURNAL_STREAM").output().expect("run kubestrap") };
    for out in [run.stderr(), run.stdout()] {
        assert!(!out.contains("PRIVATE KEY-----"), "kubestrap {args:?} printed a private key");
    }
    assert!(!run.stderr().contains(SECRET), "kubestrap {args:?} logged the token secret:\n{}", run.stderr());
    run
}

/// [`run_in`], failing at once with the logs when one of `procs` dies meanwhile (a kubelet
/// that refuses its flags would otherwise show only as init's timeout).
pub fn run_watched(netns: &Netns, args: &[&str], logs: &Path, procs: &mut [&mut Proc]) -> Run {
    let (out_path, err_path) = (logs.join("kubestrap.out"), logs.join("kubestrap.err"));
    let mut child = netns
        .command(BIN)
        .args(args)
        .env_remove("JOURNAL_STREAM")
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("spawn kubestrap");
    let status = wait_for(&format!("kubestrap {args:?}"), Duration::from_secs(600), procs, || {
        child.try_wait().expect("wait kubestrap")
    });
    let out = std::process::Output {
        status,
        stdout: std::fs::read(&out_path).expect("stdout"),
        stderr: std::fs::read(&err_path).expect("stderr"),
    };
    let run = Run { out };
    assert!(!run.stderr().contains(SECRET), "kubestrap {args:?} logged the token secret:\n{}", run.stderr());
    run
}

/// The node root's path of a node file.
pub fn at(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}
