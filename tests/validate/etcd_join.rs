//! Stacked etcd join with learners against a real etcd (Debian's 3.4): three members formed by
//! kubestrap's learner add and promote, each from its own root sharing one etcd CA; a join
//! interrupted after every step and rerun; two joins at once; the retry figures on a fake clock.
//!
//! The test plays the kubelet: it starts etcd from the flags of the manifest kubestrap renders
//! (paths moved under the root, the standard ports replaced by free ones). Real time is used only
//! where the real etcd needs it (a learner catching up, another join finishing); the timings are
//! printed, never asserted.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use kubestrap::clock::FakeClock;
use kubestrap::config::{HostFacts, InitConfig, load_init};
use kubestrap::etcd::{self, Announced, Credentials, NewMember};
use kubestrap::fsutil::NodeFs;
use kubestrap::manifests::{self, HostEnv};
use serde_json::Value;

use crate::common::etcd::{
    RecordingClock, args_from_command, etcdctl, free_ports, health_tls, is_healthy, manifest_command, member_list,
    refs, start_etcd, without_newer_flags,
};
use crate::common::needs::{Need, need};
use crate::common::{ChildGuard, Scratch, fill, fixture, write_file};

/// A control plane named `{name}` advertising `{address}`.
const CONFIG: &str = fixture!("etcd-join/kubeadm.yaml");
const CERTS_DIR: &str = "/etc/kubernetes/pki";

/// One control-plane node: its root (PKI from `kubestrap init --on-disk-only`) and the free
/// ports its etcd uses instead of 2379/2380/2381.
struct Node {
    s: Scratch,
    name: &'static str,
    ip: &'static str,
    ports: (u16, u16, u16),
}

impl Node {
    /// With `ca_from`, that node's etcd CA is copied in before the certs phase runs, so this
    /// node's etcd server, peer and client certificates are signed by the same CA.
    fn new(name: &'static str, ip: &'static str, ca_from: Option<&Node>) -> Node {
        let s = Scratch::new(&fill(CONFIG, &[("name", &name), ("address", &ip)]));
        if let Some(first) = ca_from {
            for f in ["etcd/ca.crt", "etcd/ca.key"] {
                write_file(&s.pki(f), std::fs::read(first.s.pki(f)).expect("etcd CA"));
            }
        }
        s.init(&[]).ok();
        if let Some(first) = ca_from {
            let same =
                std::fs::read(s.pki("etcd/ca.crt")).unwrap() == std::fs::read(first.s.pki("etcd/ca.crt")).unwrap();
            assert!(same, "init replaced the shared etcd CA");
        }
        Node { s, name, ip, ports: free_ports() }
    }

    fn client_url(&self) -> String {
        format!("https://{}:{}", self.ip, self.ports.0)
    }

    fn peer_url(&self) -> String {
        format!("https://{}:{}", self.ip, self.ports.1)
    }

    fn me(&self) -> NewMember {
        NewMember { name: self.name.into(), peer_url: self.peer_url(), client_url: self.client_url() }
    }

    /// The healthcheck client, as kubeadm's etcd client uses it.
    fn creds(&self) -> Credentials {
        Credentials::load(&NodeFs::new(self.s.root()), CERTS_DIR, etcd::HEALTHCHECK_CLIENT).expect("etcd credentials")
    }

    fn cfg(&self) -> InitConfig {
        load_init(Some(Path::new(&self.s.config())), &HostFacts::default()).expect("config")
    }

    fn health(&self) -> Vec<String> {
        health_tls(&self.s)
    }

    /// The first member: etcd started from init's etcd.yaml, a new cluster.
    fn start_first(&self, deadline: Instant) -> ChildGuard {
        let command = manifest_command(&self.s.path("/etc/kubernetes/manifests/etcd.yaml"));
        self.start(
            &command,
            &|| is_healthy(&etcdctl(&self.client_url(), &refs(&self.health()), &["endpoint", "health"]).1),
            deadline,
        )
    }

    /// etcd from a manifest command, minus the flags etcd 3.4 predates (`validate/etcd_real`
    /// checks those); any other flag it rejects fails the test.
    fn start(&self, command: &[String], ready: &dyn Fn() -> bool, deadline: Instant) -> ChildGuard {
        let args = without_newer_flags(args_from_command(&self.s, command, self.ports));
        let (guard, dropped) = start_etcd(&self.s, args, ready, deadline);
        assert!(dropped.is_empty(), "etcd 3.4 rejected {dropped:?}");
        guard
    }

    /// A joining member: the manifest kubestrap renders from the learner add (its two join
    /// flags checked), then etcd started from it; returns once etcd answers `Status` (a learner
    /// answers it; it refuses health's linearizable read until promoted), asked with our client,
    /// which is told "refused" at once where etcdctl would wait out its dial timeout.
    fn start_joining(&self, a: &Announced, deadline: Instant) -> ChildGuard {
        let list = a.initial_cluster.to_string();
        let pod = manifests::etcd_join(&self.cfg(), &HostEnv::default(), &list).expect("local etcd");
        let command: Vec<String> = pod["spec"]["containers"][0]["command"]
            .as_array()
            .expect("command")
            .iter()
            .map(|v| v.as_str().expect("string").to_string())
            .collect();
        assert!(command.contains(&format!("--initial-cluster={list}")), "{command:?}");
        assert!(command.contains(&"--initial-cluster-state=existing".to_string()), "{command:?}");
        let probe = etcd::Client::new(&[self.client_url()], &self.creds()).expect("client");
        self.start(&command, &|| probe.status(&self.client_url()).is_ok(), deadline)
    }
}

/// (name, peer URL, started, learner) of every member, sorted by peer URL.
fn members(n: &Node) -> Vec<(String, String, bool, bool)> {
    let mut v: Vec<_> = member_list(&n.client_url(), &n.health())
        .iter()
        .map(|m| {
            let name = m["name"].as_str().unwrap_or_default().to_string();
            let peer = m["peerURLs"][0].as_str().unwrap_or_default().to_string();
            let started = !name.is_empty();
            (name, peer, started, m["isLearner"].as_bool().unwrap_or(false))
        })
        .collect();
    v.sort_by(|a, b| a.1.cmp(&b.1));
    v
}

fn voters(nodes: &[&Node]) -> Vec<(String, String, bool, bool)> {
    let mut v: Vec<_> = nodes.iter().map(|n| (n.name.to_string(), n.peer_url(), true, false)).collect();
    v.sort_by(|a, b| a.1.cmp(&b.1));
    v
}

fn sorted(a: &Announced) -> Vec<(String, String)> {
    let mut v = a.initial_cluster.0.clone();
    v.sort();
    v
}

/// Writes `n` keys of 1 MiB each through `node`'s etcd (values from stdin, as etcdctl reads
/// them); returns the database size in MiB.
fn load(node: &Node, n: usize) -> u64 {
    let value = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(value.path(), vec![b'k'; 1 << 20]).unwrap();
    let tls = node.health();
    for i in 0..n {
        let out = std::process::Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &node.client_url(), "--command-timeout=10s"])
            .args(&tls)
            .args(["put", &format!("/kubestrap/load/{i}")])
            .stdin(std::fs::File::open(value.path()).unwrap())
            .output()
            .expect("etcdctl put");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let (code, out) = etcdctl(&node.client_url(), &refs(&tls), &["endpoint", "status", "-w", "json"]);
    assert_eq!(code, 0, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v[0]["Status"]["dbSize"].as_u64().unwrap() >> 20
}

/// Polls `cond` (another thread's progress) until the deadline.
fn wait_until(deadline: Instant, what: &str, cond: impl Fn() -> bool) {
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn three_members_form_by_learner_add_and_promote() {
    need!(Need::etcd());
    let deadline = Instant::now() + Duration::from_secs(180);
    let n1 = Node::new("cp-1", "127.0.0.2", None);
    let n2 = Node::new("cp-2", "127.0.0.3", Some(&n1));
    let n3 = Node::new("cp-3", "127.0.0.4", Some(&n1));
    let _e1 = n1.start_first(deadline);

    // Data for the learners to catch up on: 32 values of 1 MiB.
    let db_mib = load(&n1, 32);
    println!("cp-1 holds {db_mib} MiB of etcd database before the joins");

    let mut running = Vec::new();
    for (node, before) in [(&n2, vec![&n1]), (&n3, vec![&n1, &n2])] {
        // The members' client URLs, as a join reads them from the etcd mirror Pods
        // (tests/real/ha.rs reads them from the real kubelets' mirror Pods).
        let eps: Vec<String> = before.iter().map(|n| n.client_url()).collect();
        let fake = FakeClock::new();
        let client = etcd::connect(&eps, &node.creds(), &fake).unwrap();
        assert!(fake.waits().is_empty(), "{:?}", fake.waits());
        // Real time: etcd refuses new members ("unhealthy cluster") until every voter has been
        // connected for 5 s, which a member promoted a moment ago has not.
        let clock = RecordingClock::default();
        let t_add = Instant::now();
        let a = etcd::add_as_learner(&client, &node.me(), &clock).unwrap();
        let add_time = t_add.elapsed();
        assert!(!a.reused);
        let mut want: Vec<(String, String)> = before.iter().map(|n| (n.name.to_string(), n.peer_url())).collect();
        want.push((node.name.to_string(), node.peer_url()));
        want.sort();
        assert_eq!(sorted(&a), want, "--initial-cluster={}", a.initial_cluster);
        assert_eq!(client.endpoints().last(), Some(&node.client_url()));
        let m = members(&n1);
        assert!(m.contains(&(String::new(), node.peer_url(), false, true)), "{m:?}");

        let t0 = Instant::now();
        let guard = node.start_joining(&a, deadline);
        let answering = t0.elapsed();
        assert!(etcd::promote(&client, &node.peer_url(), &clock).unwrap());
        let promoted = t0.elapsed();
        etcd::wait_available(&client, &clock).unwrap();
        println!(
            "{}: learner added in {add_time:.0?} ({} attempts refused as unhealthy cluster); etcd started → \
             answering as a learner {answering:.0?}; → promoted {promoted:.0?} ({} promote attempts refused as \
             not in sync); → all {} endpoints available {:.0?}",
            node.name,
            clock.waited_for("unhealthy cluster"),
            clock.waited_for("catching up"),
            client.endpoints().len(),
            t0.elapsed()
        );
        running.push(guard);
    }

    // etcdctl, with the healthcheck client: three started voters, one per node.
    assert_eq!(members(&n1), voters(&[&n1, &n2, &n3]));
    let all = [&n1, &n2, &n3].map(|n| n.client_url()).join(",");
    let (code, out) = etcdctl(&all, &refs(&n1.health()), &["endpoint", "health"]);
    assert!(code == 0 && out.matches("is healthy").count() == 3, "{out}");
    let apiserver = crate::common::etcd::tls_args(&n3.s, "etcd/ca.crt", Some("apiserver-etcd-client"));
    let (code, out) = etcdctl(&n3.client_url(), &refs(&apiserver), &["put", "/kubestrap/joined", "3"]);
    assert!(code == 0 && out.contains("OK"), "{out}");
    let (code, out) =
        etcdctl(&n1.client_url(), &refs(&n1.health()), &["get", "/kubestrap/joined", "--print-value-only"]);
    assert_eq!((code, out.trim()), (0, "3"));

    // `reset` on cp-3 removes its member through the cluster: two voters stay and serve.
    let running: Vec<crate::etcd_reset::Running> = [&n1, &n2, &n3]
        .iter()
        .map(|n| crate::etcd_reset::Running {
            name: n.name,
            ip: n.ip,
            peer_url: n.peer_url(),
            client_url: n.client_url(),
        })
        .collect();
    crate::etcd_reset::remove_member(&n3.s.root(), &running, 2);
    assert_eq!(members(&n1), voters(&[&n1, &n2]));
    let two = [&n1, &n2].map(|n| n.client_url()).join(",");
    let (code, out) = etcdctl(&two, &refs(&n1.health()), &["endpoint", "health"]);
    assert!(code == 0 && out.matches("is healthy").count() == 2, "{out}");
}

#[test]
fn a_join_interrupted_after_every_step_reruns_to_one_member_per_node() {
    need!(Need::etcd());
    let deadline = Instant::now() + Duration::from_secs(180);
    let n1 = Node::new("cp-1", "127.0.0.2", None);
    let n2 = Node::new("cp-2", "127.0.0.3", Some(&n1));
    let n3 = Node::new("cp-3", "127.0.0.4", Some(&n1));
    let _e1 = n1.start_first(deadline);
    let eps = vec![n1.client_url()];
    // A rerun is a new process: a new client, nothing remembered but etcd's state and the files.
    let rerun_add = |n: &Node, fake: &FakeClock| {
        let c = etcd::connect(&eps, &n.creds(), fake).unwrap();
        let a = etcd::add_as_learner(&c, &n.me(), fake).unwrap();
        (c, a)
    };

    // 1. Killed right after the add, before the kubelet started etcd.
    let (_, first) = rerun_add(&n2, &FakeClock::new());
    assert!(!first.reused);
    let fake = FakeClock::new();
    let (_, again) = rerun_add(&n2, &fake);
    assert!(again.reused && again.member_id == first.member_id);
    assert_eq!(sorted(&again), sorted(&first));
    assert!(fake.waits().is_empty(), "{:?}", fake.waits());
    assert_eq!(members(&n1).len(), 2, "{:?}", members(&n1));

    // 2. Killed after etcd started, before the promote: the rerun reuses the running learner,
    // and etcd restarted from the rerun's manifest keeps its data.
    let e2 = n2.start_joining(&again, deadline);
    let (c, third) = rerun_add(&n2, &FakeClock::new());
    assert!(third.reused && third.member_id == first.member_id);
    drop(e2);
    let e2 = n2.start_joining(&third, deadline);
    assert_eq!(members(&n1).len(), 2);
    assert!(etcd::promote(&c, &n2.peer_url(), &RecordingClock::default()).unwrap());

    // 3. Killed after the promote, before the wait: the rerun changes nothing, at once.
    let fake = FakeClock::new();
    let (c, fourth) = rerun_add(&n2, &fake);
    assert!(fourth.reused && fourth.member_id == first.member_id);
    assert!(!etcd::promote(&c, &n2.peer_url(), &fake).unwrap(), "a voter is not promoted again");
    etcd::wait_available(&c, &fake).unwrap();
    assert!(fake.waits().is_empty(), "{:?}", fake.waits());
    assert_eq!(members(&n1), voters(&[&n1, &n2]));
    // Another node on cp-2's old address (cp-2 never removed) is refused, not given its identity.
    let fake = FakeClock::new();
    let c = etcd::connect(&eps, &n2.creds(), &fake).unwrap();
    let e = kubestrap::error::Error::from(
        etcd::add_as_learner(&c, &NewMember { name: "cp-2b".into(), ..n2.me() }, &fake).unwrap_err(),
    );
    let id = format!("{:x}", first.member_id);
    assert_eq!(
        e.message,
        format!(
            "etcd member {id} (cp-2) already has the peer URL {}; if that node is gone, remove it \
             (`etcdctl member remove {id}`, or `kubeadm reset` on it) and join again",
            n2.peer_url()
        )
    );
    assert!(fake.waits().is_empty());

    // 4. Killed while MemberAdd was in flight, after etcd applied it (etcdctl makes that add):
    // the rerun finds the member instead of adding a second one.
    let peer = n3.peer_url();
    // etcd refuses it as "unhealthy cluster" until cp-2 has been connected for 5 s.
    let add = ["member", "add", "cp-3", "--learner", "--peer-urls", &peer];
    let out = std::cell::RefCell::new(String::new());
    wait_until(deadline, "etcdctl member add", || {
        let (code, text) = etcdctl(&eps[0], &refs(&n1.health()), &add);
        assert!(code == 0 || text.contains("unhealthy cluster"), "{text}");
        *out.borrow_mut() = text;
        code == 0
    });
    let out = out.into_inner();
    let hex = out.split_whitespace().skip_while(|w| *w != "Member").nth(1).expect("member id").to_string();
    let fake = FakeClock::new();
    let (c, a3) = rerun_add(&n3, &fake);
    assert!(a3.reused);
    assert_eq!(format!("{:x}", a3.member_id), hex);
    assert!(fake.waits().is_empty());
    let e3 = n3.start_joining(&a3, deadline);
    assert!(etcd::promote(&c, &peer, &RecordingClock::default()).unwrap());
    etcd::wait_available(&c, &RecordingClock::default()).unwrap();
    assert_eq!(members(&n1), voters(&[&n1, &n2, &n3]));

    // 5. kubeadm 1.37 waits for a quorum, not every member: cp-3's etcd stopped, two of three
    // still answer and the wait is over at once; with cp-2's stopped too it is not.
    drop(e3);
    let fake = FakeClock::new();
    etcd::wait_available(&c, &fake).unwrap();
    assert!(fake.waits().is_empty(), "{:?}", fake.waits());
    drop(e2);
    let fake = FakeClock::new();
    let e = etcd::wait_available(&c, &fake).unwrap_err().to_string();
    assert!(e.contains("quorum of the etcd members"), "{e}");
    assert!(!fake.waits().is_empty());
}

#[test]
fn concurrent_joins_take_turns_on_the_learner_limit() {
    need!(Need::etcd());
    let deadline = Instant::now() + Duration::from_secs(240);
    let n1 = Node::new("cp-1", "127.0.0.2", None);
    let n2 = Node::new("cp-2", "127.0.0.3", Some(&n1));
    let n3 = Node::new("cp-3", "127.0.0.4", Some(&n1));
    let _e1 = n1.start_first(deadline);
    let eps = vec![n1.client_url()];
    let clocks = [RecordingClock::default(), RecordingClock::default()];
    let start = Barrier::new(2);
    const REFUSED: &str = "too many learner members";

    let results: Vec<(ChildGuard, Duration)> = std::thread::scope(|sc| {
        let joins: Vec<_> = [&n2, &n3]
            .into_iter()
            .enumerate()
            .map(|(i, node)| {
                let (eps, clocks, start) = (&eps, &clocks, &start);
                sc.spawn(move || {
                    let client = etcd::connect(eps, &node.creds(), &FakeClock::new()).unwrap();
                    start.wait();
                    let t0 = Instant::now();
                    let a = etcd::add_as_learner(&client, &node.me(), &clocks[i]).unwrap();
                    let waited = t0.elapsed();
                    // The first learner's kubelet starts etcd only once the other join has been
                    // refused, so the race always happens.
                    if clocks[i].waited_for(REFUSED) == 0 {
                        wait_until(deadline, "the other join's refusal", || clocks[1 - i].waited_for(REFUSED) > 0);
                    }
                    let guard = node.start_joining(&a, deadline);
                    etcd::promote(&client, &node.peer_url(), &clocks[i]).unwrap();
                    etcd::wait_available(&client, &clocks[i]).unwrap();
                    (guard, waited)
                })
            })
            .collect();
        joins.into_iter().map(|j| j.join().expect("join thread")).collect()
    });

    let refused: Vec<usize> = clocks.iter().map(|c| c.waited_for(REFUSED)).collect();
    assert!(refused.iter().filter(|&&n| n > 0).count() == 1, "exactly one join waits its turn: {refused:?}");
    let second = refused.iter().position(|&n| n > 0).unwrap();
    println!(
        "concurrent joins: {} was refused {} times ({REFUSED}) and added after {:.0?}",
        ["cp-2", "cp-3"][second],
        refused[second],
        results[second].1
    );
    assert_eq!(members(&n1), voters(&[&n1, &n2, &n3]));
}

#[test]
fn retry_figures_and_failures_on_a_fake_clock_against_real_etcd() {
    need!(Need::etcd());
    let deadline = Instant::now() + Duration::from_secs(120);
    let n1 = Node::new("cp-1", "127.0.0.2", None);
    let n2 = Node::new("cp-2", "127.0.0.3", Some(&n1));
    let _e1 = n1.start_first(deadline);
    let eps = vec![n1.client_url()];
    let c = etcd::connect(&eps, &n2.creds(), &FakeClock::new()).unwrap();
    let interval = |waits: &[kubestrap::clock::Wait]| {
        waits.iter().all(|w| w.duration >= Duration::from_millis(375) && w.duration <= Duration::from_millis(625))
    };

    // A learner that never starts (a join that died for good) holds etcd's one learner slot:
    // the add waits every 500 ms for kubeadm's 2 minutes, then says why.
    let (stray, _) = c.member_add(&["https://127.0.0.9:2380".to_string()], true).unwrap();
    let fake = FakeClock::new();
    let e = kubestrap::error::Error::from(etcd::add_as_learner(&c, &n2.me(), &fake).unwrap_err());
    assert!(e.message.contains("gave up after 120s") && e.message.contains("too many learner members"), "{e}");
    assert_eq!(e.kind.exit_code(), 1);
    let waits = fake.waits();
    assert!((192..=320).contains(&waits.len()), "{} waits", waits.len());
    // Every pause is 500 ms ±25%, but the last, cut short by the deadline.
    assert!(interval(&waits[..waits.len() - 1]), "{waits:?}");
    // A loaded machine may time a call out now and then; that is waited out too (and said).
    let other: Vec<_> = waits.iter().filter(|w| !w.why.contains("another member is joining")).collect();
    assert!(other.len() * 10 <= waits.len(), "most waits are for the learner slot: {other:?}");
    assert!(other.iter().all(|w| w.why.contains("etcd")), "{other:?}");
    assert!(!members(&n1).iter().any(|m| m.1 == n2.peer_url()));

    // Once the slot frees (removed at 10 s), the next attempt adds us.
    let remover = Arc::new(etcd::Client::new(&eps, &n1.creds()).unwrap());
    let removed = AtomicBool::new(false);
    let fake = FakeClock::new().on_advance(move |t| {
        if t >= Duration::from_secs(10) && !removed.swap(true, Ordering::SeqCst) {
            remover.member_remove(stray.id).unwrap();
        }
    });
    let a = etcd::add_as_learner(&c, &n2.me(), &fake).unwrap();
    assert!(!a.reused);
    assert!(fake.elapsed() >= Duration::from_secs(10) && fake.elapsed() < Duration::from_secs(11));

    // A learner whose etcd never starts cannot be promoted: refused as not in sync for 2 minutes.
    let fake = FakeClock::new();
    let e = kubestrap::error::Error::from(etcd::promote(&c, &n2.peer_url(), &fake).unwrap_err());
    assert!(e.message.contains("gave up after 120s") && e.message.contains("in sync with leader"), "{e}");
    let waits = fake.waits();
    assert!(interval(&waits[..waits.len() - 1]), "{waits:?}");

    // What waiting cannot fix stops at once.
    let fake = FakeClock::new();
    let e = kubestrap::error::Error::from(etcd::promote(&c, "https://127.0.0.9:1", &fake).unwrap_err());
    assert_eq!(e.message, "no etcd member has the peer URL https://127.0.0.9:1; the learner must be added first");
    let ca = |f: &str| std::fs::read(n2.s.pki(f)).unwrap();
    let wrong_ca =
        Credentials::from_pem(ca("ca.crt"), ca("etcd/healthcheck-client.crt"), ca("etcd/healthcheck-client.key"));
    let e = kubestrap::error::Error::from(
        etcd::connect(&eps, &wrong_ca, &fake).err().expect("the cluster CA does not sign etcd's certificate"),
    );
    assert!(e.message.contains(&format!("etcd MemberList at {}: TLS failed", eps[0])), "{e}");
    assert!(fake.waits().is_empty(), "{:?}", fake.waits());
    let empty = tempfile::tempdir().unwrap();
    let e = Credentials::load(&NodeFs::new(empty.path()), CERTS_DIR, etcd::HEALTHCHECK_CLIENT).err().unwrap();
    assert_eq!(
        e.to_string(),
        "/etc/kubernetes/pki/etcd/ca.crt is missing; run the certs phase first (it writes the etcd client certificates)"
    );
    assert_eq!(kubestrap::error::Error::from(e).kind.exit_code(), 2);

    // Nothing listening is waited on (etcd may come up), then named.
    let fake = FakeClock::new();
    let e = kubestrap::error::Error::from(
        etcd::connect(&["https://127.0.0.9:1".to_string()], &n2.creds(), &fake).err().unwrap(),
    );
    assert!(e.message.contains("connection refused (is etcd up?)") && e.message.contains("gave up after 120s"), "{e}");
    // JoinConfiguration's timeouts.etcdAPICall bounds it instead when set.
    let fake = FakeClock::new();
    let eps = ["https://127.0.0.9:1".to_string()];
    let e = etcd::connect_recording(&eps, &n2.creds(), None, Duration::from_secs(300), &fake).err().unwrap();
    assert!(e.to_string().contains("gave up after 300s"), "{e}");
}
