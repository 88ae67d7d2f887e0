//! A join storm on the real control plane: N workers run `kubestrap join` at once (no kubelet:
//! kubestrap does the TLS bootstrap itself), each into its own root. N is 6, or
//! KUBESTRAP_STORM_NODES (bench/join-storm.sh runs 100); KUBESTRAP_STORM_PARALLEL joins run at
//! a time (default 10). Prints the join wall times and the API server's request counts.
//! KUBESTRAP_STORM_CM_QPS=Q gives the controller-manager `kube-api-qps` Q and `kube-api-burst`
//! 2Q (its CSR approver and signer share the default 20/30: bench/join-storm.sh compares).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::cluster::*;
use crate::common::*;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(default)
}

/// The request counters of `/metrics`: `name{labels} value` lines of the wanted metrics.
fn counters(c: &Cluster) -> BTreeMap<String, f64> {
    let (code, out, err) = c.kubectl(&["get", "--raw", "/metrics"]);
    assert_eq!(code, 0, "metrics: {err}");
    out.lines()
        .filter(|l| {
            l.starts_with("apiserver_request_total{")
                || l.starts_with("apiserver_flowcontrol_dispatched_requests_total{")
        })
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// One label's value in a metric key.
fn label<'a>(key: &'a str, name: &str) -> &'a str {
    let pat = format!("{name}=\"");
    key.find(&pat).map(|i| &key[i + pat.len()..]).and_then(|r| r.split('"').next()).unwrap_or("")
}

/// The file a (possibly absolute) symlink under `root` names, inside `root`.
fn resolve(root: &Path, link: &Path) -> PathBuf {
    match std::fs::read_link(link) {
        Ok(t) if t.is_absolute() => at(root, t.to_str().expect("utf-8 link")),
        Ok(t) => link.parent().unwrap().join(t),
        Err(_) => link.to_path_buf(),
    }
}

/// kubestrap join of one worker with the test token, no kubelet.
fn join_run(netns: &super::net::Netns, endpoint: &str, hash: &str, name: &str, root: &str) -> Run {
    let args = ["join", endpoint, "--token", TOKEN, "--discovery-token-ca-cert-hash", hash, "--node-name", name];
    run_in(netns, &[&args[..], &["--root", root]].concat())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

#[test]
fn join_storm() {
    let n = env_usize("KUBESTRAP_STORM_NODES", 6);
    let parallel = env_usize("KUBESTRAP_STORM_PARALLEL", 10).min(n);
    // Further controller-manager flags go after the fixture's cluster-signing-duration entry.
    let signing = match std::env::var("KUBESTRAP_STORM_CM_QPS").ok().and_then(|q| q.parse::<u32>().ok()) {
        Some(q) => format!(
            "24h\n  - name: kube-api-qps\n    value: \"{q}\"\n  - name: kube-api-burst\n    value: \"{}\"",
            2 * q
        ),
        None => "24h".to_string(),
    };
    let c = Cluster::init(&signing);
    let kcm = std::fs::read_to_string(at(&c.root(), "/etc/kubernetes/manifests/kube-controller-manager.yaml"))
        .expect("the controller-manager's manifest");
    let qps = kcm.lines().find_map(|l| l.trim().strip_prefix("- --kube-api-qps=")).unwrap_or("20 (default)");
    // Join needs cluster-info signed for the token.
    c.wait_cluster_info_signed();
    let (endpoint, hash) = (format!("{CP_ADDR}:{}", c.port), c.ca_hash());
    let roots: Vec<Scratch> = (0..n).map(|_| Scratch::new("")).collect();

    let netns = &c.netns;
    let before = counters(&c);
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..parallel {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let (name, root) = (format!("worker-{i}"), roots[i].root_str());
                    let t = Instant::now();
                    let run = join_run(netns, &endpoint, &hash, &name, &root);
                    let took = t.elapsed();
                    results.lock().unwrap().push((i, took, run));
                }
            });
        }
    });
    let storm = start.elapsed();
    let after = counters(&c);

    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|r| r.0);
    for (i, _, run) in &results {
        assert_eq!(run.code(), 0, "worker-{i} join failed:\n{}\n{}", run.stdout(), run.stderr());
    }

    // Each worker has its own node identity.
    let mut subjects = BTreeSet::new();
    let mut certs = BTreeSet::new();
    for (i, r) in roots.iter().enumerate() {
        let link = r.path("/var/lib/kubelet/pki/kubelet-client-current.pem");
        let pem = resolve(&r.root(), &link);
        let (code, out, err) = capture(
            std::process::Command::new("openssl")
                .args(["x509", "-noout", "-subject", "-nameopt", "RFC2253", "-in"])
                .arg(&pem),
        );
        assert_eq!(code, 0, "worker-{i}: {}: {err}", pem.display());
        let subject = out.trim().trim_start_matches("subject=").to_string();
        assert_eq!(subject, format!("CN=system:node:worker-{i},O=system:nodes"), "worker-{i}");
        subjects.insert(subject);
        certs.insert(std::fs::read(&pem).unwrap());
        assert!(r.path("/etc/kubernetes/kubelet.conf").is_file(), "worker-{i}: no kubelet.conf");
    }
    assert_eq!(subjects.len(), n, "distinct subjects");
    assert_eq!(certs.len(), n, "distinct certificates");

    // At most one CSR per worker (10% slack for a retried one).
    let bootstrap = c.bootstrap_csrs().len();
    assert!(bootstrap as f64 <= 1.1 * n as f64, "{bootstrap} bootstrap CSRs for {n} joins");

    let mut times: Vec<Duration> = results.iter().map(|r| r.1).collect();
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "join storm: {n} joins, {parallel} at a time, {:.0} ms in all ({:.1} joins/s; controller-manager kube-api-qps \
         {qps}); {bootstrap} bootstrap CSRs",
        ms(storm),
        n as f64 / storm.as_secs_f64()
    );
    println!(
        "join wall ms: p50 {:.0}  p99 {:.0}  max {:.0}",
        ms(percentile(&times, 0.5)),
        ms(percentile(&times, 0.99)),
        ms(times[times.len() - 1])
    );

    // Requests the API server counted during the storm; every component's are in them, the
    // joins' (anonymous + system:bootstrappers) are the global-default flow schema's.
    report("the storm", n, &before, &after);

    // One join alone, then one real kubeadm join (all but kubelet-wait-bootstrap: no kubelet
    // here to do the TLS bootstrap), each counted the same way.
    let solo = Scratch::new("");
    let before = counters(&c);
    let run = join_run(netns, &endpoint, &hash, "solo", &solo.root_str());
    assert_eq!(run.code(), 0, "solo join:\n{}", run.stderr());
    report("one kubestrap join", 1, &before, &counters(&c));

    let kubeadm = super::bins::bin("kubeadm");
    let script = format!(
        "mount -t tmpfs none /etc/kubernetes && mount -t tmpfs none /var/lib/kubelet && exec {} join {endpoint} \
         --token {TOKEN} --discovery-token-ca-cert-hash {hash} --node-name kubeadm-1 \
         --cri-socket unix:///run/containerd/containerd.sock --skip-phases preflight,kubelet-wait-bootstrap",
        kubeadm.display()
    );
    let before = counters(&c);
    let (code, out, err) =
        capture(netns.command("unshare").args(["--mount", "--propagation", "private", "sh", "-c", &script]));
    assert_eq!(code, 0, "kubeadm join:\n{out}\n{err}");
    report("one kubeadm join without kubelet-wait-bootstrap", 1, &before, &counters(&c));
}

/// The counters' growth from `before` to `after`, in all and per join.
fn report(what: &str, n: usize, before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) {
    let (mut total, mut by_schema, mut by_call) = (0.0, BTreeMap::new(), BTreeMap::new());
    for (k, v) in after {
        let d = v - before.get(k).copied().unwrap_or(0.0);
        if d <= 0.0 {
            continue;
        }
        if k.starts_with("apiserver_request_total") {
            total += d;
            let call = format!("{} {} {}", label(k, "verb"), label(k, "resource"), label(k, "subresource"));
            *by_call.entry(call.trim().to_string()).or_insert(0.0) += d;
        } else {
            *by_schema.entry(label(k, "flow_schema").to_string()).or_insert(0.0) += d;
        }
    }
    let per = |d: f64| d / n as f64;
    println!("{what}: apiserver_request_total +{total} ({:.2} per join; every client's)", per(total));
    for (call, d) in &by_call {
        println!("  {call:<50} {d:>6} ({:.2} per join)", per(*d));
    }
    println!("{what}: apiserver_flowcontrol_dispatched_requests_total by flow schema:");
    for (schema, d) in &by_schema {
        println!("  {schema:<50} {d:>6} ({:.2} per join)", per(*d));
    }
}
