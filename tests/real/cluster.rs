//! A whole cluster of real components: kubestrap init's on-disk phases, then each node's host
//! supervisor runs the control plane from kubestrap's manifests and the real kubelet from its
//! files, then init's API phases; workers and control planes join with kubestrap join.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::bins;
use super::host::Host;
use super::net::{Lan, Netns};
use super::proc::{BIND_THEN_EXEC, wait_for};
use super::static_pods::probe;
use crate::common::*;

/// Clusters are heavy for two cores, and share the cgroup roots' names: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Who makes a node: kubestrap, or the real kubeadm v1.37.2.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Tool {
    Kubestrap,
    Kubeadm,
}

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
    /// The on-disk (or pre-kubelet) run, then the API (post-kubelet) one.
    pub first: Run,
    pub init: Run,
    /// From the first run's start to the init's end.
    pub wall: Duration,
    /// cp-1 first, then every node that joined.
    pub hosts: Vec<Host>,
    /// cp-1's namespace: kubestrap, kubectl and curl run here.
    pub netns: Arc<Netns>,
    /// Every namespace above is gone before the LAN is.
    pub lan: Lan,
    /// The Kubernetes version of each node's kubelet set by [`Cluster::set_version`] (others
    /// run v1.37.2's; cp-1's is its init config's `kubernetesVersion`).
    versions: Vec<(String, &'static str)>,
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
        Cluster::init_by(Tool::Kubestrap, signing, cluster_extra, flags, &[])
    }

    /// A control plane from the init fixture made by `tool`: kubestrap's on-disk then API runs,
    /// or one `kubeadm init` (the real v1.37.2, its paths bound over cp-1's root); `files`
    /// (node path, content) are written first.
    pub fn init_by(tool: Tool, signing: &str, cluster_extra: &str, flags: &[&str], files: &[(&str, &str)]) -> Cluster {
        Cluster::init_from(tool, fixture!("real/init.yaml"), signing, cluster_extra, flags, files)
    }

    /// [`Cluster::init_by`] from `template`, a variant of the init fixture (its placeholders).
    pub fn init_from(
        tool: Tool,
        template: &str,
        signing: &str,
        cluster_extra: &str,
        flags: &[&str],
        files: &[(&str, &str)],
    ) -> Cluster {
        let api = |host: &Host, logs: &Path, init: &[&str]| run_watched(&host.netns, init, logs, &|| host.health());
        Cluster::init_api(tool, template, signing, cluster_extra, flags, files, &api)
    }

    /// A control plane from `template` (see [`Cluster::init_from`]) whose API run is `api`'s:
    /// given cp-1's host, its log directory and init's arguments, it returns the run that
    /// finished init (a test that kills the first run returns the rerun).
    pub fn init_killed(template: &str, api: &dyn Fn(&Host, &Path, &[&str]) -> Run) -> Cluster {
        Cluster::init_api(Tool::Kubestrap, template, "24h", "", &[], &[], api)
    }

    fn init_api(
        tool: Tool,
        template: &str,
        signing: &str,
        cluster_extra: &str,
        flags: &[&str],
        files: &[(&str, &str)],
        api: &dyn Fn(&Host, &Path, &[&str]) -> Run,
    ) -> Cluster {
        let lock = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let lan = Lan::new();
        let port = free_port();
        let scratch = Scratch::new("");
        let cri = lan.cri_socket("cp-1", &scratch.root());
        let cluster_extra = cluster_extra.replace("{port}", &port.to_string());
        let vars: [(&str, &dyn std::fmt::Display); 5] = [
            ("cri", &cri),
            ("port", &port),
            ("signing", &signing),
            ("addr", &CP_ADDR),
            ("cluster_extra", &cluster_extra),
        ];
        let text = fill(template, &vars);
        std::fs::write(scratch.config(), &text).expect("write config");
        let version = kubelet_version_of(&text);
        let (config, root_arg) = (scratch.config(), scratch.root_str());
        let root = scratch.root();
        for (path, text) in files {
            write_file(&at(&root, path), text);
        }
        if tool == Tool::Kubeadm {
            let mut args = vec!["init", "--config", config.as_str(), "--ignore-preflight-errors=all"];
            args.extend_from_slice(flags);
            return Cluster::bring_up(lock, lan, (port, version), scratch, &[], &|host, logs| {
                run_kubeadm(&host.netns, &root, logs, &args, &|| host.health())
            });
        }
        let mut init = vec!["init", "--config", config.as_str(), "--root", root_arg.as_str()];
        init.extend_from_slice(flags);
        let on_disk = ["init", "--on-disk-only", "--config", &config, "--root", &root_arg];
        Cluster::bring_up(lock, lan, (port, version), scratch, &on_disk, &|host, logs| api(host, logs, &init))
    }

    /// A control plane from `kubestrap boot` alone: `user_data` (`{port}`, `{cri}`, `{addr}`
    /// filled in) as the NoCloud seed, the pre-kubelet stage, the node's kubelet and static
    /// Pods, then the post-kubelet stage.
    pub fn boot(user_data: &str) -> Cluster {
        Cluster::boot_with(|lan, root, port| {
            let cri = lan.cri_socket("cp-1", root);
            let vars: [(&str, &dyn std::fmt::Display); 3] = [("cri", &cri), ("port", &port), ("addr", &CP_ADDR)];
            seed(root, &fill(user_data, &vars), "cp-1");
        })
    }

    /// [`Cluster::boot`] of cp-1 at [`CP_ADDR`] whose root `prepare` seeds (given the LAN, the
    /// root and the API server's port).
    pub fn boot_with(prepare: impl FnOnce(&Lan, &Path, u16)) -> Cluster {
        Cluster::boot_with_at(bins::K8S_VERSION, prepare)
    }

    /// [`Cluster::boot_with`] on a node image of Kubernetes `version` (its kubelet's).
    pub fn boot_with_at(version: &'static str, prepare: impl FnOnce(&Lan, &Path, u16)) -> Cluster {
        let version = bins::version_for(version);
        let lock = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let lan = Lan::new();
        let port = free_port();
        let scratch = Scratch::new("");
        prepare(&lan, &scratch.root(), port);
        let root_arg = scratch.root_str();
        let stage = |s: &'static str| boot_args(s, &root_arg);
        let post = stage("post-kubelet");
        Cluster::bring_up(lock, lan, (port, version), scratch, &stage("pre-kubelet"), &|host, logs| {
            run_watched(&host.netns, &post, logs, &|| host.health())
        })
    }

    /// Runs `first` (the on-disk part, if any) in cp-1's namespace, starts cp-1's host, runs
    /// `second` (the API part) while watching it, and waits for cp-1 to be Ready; cp-1's kubelet
    /// is Kubernetes `version`'s.
    fn bring_up(
        lock: MutexGuard<'static, ()>,
        lan: Lan,
        (port, version): (u16, &'static str),
        scratch: Scratch,
        first: &[&str],
        second: &dyn Fn(&Host, &Path) -> Run,
    ) -> Cluster {
        // Outside the scratch dir, so they outlive a failed test.
        let logs = std::env::temp_dir().join(format!("kubestrap-real-logs-{}", std::process::id())).join("cp-1");
        std::fs::create_dir_all(&logs).expect("logs dir");
        let root = scratch.root();
        let netns = lan.host("cp-1", CP_ADDR);
        let started = Instant::now();
        let pre = if first.is_empty() { Run { out: empty_output() } } else { run_in(&netns, first) };
        assert_eq!(pre.code(), 0, "{first:?} failed:\n{}\n{}", pre.stdout(), pre.stderr());
        let host = Host::start_at(version, "cp-1", netns, &root, &logs, None, false);
        let init = second(&host, &logs);
        let wall = started.elapsed();
        let netns = host.netns.clone();
        let versions = vec![("cp-1".to_string(), version)];
        let hosts = vec![host];
        let c = Cluster { _lock: lock, scratch, port, logs, first: pre, init, wall, hosts, netns, lan, versions };
        assert_eq!(c.init.code(), 0, "init failed:\n{}\n{}\n{}", c.init.stdout(), c.init.stderr(), c.status());
        c.wait_ready("cp-1");
        c
    }

    /// Node `name`, when it starts, runs Kubernetes `version`'s kubelet (a node image of that
    /// version).
    pub fn set_version(&mut self, name: &str, version: &'static str) {
        self.versions.retain(|(n, _)| n != name);
        self.versions.push((name.to_string(), bins::version_for(version)));
    }

    /// The Kubernetes version of node `name`'s kubelet.
    pub fn version(&self, name: &str) -> &'static str {
        self.versions.iter().find(|(n, _)| n == name).map_or(bins::K8S_VERSION, |(_, v)| v)
    }

    pub fn root(&self) -> PathBuf {
        self.scratch.root()
    }

    pub fn admin_conf(&self) -> PathBuf {
        self.scratch.path("/etc/kubernetes/admin.conf")
    }

    /// The real kubectl v1.37.2 as admin, at cp-1's own API server (admin.conf may name a
    /// controlPlaneEndpoint that is not up): (code, stdout, stderr).
    pub fn kubectl(&self, args: &[&str]) -> (i32, String, String) {
        capture(
            self.netns
                .command(bins::bin("kubectl"))
                .arg("--kubeconfig")
                .arg(self.admin_conf())
                .arg(format!("--server=https://{CP_ADDR}:{}", self.port))
                .args(args)
                .env_remove("KUBECONFIG"),
        )
    }

    /// `kubectl patch --type=merge` of kube-system's ConfigMap `name` with `data` (key: value),
    /// which must succeed.
    pub fn set_config_data(&self, name: &str, data: serde_json::Value) {
        let patch = serde_json::json!({ "data": data }).to_string();
        let (code, _, err) =
            self.kubectl(&["-n", "kube-system", "patch", "configmap", name, "--type=merge", "-p", &patch]);
        assert_eq!(code, 0, "patch ConfigMap kube-system/{name}: {err}");
    }

    /// `kubectl get -o json`, which must succeed.
    pub fn get(&self, args: &[&str]) -> Value {
        let mut all = vec!["get", "-o", "json"];
        all.extend_from_slice(args);
        let (code, out, err) = self.kubectl(&all);
        assert_eq!(code, 0, "kubectl {all:?}: {err}");
        serde_json::from_str(&out).expect("kubectl json")
    }

    /// The CSRs bootstrap tokens made (one per TLS bootstrap).
    pub fn bootstrap_csrs(&self) -> Vec<Value> {
        let csrs = self.get(&["csr"]);
        let items = csrs["items"].as_array().expect("items").iter();
        items
            .filter(|r| r["spec"]["username"].as_str().is_some_and(|u| u.starts_with("system:bootstrap:")))
            .cloned()
            .collect()
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
        self.wait_cluster_info_signed_for("abcdef");
    }

    /// [`Cluster::wait_cluster_info_signed`] for the token whose id is `id`.
    pub fn wait_cluster_info_signed_for(&self, id: &str) {
        let key = format!("jws-kubeconfig-{id}");
        self.wait(&format!("cluster-info signed for {id}"), || {
            let info = self.get(&["-n", "kube-public", "configmap", "cluster-info"]);
            info["data"].as_object()?.contains_key(&key).then_some(())
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

    /// The placeholders of node templates for node `name` at `addr(i)` rooted at `root`:
    /// {name} {cri} {ip} {addr} {port} {hash}.
    pub fn fill_node(&self, template: &str, name: &str, i: usize, root: &Path) -> String {
        let (ip, cri, hash) = (addr(i), self.lan.cri_socket(name, root), self.ca_hash());
        let vars: [(&str, &dyn std::fmt::Display); 6] =
            [("name", &name), ("cri", &cri), ("ip", &ip), ("addr", &CP_ADDR), ("port", &self.port), ("hash", &hash)];
        fill(template, &vars)
    }

    /// kubestrap join of a new node `name` at `addr(i)` with `config` (a JoinConfiguration
    /// template, see [`Cluster::fill_node`]), its host started first so the kubelet and static
    /// Pods come up as join writes them. Returns the join run; the host is added to the cluster.
    pub fn join(&mut self, name: &str, i: usize, template: &str, flags: &[&str]) -> Run {
        let w = Scratch::new("");
        std::fs::write(w.config(), self.fill_node(template, name, i, &w.root())).expect("write join config");
        let mut args = vec!["join".to_string(), "--config".into(), w.config(), "--root".into(), w.root_str()];
        args.extend(flags.iter().map(|f| f.to_string()));
        self.node(name, i, w, &[args]).remove(0)
    }

    /// A node from `kubestrap boot` alone: `user_data` as its NoCloud seed (the placeholders of
    /// [`Cluster::fill_node`]), `token` as the `kubestrap.token` credential; returns the
    /// pre-kubelet and post-kubelet runs (the second only when the first succeeded).
    pub fn boot_node(&mut self, name: &str, i: usize, user_data: &str, token: &str) -> Vec<Run> {
        let w = Scratch::new("");
        let root = w.root();
        seed(&root, &self.fill_node(user_data, name, i, &root), name);
        write_file(&root.join("run/credentials/@system/kubestrap.token"), token);
        self.boot_node_in(name, i, w)
    }

    /// [`Cluster::boot_node`] of a node whose root the caller seeded.
    pub fn boot_node_in(&mut self, name: &str, i: usize, w: Scratch) -> Vec<Run> {
        let r = w.root_str();
        let cmds: Vec<Vec<String>> =
            ["pre-kubelet", "post-kubelet"].iter().map(|s| boot_args(s, &r).map(str::to_string).to_vec()).collect();
        self.node(name, i, w, &cmds)
    }

    /// A node's namespace at `addr(i)` on the cluster's LAN with no host (no kubelet, no static
    /// Pods): for kubestrap runs whose node never needs to run.
    pub fn bare_node(&self, name: &str, i: usize) -> Netns {
        self.lan.host(name, &addr(i))
    }

    /// A new node `name` at `addr(i)` rooted in `w`: its host starts so the kubelet and static
    /// Pods come up as kubestrap writes them, then each of `commands` runs in its namespace, in
    /// turn, while a failing one stops the rest. The host joins the cluster.
    pub fn node(&mut self, name: &str, i: usize, w: Scratch, commands: &[Vec<String>]) -> Vec<Run> {
        self.node_then(name, i, w, |c, host, logs| {
            let mut runs = Vec::new();
            for cmd in commands {
                let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
                let run = run_watched(&host.netns, &args, logs, &|| c.health().and_then(|_| host.health()));
                let ok = run.code() == 0;
                runs.push(run);
                if !ok {
                    break;
                }
            }
            runs
        })
    }

    /// A new node `name` at `addr(i)` rooted in `w` whose host runs while `f` (given the
    /// cluster, the host and its log directory) does what it will; the host then joins the
    /// cluster.
    pub fn node_then<T>(&mut self, name: &str, i: usize, w: Scratch, f: impl FnOnce(&Cluster, &Host, &Path) -> T) -> T {
        self.node_with(name, i, w, false, f)
    }

    /// [`Cluster::node_then`]; with `bootstraps` the kubelet starts on bootstrap-kubelet.conf
    /// and makes its identity itself (as after kubeadm join).
    pub fn node_with<T>(
        &mut self,
        name: &str,
        i: usize,
        w: Scratch,
        bootstraps: bool,
        f: impl FnOnce(&Cluster, &Host, &Path) -> T,
    ) -> T {
        let logs = self.logs.with_file_name(name);
        std::fs::create_dir_all(&logs).expect("logs dir");
        let root = w.root();
        let netns = self.lan.host(name, &addr(i));
        let host = Host::start_at(self.version(name), name, netns, &root, &logs, Some(w), bootstraps);
        let out = f(self, &host, &logs);
        self.hosts.push(host);
        out
    }
}

/// The kubelet version of a control plane inited from `config`: its `kubernetesVersion`'s (the
/// node image is the cluster's version), v1.37.2 without one.
fn kubelet_version_of(config: &str) -> &'static str {
    let v = config.lines().find_map(|l| l.trim().strip_prefix("kubernetesVersion:"));
    v.map_or(bins::K8S_VERSION, |v| bins::version_for(v.trim()))
}

/// A NoCloud seed under a node root, and nothing else to probe (never a metadata server).
pub fn seed(root: &Path, user_data: &str, hostname: &str) {
    let d = root.join("var/lib/cloud/seed/nocloud");
    write_file(&d.join("user-data"), user_data);
    write_file(&d.join("meta-data"), format!("instance-id: i-{hostname}\nlocal-hostname: {hostname}\n"));
    write_file(&root.join("etc/kubestrap/datasource"), "kubestrap.ds=nocloud\n");
}

/// `kubestrap boot --stage STAGE --root ROOT`.
pub fn boot_args<'a>(stage: &'a str, root: &'a str) -> [&'a str; 7] {
    ["boot", "--stage", stage, "--root", root, "--datasource-timeout", "3s"]
}

/// kubestrap in a node's network namespace; its logs must hold no secret.
pub fn run_in(netns: &Netns, args: &[&str]) -> Run {
    let run =
        Run { out: netns.command(&*BIN).args(args).env_remove("JOURNAL_STREAM").output().expect("run kubestrap") };
    check_secrets(args, &run);
    run
}

fn check_secrets(args: &[&str], run: &Run) {
    for out in [run.stderr(), run.stdout()] {
        assert!(!out.contains("PRIVATE KEY-----"), "kubestrap {args:?} printed a private key");
    }
    assert!(!run.stderr().contains(SECRET), "kubestrap {args:?} logged the token secret:\n{}", run.stderr());
}

/// [`run_in`], each stderr line with the moment it arrived (a roll's span, seen from outside).
pub fn run_timed(netns: &Netns, args: &[&str]) -> (Run, Vec<(Instant, String)>) {
    use std::io::{BufRead, Read};
    let mut child = netns
        .command(&*BIN)
        .args(args)
        .env_remove("JOURNAL_STREAM")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn kubestrap");
    let mut out = child.stdout.take().expect("stdout pipe");
    let stdout = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let (mut timed, mut stderr) = (Vec::new(), Vec::new());
    for line in std::io::BufReader::new(child.stderr.take().expect("stderr pipe")).split(b'\n').map_while(Result::ok) {
        timed.push((Instant::now(), String::from_utf8_lossy(&line).into_owned()));
        stderr.extend(line);
        stderr.push(b'\n');
    }
    let status = child.wait().expect("wait kubestrap");
    let out = std::process::Output { status, stdout: stdout.join().expect("stdout reader"), stderr };
    let run = Run { out };
    check_secrets(args, &run);
    (run, timed)
}

/// [`run_in`], failing at once with the logs when `health` fails meanwhile (a kubelet that
/// refuses its flags would otherwise show only as init's timeout).
pub fn run_watched(netns: &Netns, args: &[&str], logs: &Path, health: &dyn Fn() -> Result<(), String>) -> Run {
    let (out_path, err_path) = (logs.join("kubestrap.out"), logs.join("kubestrap.err"));
    let mut child = netns
        .command(&*BIN)
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

fn empty_output() -> std::process::Output {
    use std::os::unix::process::ExitStatusExt;
    std::process::Output { status: std::process::ExitStatus::from_raw(0), stdout: Vec::new(), stderr: Vec::new() }
}

/// The real kubeadm with `args` in `netns`, in a mount namespace of its own where the node
/// root's /etc/kubernetes, /var/lib/kubelet and /var/lib/etcd sit over kubeadm's fixed paths;
/// fails at once when `health` does. Output goes to `logs`/kubeadm.{out,err}.
pub fn run_kubeadm(
    netns: &Netns,
    root: &Path,
    logs: &Path,
    args: &[&str],
    health: &dyn Fn() -> Result<(), String>,
) -> Run {
    let mut cmd = netns.command("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c", BIND_THEN_EXEC, "sh"]);
    for dir in ["etc/kubernetes", "var/lib/kubelet", "var/lib/etcd"] {
        std::fs::create_dir_all(root.join(dir)).expect("mkdir");
        cmd.arg(root.join(dir)).arg(Path::new("/").join(dir));
    }
    let (out, err) = (logs.join("kubeadm.out"), logs.join("kubeadm.err"));
    cmd.arg("--").arg(bins::bin("kubeadm")).args(args);
    cmd.stdout(std::fs::File::create(&out).expect("out")).stderr(std::fs::File::create(&err).expect("err"));
    let mut child = ChildGuard(cmd.spawn().expect("kubeadm"));
    let status = wait_for(&format!("kubeadm {args:?}"), Duration::from_secs(600), health, || {
        child.0.try_wait().expect("wait kubeadm")
    });
    let read = |p: &Path| std::fs::read(p).expect("kubeadm output");
    Run { out: std::process::Output { status, stdout: read(&out), stderr: read(&err) } }
}
