//! kubestrap beside the real kubeadm v1.37.2, on the real components and the same config: a
//! control plane inited by each (the whole init, and to its Node Ready), and on kubestrap's
//! cluster a worker joined by each (kubeadm's with the real kubelet's own TLS bootstrap), with
//! the API requests each made, from the API server's audit log. The figures are printed;
//! bench/real-peers.sh runs this several times for medians.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::cluster::*;
use super::join_parity::kubeadm_join;
use crate::common::*;

/// The API server writes every request to an audit log under cp-1's /etc/kubernetes.
pub(super) const AUDIT: &str = "apiServer:
  extraArgs:
  - name: audit-policy-file
    value: /etc/kubernetes/audit/policy.yaml
  - name: audit-log-path
    value: /etc/kubernetes/audit/audit.log
  extraVolumes:
  - name: audit
    hostPath: /etc/kubernetes/audit
    mountPath: /etc/kubernetes/audit
    pathType: DirectoryOrCreate
";
/// Every request, once, when its response is complete (the log backend writes it, blocking,
/// before the response ends: a client that has read its answer finds the event logged).
pub(super) const POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
";

/// The audit log's complete events (a line being appended as it is read is left out).
pub(super) fn audit(c: &Cluster) -> Vec<Value> {
    let log = std::fs::read_to_string(at(&c.root(), "/etc/kubernetes/audit/audit.log")).expect("audit log");
    let mut lines: Vec<&str> = log.split('\n').collect();
    lines.pop(); // after the last newline: empty, or a partial line
    lines.iter().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("audit event ({e}): {l}"))).collect()
}

/// Requests whose user agent starts with `agent`; their lines (verb, URI, code) are kept in
/// the cluster's log directory as `requests-<agent>.txt`.
fn by_agent(c: &Cluster, events: &[Value], agent: &str) -> usize {
    let mine: Vec<&Value> =
        events.iter().filter(|e| e["userAgent"].as_str().is_some_and(|a| a.starts_with(agent))).collect();
    let lines: String =
        mine.iter().map(|e| format!("{} {} {}\n", e["verb"], e["requestURI"], e["responseStatus"]["code"])).collect();
    let file = c.logs.join(format!("requests-{}.txt", agent.trim_end_matches('/')));
    std::fs::write(&file, lines).expect("requests file");
    println!("peers: {agent} requests listed in {}", file.display());
    mine.len()
}

/// A joining node's requests: from its address, before it has a node identity (anonymous
/// discovery, then the bootstrap token: the join's own and, after kubeadm, its kubelet's).
fn joining(events: &[Value], ip: &str) -> usize {
    let before_identity = |e: &&Value| {
        let user = e["user"]["username"].as_str().unwrap_or("");
        user == "system:anonymous" || user.starts_with("system:bootstrap:")
    };
    events.iter().filter(|e| e["sourceIPs"][0] == ip).filter(before_identity).count()
}

fn init(tool: Tool) -> (Cluster, Duration) {
    let t = Instant::now();
    let c = Cluster::init_by(tool, "24h", AUDIT, &[], &[("/etc/kubernetes/audit/policy.yaml", POLICY)]);
    (c, t.elapsed())
}

/// The ClusterRoleBinding `kubeadm:cluster-admins` as stored: labels, annotations, roleRef,
/// subjects.
fn cluster_admins(c: &Cluster) -> Value {
    let o = c.get(&["clusterrolebinding", "kubeadm:cluster-admins"]);
    serde_json::json!({
        "labels": o["metadata"]["labels"], "annotations": o["metadata"]["annotations"],
        "roleRef": o["roleRef"], "subjects": o["subjects"],
    })
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

#[test]
fn init_and_join_beside_kubeadm() {
    let (mut c, ks_ready) = init(Tool::Kubestrap);
    let ks_init = (c.wall, by_agent(&c, &audit(&c), "kubestrap/"));
    c.wait_cluster_info_signed();

    let t = Instant::now();
    let r = c.join("worker-1", 21, fixture!("real/join.yaml"), &[]);
    let ks_join = t.elapsed();
    assert_eq!(r.code(), 0, "{}\n{}", r.stderr(), c.status());
    c.wait_ready("worker-1");
    let ks_join_ready = t.elapsed();

    let t = Instant::now();
    let r = kubeadm_join(&mut c, "worker-2", 22, fixture!("real/join.yaml"));
    let ka_join = t.elapsed();
    assert_eq!(r.code(), 0, "kubeadm join:\n{}\n{}\n{}", r.stdout(), r.stderr(), c.status());
    c.wait_ready("worker-2");
    let ka_join_ready = t.elapsed();
    let events = audit(&c);
    let (ks_join_n, ka_join_n) = (joining(&events, &addr(21)), joining(&events, &addr(22)));
    let ks_admins = cluster_admins(&c);
    drop(c);

    let (c, ka_ready) = init(Tool::Kubeadm);
    let ka_init = (c.wall, by_agent(&c, &audit(&c), "kubeadm/"));
    assert!(c.init.stdout().contains("Your Kubernetes control-plane has initialized successfully"));
    // kubeadm's dry run cannot show this binding (tests/parity/allow.rs): the real one is compared.
    assert_eq!(ks_admins, cluster_admins(&c), "ClusterRoleBinding kubeadm:cluster-admins");
    drop(c);

    for n in [ks_init.1, ka_init.1, ks_join_n, ka_join_n] {
        assert!(n > 0, "the audit log counted no request");
    }
    println!("peers: the whole command, then to Node Ready; API requests from the audit log");
    println!(
        "peers: init  kubestrap {:.2} s, Ready {:.2} s, {} requests | kubeadm {:.2} s, Ready {:.2} s, {} requests",
        secs(ks_init.0),
        secs(ks_ready),
        ks_init.1,
        secs(ka_init.0),
        secs(ka_ready),
        ka_init.1
    );
    println!(
        "peers: join  kubestrap {:.2} s, Ready {:.2} s, {} requests | kubeadm + kubelet {:.2} s, Ready {:.2} s, {} requests",
        secs(ks_join),
        secs(ks_join_ready),
        ks_join_n,
        secs(ka_join),
        secs(ka_join_ready),
        ka_join_n
    );
}
