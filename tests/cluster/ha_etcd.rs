//! Three stacked-etcd control planes through the CLI: `init --upload-certs` on cp-1 with a real
//! etcd started from its manifest, then `join --control-plane --certificate-key` of cp-2 and cp-3
//! with etcd-join against that etcd. The test plays each node's kubelet: it registers the Node
//! once kubelet.conf exists, starts etcd from the manifest the join writes (etcd's standard
//! ports on the node's own loopback address, as kubestrap computes the member URLs), and mirrors
//! the node's static Pods into the API double, whose etcd Pod annotation the next join reads.
//! Timings are printed (`--nocapture`), never asserted.

use crate::common::etcd::{
    args_on_own_address, etcdctl, health_tls, is_healthy, manifest_command, member_list, need_etcd, refs, start_etcd,
    without_newer_flags,
};
use crate::common::*;

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A node's root and the etcd the test runs for it (killed first when the node is dropped).
pub struct Node {
    pub etcd: Mutex<Option<ChildGuard>>,
    pub s: Scratch,
    pub name: &'static str,
    pub addr: &'static str,
}

impl Node {
    pub fn new(name: &'static str, addr: &'static str, config: &str) -> Node {
        Node { etcd: Mutex::new(None), s: Scratch::new(config), name, addr }
    }
    pub fn at(&self, host: &str) -> PathBuf {
        self.s.path(host)
    }
    pub fn client_url(&self) -> String {
        format!("https://{}:2379", self.addr)
    }
    pub fn peer_url(&self) -> String {
        format!("https://{}:2380", self.addr)
    }
    fn manifests(&self) -> PathBuf {
        self.at("/etc/kubernetes/manifests")
    }
    /// etcd from this node's manifest, as its kubelet would run it; returns once it serves.
    pub fn start_etcd(&self, ready: &dyn Fn() -> bool) {
        let command = manifest_command(&self.at("/etc/kubernetes/manifests/etcd.yaml"));
        let args = without_newer_flags(args_on_own_address(&self.s, &command, self.addr));
        let (guard, dropped) = start_etcd(&self.s, args, ready, Instant::now() + Duration::from_secs(60));
        assert!(dropped.is_empty(), "etcd 3.4 rejected {dropped:?}");
        *self.etcd.lock().unwrap() = Some(guard);
    }
    fn listening(&self) -> bool {
        let addr: SocketAddr = format!("{}:2379", self.addr).parse().unwrap();
        TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
    }
}

/// The first control plane (its etcd running, its API the double's) and what joins need.
pub struct Ha {
    pub first: Node,
    pub double: kube_double::Handle,
    pub port: u16,
    pub key: String,
    pub hash: String,
}

/// A port free on every address (the double and each joined API server bind it on their own).
fn free_port_any() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0").unwrap().local_addr().unwrap().port()
}

impl Ha {
    /// `init --upload-certs` of cp-1 advertising `addr`, the double on `addr` once the API
    /// server manifest exists, then cp-1's etcd and mirror Pods.
    pub fn start(addr: &'static str) -> Ha {
        need_etcd();
        let (port, healthz) = (free_port_any(), free_port());
        let config =
            fill(fixture!("ha-etcd/kubeadm.yaml"), &[("address", &addr), ("port", &port), ("healthz", &healthz)]);
        let first = Node::new("cp-1", addr, &config);
        let (pki, apiserver) =
            (first.at("/etc/kubernetes/pki"), first.at("/etc/kubernetes/manifests/kube-apiserver.yaml"));
        let listen: SocketAddr = format!("{addr}:{port}").parse().unwrap();
        let starter = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            while !apiserver.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            start_double(&pki, port, healthz, |c| c.listen = listen)
        });
        let init = first.s.init_full(&["--upload-certs"]);
        let double = starter.join().expect("double started");
        assert_eq!(init.code(), 0, "init failed:\n{}\n{}", init.stdout(), init.stderr());
        let out = init.stdout();
        let key = out.split("Using certificate key:\n").nth(1).and_then(|r| r.lines().next()).expect("key").trim();
        let tls = health_tls(&first.s);
        first.start_etcd(&|| is_healthy(&etcdctl(&first.client_url(), &refs(&tls), &["endpoint", "health"]).1));
        double.mirror_static_pods(&first.manifests(), "cp-1").unwrap();
        let hash = ca_hash(&first.s.pki("ca.crt"));
        Ha { key: key.to_string(), first, double, port, hash }
    }

    /// `kubestrap join --control-plane` of `n`, started (not waited for).
    pub fn spawn_join(&self, n: &Node) -> Child {
        let (ep, port, root) = (format!("{}:{}", self.first.addr, self.port), self.port.to_string(), n.s.root_str());
        let mut cmd = Command::new(BIN);
        cmd.args(["join", &ep, "--token", TOKEN, "--discovery-token-ca-cert-hash", &self.hash])
            .args(["--control-plane", "--certificate-key", &self.key])
            .args(["--apiserver-advertise-address", n.addr, "--apiserver-bind-port", &port])
            .args(["--node-name", n.name, "--root", &root])
            .env_remove("JOURNAL_STREAM")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for v in PROXY_VARS {
            cmd.env_remove(v);
        }
        cmd.spawn().expect("spawn kubestrap join")
    }

    /// Plays `n`'s kubelet until `stop`: starts its API server (the double's second endpoint
    /// on its own serving certificate, at its advertise address) once its manifest exists;
    /// registers the Node once kubelet.conf exists; starts etcd once its manifest exists, then
    /// mirrors the node's static Pods. Returns when the etcd manifest appeared and when etcd
    /// served, counted from `t0`.
    pub fn kubelet(&self, n: &Node, t0: Instant, stop: &AtomicBool) -> (Option<Duration>, Option<Duration>) {
        let (mut api, mut registered, mut manifest, mut served) = (false, false, None, None);
        let deadline = Instant::now() + Duration::from_secs(240);
        while !stop.load(Ordering::SeqCst) && Instant::now() < deadline && !(api && registered && served.is_some()) {
            if !api && n.at("/etc/kubernetes/manifests/kube-apiserver.yaml").exists() {
                let read = |f: &str| std::fs::read_to_string(n.s.pki(f)).unwrap();
                let listen = format!("{}:{}", n.addr, self.port).parse().unwrap();
                self.double.serve_also(listen, &read("apiserver.crt"), &read("apiserver.key")).unwrap();
                api = true;
            }
            if !registered && n.at("/etc/kubernetes/kubelet.conf").exists() {
                self.double.register_node(n.name, &[]).unwrap();
                registered = true;
            }
            if served.is_none() && n.at("/etc/kubernetes/manifests/etcd.yaml").exists() {
                manifest = Some(t0.elapsed());
                n.start_etcd(&|| n.listening());
                served = Some(t0.elapsed());
                self.double.mirror_static_pods(&n.manifests(), n.name).unwrap();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        (manifest, served)
    }

    /// One whole join with its kubelet: the run and its wall time.
    pub fn join(&self, n: &Node) -> (Run, Duration) {
        let stop = AtomicBool::new(false);
        let t0 = Instant::now();
        let (out, times) = std::thread::scope(|s| {
            let kubelet = s.spawn(|| self.kubelet(n, t0, &stop));
            let out = self.spawn_join(n).wait_with_output().expect("join");
            stop.store(true, Ordering::SeqCst);
            (out, kubelet.join().unwrap())
        });
        let wall = t0.elapsed();
        let at = |t: Option<Duration>| t.map_or("never".to_string(), |t| format!("{t:.2?}"));
        println!(
            "join --control-plane {}: {wall:.2?} wall (learner added, etcd manifest written at {}; its etcd served at {}; promoted and available by the end)",
            n.name,
            at(times.0),
            at(times.1)
        );
        let run = Run { out };
        self.assert_clean(&run);
        (run, wall)
    }

    /// Neither the token secret, a private key nor the certificate key reach the output.
    pub fn assert_clean(&self, r: &Run) {
        for text in [r.stdout(), r.stderr()] {
            for s in [SECRET, "PRIVATE KEY-----", self.key.as_str()] {
                assert!(!text.contains(s), "a secret in the join's output:\n{text}");
            }
        }
    }

    /// (name, peer URL, client URLs non-empty, learner) of every member, sorted by name.
    pub fn members(&self) -> Vec<(String, String, bool, bool)> {
        let mut v: Vec<_> = member_list(&self.first.client_url(), &health_tls(&self.first.s))
            .iter()
            .map(|m| {
                let name = m["name"].as_str().unwrap_or_default().to_string();
                let peer = m["peerURLs"][0].as_str().unwrap_or_default().to_string();
                let serving = m["clientURLs"].as_array().is_some_and(|a| !a.is_empty());
                (name, peer, serving, m["isLearner"].as_bool().unwrap_or(false))
            })
            .collect();
        v.sort();
        v
    }
}

/// Started voters, one per node, sorted by name.
pub fn voters(nodes: &[&Node]) -> Vec<(String, String, bool, bool)> {
    let mut v: Vec<_> = nodes.iter().map(|n| (n.name.to_string(), n.peer_url(), true, false)).collect();
    v.sort();
    v
}

/// A manifest flag's value.
pub fn flag(n: &Node, name: &str) -> Option<String> {
    let prefix = format!("--{name}=");
    manifest_command(&n.at("/etc/kubernetes/manifests/etcd.yaml"))
        .iter()
        .find_map(|a| a.strip_prefix(&prefix).map(str::to_string))
}

/// `--initial-cluster` as sorted name=URL pairs (etcd's member order is not fixed).
pub fn initial_cluster(n: &Node) -> Vec<String> {
    let mut v: Vec<String> = flag(n, "initial-cluster").unwrap_or_default().split(',').map(str::to_string).collect();
    v.sort();
    v
}

#[test]
fn three_control_planes_join_stacked_etcd_through_the_cli() {
    let ha = Ha::start("127.0.0.2");
    let n2 = Node::new("cp-2", "127.0.0.3", "");
    let n3 = Node::new("cp-3", "127.0.0.4", "");
    assert_eq!(ha.members(), voters(&[&ha.first]));

    let mut so_far = vec![&ha.first];
    for n in [&n2, &n3] {
        let (r, _) = ha.join(n);
        assert_eq!(r.code(), 0, "join of {} failed:\nstdout:\n{}\nstderr:\n{}", n.name, r.stdout(), r.stderr());
        so_far.push(n);
        // The members so far, this node included, and a join into an existing cluster.
        let want: Vec<String> = voters(&so_far).iter().map(|(name, url, ..)| format!("{name}={url}")).collect();
        assert_eq!(initial_cluster(n), want, "{}", n.name);
        assert_eq!(flag(n, "initial-cluster-state").as_deref(), Some("existing"));
        assert_eq!(ha.members(), voters(&so_far), "after joining {}", n.name);

        // What kubeadm says, each once.
        let log = format!("{}{}", r.stdout(), r.stderr());
        for line in [
            "[etcd] Announced new etcd member joining to the existing etcd cluster",
            "[etcd] Creating static Pod manifest for \"etcd\"",
            "[etcd] Waiting for the new etcd member to join the cluster. This can take up to 40s",
        ] {
            assert_eq!(log.matches(line).count(), 1, "{line:?} once in:\n{log}");
        }
        assert!(r.stdout().contains("This node has joined the cluster and a new control plane instance was created:"));
        assert!(
            r.stdout().contains("* A new etcd member was added to the local/stacked etcd cluster."),
            "{}",
            r.stdout()
        );
        let promoted = format!("[etcd] The learner was promoted as a voting member ({})", n.peer_url());
        assert!(log.contains(&promoted), "{log}");
        assert_eq!(mode(&n.at("/var/lib/etcd")), 0o700);
        // wait-control-plane: the kubelet, then this node's own API server.
        let ready = format!(
            "[wait-control-plane] Waiting for a healthy kube-apiserver at https://{}:{}/livez",
            n.addr, ha.port
        );
        assert!(log.contains(&ready), "{log}");
        let order =
            ["[wait-control-plane] The kubelet is healthy", "[wait-control-plane] The kube-apiserver is healthy"];
        let at: Vec<usize> = order.iter().map(|l| log.find(l).unwrap_or_else(|| panic!("{l:?} in:\n{log}"))).collect();
        assert!(at[0] < at[1] && log.find("[mark-control-plane] Marked").unwrap() < at[0], "{log}");
    }
    // Every member is healthy through each member's own client URL.
    for n in [&ha.first, &n2, &n3] {
        let (code, out) = etcdctl(&n.client_url(), &refs(&health_tls(&ha.first.s)), &["endpoint", "health"]);
        assert!(code == 0 && is_healthy(&out), "{}: {out}", n.name);
    }
}
