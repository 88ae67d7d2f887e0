//! A whole cluster of real components: kubestrap init's on-disk phases, then each node's host
//! supervisor runs the control plane from kubestrap's manifests and the real kubelet from its
//! files, then init's API phases; workers and control planes join with kubestrap join.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;

use super::bins;
use super::host::Host;
use super::net::{Lan, Netns};
use super::proc::wait_for;
use super::static_pods::probe;
use crate::common::*;

/// Clusters are heavy for two cores, and share the cgroup roots' names: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The first control plane's address; joining nodes take theirs from [`addr`].
pub const CP_ADDR: &str = "192.0.2.10";

/// Node addresses on the test LAN: `addr(0)` is cp-1.
pub fn addr(i: usize) -> String {
    format!("192.0.2.{}", 10 + i)
}

pub struct Cluster {
    pub scratch: Scratch,
    pub port: u16,
    pub logs: PathBuf,
    pub init: Run,
    /// cp-1 first, then every node that joined.
    pub hosts: Vec<Host>,
    /// cp-1's namespace: kubestrap, kubectl and curl run here.
    pub netns: Arc<Netns>,
    /// Every namespace above is gone before the LAN is.
    pub lan: Lan,
    /// Released last, once everything of this cluster is gone.
    _lock: MutexGuard<'static, ()>,
}

impl Cluster {
    /// A control plane from the real-component init fixture; `signing` is the
    /// controller-manager's --cluster-signing-duration (short ones make kubelets rotate).
    pub fn init(signing: &str) -> Cluster {
        Cluster::init_with(signing, "", &[])
    }

    /// [`Cluster::init`] with `cluster_extra` lines added to the ClusterConfiguration (`{port}`
    /// is filled in) and extra init flags.
    pub fn init_with(signing: &str, cluster_extra: &str, flags: &[&str]) -> Cluster {
        let lock = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let lan = Lan::new();
        let port = free_port();
        let scratch = Scratch::new("");
        let cri = cri_socket(&scratch.root(), "cp-1");
        let cluster_extra = cluster_extra.replace("{port}", &port.to_string());
        let vars: [(&str, &dyn std::fmt::Display); 5] = [
            ("cri", &cri),
            ("port", &port),
            ("signing", &signing),
            ("addr", &CP_ADDR),
            ("cluster_extra", &cluster_extra),
        ];
        std::fs::write(scratch.config(), fill(fixture!("real/init.yaml"), &vars)).expect("write config");
        // Outside the scratch dir, so they outlive a failed test.
        let logs = std::env::temp_dir().join(format!("kubestrap-real-logs-{}", std::process::id())).join("cp-1");
        std::fs::create_dir_all(&logs).expect("logs dir");
        let root = scratch.root();
        let netns = lan.host("cp-1", CP_ADDR);
        let (config, root_arg) = (scratch.config(), scratch.root_str());
        run_in(&netns, &["init", "--on-disk-only", "--config", &config, "--root", &root_arg]).ok();
        let host = Host::start("cp-1", netns, &root, &logs, None);
        let netns = host.netns.clone();
        let mut args = vec!["init", "--config", config.as_str(), "--root", root_arg.as_str()];
        args.extend_from_slice(flags);
        let init = run_watched(&netns, &args, &logs, &|| host.health());
        let c = Cluster { _lock: lock, scratch, port, logs, init, hosts: vec![host], netns, lan };
        assert_eq!(c.init.code(), 0, "init failed:\n{}\n{}\n{}", c.init.stdout(), c.init.stderr(), c.status());
        c.wait_ready("cp-1");
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

    /// Every host's state, for failure messages.
    pub fn status(&self) -> String {
        self.hosts.iter().map(|h| format!("=== {}\n{}", h.name, h.status())).collect()
    }

    pub fn health(&self) -> Result<(), String> {
        self.hosts.iter().try_for_each(Host::health)
    }

    /// Polls `check` for up to three minutes while every node stays healthy.
    pub fn wait<T>(&self, what: &str, check: impl FnMut() -> Option<T>) -> T {
        wait_for(what, Duration::from_secs(180), &|| self.health(), check)
    }

    /// Waits for the controller-manager's bootstrap signer to sign cluster-info for the test
    /// token (join's discovery needs the signature).
    pub fn wait_cluster_info_signed(&self) {
        self.wait("cluster-info signed", || {
            let info = self.get(&["-n", "kube-public", "configmap", "cluster-info"]);
            info["data"].as_object()?.keys().any(|k| k == "jws-kubeconfig-abcdef").then_some(())
        });
    }

    /// Waits for the Node's Ready condition to be True.
    pub fn wait_ready(&self, node: &str) {
        self.wait(&format!("Node {node} Ready"), || {
            let (code, out, _) = self.kubectl(&[
                "get",
                "node",
                node,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
            ]);
            (code == 0 && out == "True").then_some(())
        });
    }

    /// Every probe of every static Pod on `host` answers.
    pub fn wait_probes(&self, host: usize) {
        let h = &self.hosts[host];
        for name in ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"] {
            let pod = h.pod(name);
            self.wait(&format!("{name} probes on {}", h.name), || probe(&h.netns, &pod).ok());
        }
    }

    /// The CA pin for join commands.
    pub fn ca_hash(&self) -> String {
        ca_hash(&self.scratch.pki("ca.crt"))
    }

    /// kubestrap join of a new node `name` at `addr(i)` with `config` (a JoinConfiguration
    /// template: {name} {cri} {ip} {addr} {port} {hash} and `vars`), its host started first so
    /// the kubelet and static Pods come up as join writes them. Returns the join run; the host
    /// is added to the cluster.
    pub fn join(&mut self, name: &str, i: usize, template: &str, flags: &[&str]) -> Run {
        let w = Scratch::new("");
        let ip = addr(i);
        let cri = cri_socket(&w.root(), name);
        let vars: [(&str, &dyn std::fmt::Display); 6] = [
            ("name", &name),
            ("cri", &cri),
            ("ip", &ip),
            ("addr", &CP_ADDR),
            ("port", &self.port),
            ("hash", &self.ca_hash()),
        ];
        std::fs::write(w.config(), fill(template, &vars)).expect("write join config");
        let logs = self.logs.with_file_name(name);
        std::fs::create_dir_all(&logs).expect("logs dir");
        let (c, r) = (w.config(), w.root_str());
        let root = w.root();
        let netns = self.lan.host(name, &ip);
        let host = Host::start(name, netns, &root, &logs, Some(w));
        let mut args = vec!["join", "--config", c.as_str(), "--root", r.as_str()];
        args.extend_from_slice(flags);
        let run = run_watched(&host.netns, &args, &logs, &|| self.health().and_then(|_| host.health()));
        self.hosts.push(host);
        run
    }
}

/// The CRI socket of a node's containerd (beside its root).
pub fn cri_socket(root: &Path, name: &str) -> String {
    format!("unix://{}", root.with_file_name(format!("{name}-containerd")).join("containerd.sock").display())
}

/// kubestrap in a node's network namespace; its logs must hold no secret.
pub fn run_in(netns: &Netns, args: &[&str]) -> Run {
    let run = Run { out: netns.command(BIN).args(args).env_remove("JOURNAL_STREAM").output().expect("run kubestrap") };
    check_secrets(args, &run);
    run
}

fn check_secrets(args: &[&str], run: &Run) {
    for out in [run.stderr(), run.stdout()] {
        assert!(!out.contains("PRIVATE KEY-----"), "kubestrap {args:?} printed a private key");
    }
    assert!(!run.stderr().contains(SECRET), "kubestrap {args:?} logged the token secret:\n{}", run.stderr());
}

/// [`run_in`], failing at once with the logs when `health` fails meanwhile (a kubelet that
/// refuses its flags would otherwise show only as init's timeout).
pub fn run_watched(netns: &Netns, args: &[&str], logs: &Path, health: &dyn Fn() -> Result<(), String>) -> Run {
    let (out_path, err_path) = (logs.join("kubestrap.out"), logs.join("kubestrap.err"));
    let mut child = netns
        .command(BIN)
        .args(args)
        .env_remove("JOURNAL_STREAM")
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("spawn kubestrap");
    let status = wait_for(&format!("kubestrap {args:?}"), Duration::from_secs(600), health, || {
        child.try_wait().expect("wait kubestrap")
    });
    let out = std::process::Output {
        status,
        stdout: std::fs::read(&out_path).expect("stdout"),
        stderr: std::fs::read(&err_path).expect("stderr"),
    };
    let run = Run { out };
    check_secrets(args, &run);
    run
}

/// The node root's path of a node file.
pub fn at(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}
