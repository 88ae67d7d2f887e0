//! Join parity with the real kubeadm v1.37.2, against one real cluster: a worker and a control
//! plane joined by `kubestrap join`, and a twin of each joined by `kubeadm join` from the same
//! JoinConfiguration (its fixed paths bound over the node root in a mount namespace of its own;
//! its kubelet does the TLS bootstrap, as after kubeadm). Every twin's Node goes Ready; then
//! their files are compared fact by fact (tests/parity/facts.rs) with the twin's name and
//! address swapped for ours, and their Nodes' labels and taints. A difference not on the
//! allow-list (tests/parity/allow.rs) fails the test. The workers are then upgraded by each
//! tool's `upgrade node`, and a v1.36.3 worker in place (tests/real/upgrade_node.rs); the two
//! tools' `upgrade diff` are compared on cp-2 (tests/real/upgrade_diff.rs).

use std::path::Path;

use super::cluster::*;
use crate::common::*;
use crate::facts::{self, Facts};

pub fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() as i64
}

/// `kubeadm join --config` on a new node `name` at `addr(i)` rooted in a fresh scratch dir; its
/// kubelet starts on bootstrap-kubelet.conf and makes its identity itself.
pub fn kubeadm_join(c: &mut Cluster, name: &str, i: usize, template: &str) -> Run {
    kubeadm_join_with(c, name, i, template, &[])
}

/// [`kubeadm_join`] on a root where `files` (node path, content) are written first.
pub fn kubeadm_join_with(c: &mut Cluster, name: &str, i: usize, template: &str, files: &[(String, &str)]) -> Run {
    let w = Scratch::new("");
    for (path, text) in files {
        write_file(&at(&w.root(), path), text);
    }
    std::fs::write(w.config(), c.fill_node(template, name, i, &w.root())).unwrap();
    let (root, config) = (w.root(), w.config());
    c.node_with(name, i, w, true, |c, host, logs| {
        let args = ["join", "--config", &config, "--ignore-preflight-errors=all"];
        run_kubeadm(&host.netns, &root, logs, &args, &|| c.health().and_then(|_| host.health()))
    })
}

/// kubeadm mounts the host's CA bundle directories that exist; kubestrap looks under its
/// --root: the same directories under `root`, so both control planes mount the same.
pub fn host_ca_dirs(root: &Path) {
    for d in facts::CA_DIRS.iter().filter(|d| Path::new("/").join(d).is_dir()) {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
}

/// The facts of what a join writes: /etc/kubernetes, the kubelet's files and identity (not the
/// etcd data directory: the harness makes kubeadm's to bind it; tests/real/ha.rs checks ours is
/// 0700, as kubeadm's MkdirAll makes it); `name` and `ip` become `ours` and `our_ip`, and the kubelet's dated
/// certificate file names lose their dates.
fn join_facts(root: &Path, started: i64, (name, ip): (&str, &str), (ours, our_ip): (&str, &str)) -> Facts {
    let kept = [
        "etc/kubernetes/",
        "var/lib/kubelet/config.yaml",
        "var/lib/kubelet/kubeadm-flags.env",
        "var/lib/kubelet/instance-config.yaml",
        "var/lib/kubelet/pki/",
        "var/lib/kubestrap/",
    ];
    let norm = |s: &str| undated(&s.replace(name, ours).replace(ip, our_ip));
    let all: Facts = facts::node(root, started)
        .into_iter()
        .filter(|(k, _)| kept.iter().any(|p| k.starts_with(p)))
        .map(|(k, v)| (norm(&k), norm(&v)))
        .collect();
    expiry_in_hours(all)
}

/// "XhYm" as minutes.
fn minutes(s: &str) -> i64 {
    let (h, m) = s.trim_end_matches('m').split_once('h').expect("XhYm");
    h.parse::<i64>().expect("hours") * 60 + m.parse::<i64>().expect("minutes")
}

/// The twins joined a minute apart, and kubeadm backdates a leaf's notBefore to its CA's: a
/// certificate's validity and notBefore differ by when each node joined. What both must share
/// is when it expires, counted from the node's own start: that, to the hour, replaces the two.
fn expiry_in_hours(mut f: Facts) -> Facts {
    let certs: Vec<String> = f.keys().filter_map(|k| k.strip_suffix(" validity")).map(str::to_string).collect();
    for c in certs {
        let (Some(v), Some(nb)) =
            (f.remove(&format!("{c} validity")), f.remove(&format!("{c} notBefore before start")))
        else {
            continue;
        };
        let after = minutes(&v) - minutes(&nb);
        f.insert(format!("{c} notAfter after start"), format!("{}h", (after + 30).div_euclid(60)));
    }
    f
}

/// `kubelet-client-2026-11-25-18-30-00.pem` as `kubelet-client-DATE.pem`, and upgrade node's
/// `kubeadm-kubelet-config-2026-11-25-18-30-00` as `kubeadm-kubelet-config-DATE`.
fn undated(s: &str) -> String {
    let mut out = s.to_string();
    for prefix in ["kubelet-client-", "kubeadm-kubelet-config-"] {
        let (mut done, mut rest) = (String::new(), out.as_str());
        while let Some(i) = rest.find(prefix) {
            let after = &rest[i + prefix.len()..];
            let dated = after.get(..19).is_some_and(|d| d.bytes().all(|b| b.is_ascii_digit() || b == b'-'));
            done.push_str(&rest[..i]);
            done.push_str(prefix);
            if dated {
                done.push_str("DATE");
                rest = &after[19..];
            } else {
                rest = after;
            }
        }
        out = done + rest;
    }
    out
}

/// A Node's labels and taints as facts, with `name` and `ip` swapped for ours.
fn node_facts(c: &Cluster, node: &str, ours: &str) -> Facts {
    let n = c.get(&["node", node]);
    let mut out = Facts::new();
    facts::flatten(&n["metadata"]["labels"], "api Node labels", 0, &mut out);
    let taints: Vec<_> = n["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["key"] != "node.kubernetes.io/not-ready")
        .cloned()
        .collect();
    facts::flatten(&serde_json::Value::Array(taints), "api Node taints", 0, &mut out);
    out.into_iter().map(|(k, v)| (k, v.replace(node, ours))).collect()
}

/// Compares the twins: ours (kubestrap, `ours` at `addr(a)`) and kubeadm's (`twin` at `addr(b)`).
pub fn compare(c: &Cluster, what: &str, (ours, a): (&str, usize), (twin, b): (&str, usize), started: (i64, i64)) {
    let host = |n: &str| c.hosts.iter().find(|h| h.name == n).expect("host");
    let (ip_a, ip_b) = (addr(a), addr(b));
    let mut theirs = join_facts(&host(twin).root, started.1, (twin, &ip_b), (ours, &ip_a));
    let mut mine = join_facts(&host(ours).root, started.0, (ours, &ip_a), (ours, &ip_a));
    theirs.extend(node_facts(c, twin, ours));
    mine.extend(node_facts(c, ours, ours));
    // etcd's --initial-cluster is the members so far, in etcd's order (by member ID, random), as
    // kubeadm takes them from MemberAddAsLearner's reply: compared as sets. The twin joined after us.
    let initial = "etc/kubernetes/manifests/etcd.yaml spec.containers[etcd].command --initial-cluster";
    if let (Some(t), Some(m)) = (theirs.remove(initial), mine.remove(initial)) {
        let me = format!("{ours}=https://{ip_a}:2380");
        let sorted = |s: &str| {
            let mut v: Vec<String> = s.split(',').map(str::to_string).collect();
            v.sort();
            v
        };
        let cp1 = format!("cp-1=https://{CP_ADDR}:2380");
        assert_eq!(sorted(&m), sorted(&format!("{cp1},{me}")));
        assert_eq!(
            sorted(&t),
            sorted(&format!("{cp1},{me},{me}")),
            "kubeadm's twin: every member (itself named as ours)"
        );
    }
    assert!(theirs.keys().any(|k| k.starts_with("var/lib/kubelet/config.yaml")), "kubeadm wrote no config.yaml");
    let (n, report) = crate::diff::compare(what, &theirs, &mine);
    println!("{report}");
    assert_eq!(n, 0, "{report}");
}

#[test]
fn kubestrap_join_and_kubeadm_join_make_the_same_nodes() {
    let mut c = Cluster::init_with("24h", "controlPlaneEndpoint: 192.0.2.10:{port}\n", &["--upload-certs"]);
    let out = c.init.stdout();
    let key = out.split_whitespace().skip_while(|w| *w != "--certificate-key").nth(1).expect("key").to_string();
    c.wait_cluster_info_signed();

    let worker = fixture!("real/join.yaml");
    let t = (now(), 0);
    let r = c.join("worker-1", 21, worker, &[]);
    assert_eq!(r.code(), 0, "{}\n{}", r.stderr(), c.status());
    let t = (t.0, now());
    let r = kubeadm_join(&mut c, "worker-2", 22, worker);
    assert_eq!(r.code(), 0, "kubeadm join:\n{}\n{}\n{}", r.stdout(), r.stderr(), c.status());
    c.wait_ready("worker-1");
    c.wait_ready("worker-2");
    compare(&c, "join-worker", ("worker-1", 21), ("worker-2", 22), t);
    super::upgrade_node::join_older_worker(&mut c, "worker-3", 23);
    super::upgrade_node::upgrade_workers(&c, ("worker-1", 21), ("worker-2", 22), t);
    super::upgrade_node::upgrade_in_place(&mut c, "worker-3");

    let cp = fixture!("real/join-control-plane.yaml").replace("{key}", &key);
    let t = (now(), 0);
    let w = Scratch::new("");
    host_ca_dirs(&w.root());
    std::fs::write(w.config(), c.fill_node(&cp, "cp-2", 1, &w.root())).unwrap();
    let args = ["join", "--config", &w.config(), "--root", &w.root_str()].map(str::to_string).to_vec();
    let r = c.node("cp-2", 1, w, &[args]).remove(0);
    assert_eq!(r.code(), 0, "{}\n{}", r.stderr(), c.status());
    let t = (t.0, now());
    let r = kubeadm_join(&mut c, "cp-3", 2, &cp);
    assert_eq!(r.code(), 0, "kubeadm join --control-plane:\n{}\n{}\n{}", r.stdout(), r.stderr(), c.status());
    c.wait_ready("cp-2");
    c.wait_ready("cp-3");
    compare(&c, "join-control-plane", ("cp-2", 1), ("cp-3", 2), t);
    super::upgrade_diff::diff_beside_kubeadm(&c, "cp-2");
}
