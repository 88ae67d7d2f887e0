//! The upgrade Lease (`kube-system/kubestrap-upgrade`) on the real API server, with the holders'
//! clocks skewed ±90 s (a clock seam): a dead holder whose clock was behind is not robbed at once,
//! one whose clock was ahead does not block for the skew, two racing nodes never hold it at once,
//! a holder that loses it is fenced before its next step, and a release never deletes a
//! successor's record. Run inside an existing cluster's test (one API server per lifecycle).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use kubestrap::clock::Clock;
use kubestrap::kube::Client;
use kubestrap::upgrade::lease;
use serde_json::json;

use super::cluster::Cluster;

const PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kubestrap-upgrade";
const COLLECTION: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";

/// The real clock, its wall time moved by `skew` seconds (a node whose clock is off).
struct Skewed(i64);
impl Clock for Skewed {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn sleep(&self, d: Duration, _why: &str) {
        std::thread::sleep(d);
    }
    fn wall(&self) -> time::OffsetDateTime {
        time::OffsetDateTime::now_utc() + time::Duration::seconds(self.0)
    }
}

fn stamp(t: time::OffsetDateTime) -> String {
    let f = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");
    t.format(&f).unwrap()
}

/// A Lease left by a dead `holder` whose clock was `skew` s off, lasting `secs`.
fn dead_holder(client: &Client, holder: &str, skew: i64, secs: u64) {
    let _ = client.delete(PATH);
    let t = stamp(time::OffsetDateTime::now_utc() + time::Duration::seconds(skew));
    let l = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "kubestrap-upgrade", "namespace": "kube-system"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": secs, "acquireTime": t, "renewTime": t}});
    let (code, body) = client.request("POST", COLLECTION, Some(("application/json", &l))).unwrap();
    assert_eq!(code, 201, "{body}");
}

fn holder(client: &Client) -> Option<String> {
    client.get(PATH).unwrap().and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string))
}

/// Runs `f` with a client of the cluster's admin.conf, on a thread inside the cluster's network
/// namespace (where its API server's address is).
fn in_cluster<T: Send>(c: &Cluster, f: impl FnOnce(Client) -> T + Send) -> T {
    let kc = kubestrap::kubeconfig::Kubeconfig::parse(&std::fs::read(c.admin_conf()).unwrap()).unwrap();
    let ns = std::fs::File::open(format!("/run/netns/{}", c.netns.name)).unwrap();
    std::thread::scope(|s| {
        s.spawn(move || {
            nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            let client = Client::from_kubeconfig(&kc, &|p| std::fs::read(p).ok(), Duration::from_secs(10)).unwrap();
            f(client)
        })
        .join()
        .unwrap()
    })
}

pub fn holds_under_skew_and_loss(c: &Cluster) {
    in_cluster(c, |client| {
        let quiet = |_: &str| {};
        // Dead, its clock 90 s behind: its renewTime looks 90 s old, yet it is waited out for its
        // 3 s from when this node first saw it (judged by renewTime it would be taken at once).
        dead_holder(&client, "behind", -90, 3);
        let t = Instant::now();
        lease::acquire(&client, "cp-a", &Skewed(90), Duration::from_secs(30), &quiet).unwrap();
        let waited = t.elapsed();
        assert!(waited >= Duration::from_secs(3), "took a live-looking lease after {waited:?}");
        assert_eq!(holder(&client).as_deref(), Some("cp-a"));
        lease::release(&client, "cp-a");
        assert_eq!(holder(&client), None, "released");
        // Dead, its clock 90 s ahead: taken after its 3 s, not after 93 s (the wait allows 15 s).
        dead_holder(&client, "ahead", 90, 3);
        let t = Instant::now();
        lease::acquire(&client, "cp-a", &Skewed(-90), Duration::from_secs(15), &quiet).unwrap();
        assert!(t.elapsed() < Duration::from_secs(12), "{:?}", t.elapsed());
        // Its own next boot takes it back at once.
        let t = Instant::now();
        lease::acquire(&client, "cp-a", &Skewed(0), Duration::from_secs(5), &quiet).unwrap();
        assert!(t.elapsed() < Duration::from_secs(2));
        lease::release(&client, "cp-a");

        // Two nodes, clocks 180 s apart, each taking it three times: never two holders.
        let spans: Mutex<Vec<(&str, Instant, Instant)>> = Mutex::new(Vec::new());
        let kc = kubestrap::kubeconfig::Kubeconfig::parse(&std::fs::read(c.admin_conf()).unwrap()).unwrap();
        std::thread::scope(|s| {
            for (me, skew) in [("cp-b", 90), ("cp-c", -90)] {
                let (spans, kc) = (&spans, &kc);
                s.spawn(move || {
                    // Threads inherit the namespace of the thread that spawned them.
                    let client =
                        Client::from_kubeconfig(kc, &|p| std::fs::read(p).ok(), Duration::from_secs(10)).unwrap();
                    for _ in 0..3 {
                        lease::acquire(&client, me, &Skewed(skew), Duration::from_secs(60), &|_| {}).unwrap();
                        let start = Instant::now();
                        assert_eq!(holder(&client).as_deref(), Some(me));
                        std::thread::sleep(Duration::from_millis(700));
                        assert_eq!(holder(&client).as_deref(), Some(me), "{me} lost it while holding it");
                        let end = Instant::now();
                        lease::release(&client, me);
                        spans.lock().unwrap().push((me, start, end));
                    }
                });
            }
        });
        let mut spans = spans.into_inner().unwrap();
        spans.sort_by_key(|s| s.1);
        assert_eq!(spans.len(), 6);
        for w in spans.windows(2) {
            assert!(w[0].2 <= w[1].1, "{} and {} held it at once", w[0].0, w[1].0);
        }

        // A holder that loses it (another node took it) is fenced at its next renewal, and its
        // release leaves the successor's record alone.
        lease::acquire(&client, "cp-d", &Skewed(0), Duration::from_secs(5), &quiet).unwrap();
        assert!(lease::fence("etcd").is_ok());
        let mut l = client.get(PATH).unwrap().unwrap();
        l["spec"]["holderIdentity"] = json!("thief");
        let (code, body) = client.request("PUT", PATH, Some(("application/json", &l))).unwrap();
        assert_eq!(code, 200, "{body}");
        let done = std::sync::atomic::AtomicBool::new(false);
        let t = Instant::now();
        lease::keep(&client, "cp-d", &done);
        assert!(t.elapsed() <= lease::RENEW + Duration::from_secs(2), "keep returned once it found the thief");
        let e = lease::fence("kube-apiserver").unwrap_err().to_string();
        assert!(e.contains("thief holds it") && e.contains("stopping before kube-apiserver"), "{e}");
        lease::release(&client, "cp-d");
        assert_eq!(holder(&client).as_deref(), Some("thief"), "the loser's release deleted its successor's lease");
        let _ = client.delete(PATH);
    });
}
