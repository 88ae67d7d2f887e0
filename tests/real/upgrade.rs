//! Upgrade by replacement, as Cluster API's KubeadmControlPlane and MachineDeployments roll a
//! cluster to the next minor, on the real components of both versions: three v1.36.3 control
//! planes and a worker made by kubestrap; `kubeadm-config`'s `kubernetesVersion` set to v1.37.2
//! (KCP does this before rolling); then, one at a time, a v1.37.2 control plane joins (its etcd a
//! learner, promoted), the load balancer in front of the API drains an old one, and it leaves
//! (`kubestrap reset` removes its etcd member, its Node is deleted); the v1.36.3 worker (kubelet
//! one minor older than the API server: allowed skew) stays Ready until a v1.37.2 worker
//! replaces it. A client polling the API through the load balancer every 200 ms throughout
//! reports its longest gap.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::availability::Monitor;
use super::bins;
use super::cluster::*;
use super::front::Balancer;
use super::ha_checks::check_first_join_log;
use super::host::Host;
use super::net::Netns;
use crate::common::*;

const OLD: &str = "v1.36.3";
const NEW: &str = "v1.37.2";

/// `/version`'s gitVersion as the API server at `ip` answers it (asked in `netns`, with the
/// cluster's CA).
pub(super) fn api_version(c: &Cluster, netns: &Netns, ip: &str) -> String {
    let url = format!("https://{ip}:{}/version", c.port);
    let ca = c.scratch.pki("ca.crt");
    let (code, out, err) = capture(netns.command("curl").args(["-s", "--max-time", "5", "--cacert"]).arg(ca).arg(&url));
    assert_eq!(code, 0, "{url}: {err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{url}: {e}: {out}"));
    v["gitVersion"].as_str().expect("gitVersion").to_string()
}

/// [`api_version`] for a wait: `None` while the API server at `ip` does not answer a version
/// (restarting: refused, or a status that is not `/version`'s).
pub(super) fn api_version_now(c: &Cluster, netns: &Netns, ip: &str) -> Option<String> {
    let url = format!("https://{ip}:{}/version", c.port);
    let ca = c.scratch.pki("ca.crt");
    let (code, out, _) = capture(netns.command("curl").args(["-s", "--max-time", "5", "--cacert"]).arg(ca).arg(&url));
    let v: Value = serde_json::from_str(&out).ok()?;
    (code == 0).then(|| v["gitVersion"].as_str().map(str::to_string)).flatten()
}

/// The kubelet version a Node reports (its kubelet's own, in `status.nodeInfo`).
fn kubelet_version(c: &Cluster, node: &str) -> String {
    c.get(&["node", node])["status"]["nodeInfo"]["kubeletVersion"].as_str().expect("kubeletVersion").to_string()
}

const COMPONENTS: [&str; 4] = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"];

/// The image tags of a node's control-plane manifests, by component.
pub(super) fn tags(root: &Path) -> Vec<(&'static str, String)> {
    let tag = |n| super::static_pods::StaticPod::read(root, n).image().rsplit(':').next().unwrap().to_string();
    COMPONENTS.iter().map(|n| (*n, tag(n))).collect()
}

/// What a control plane of Kubernetes `v` runs: kubeadm 1.37 pins etcd 3.7.0-0 for 1.35–1.37.
pub(super) fn want_tags(v: &str) -> Vec<(&'static str, String)> {
    COMPONENTS.iter().map(|n| (*n, if *n == "etcd" { "3.7.0-0" } else { v }.to_string())).collect()
}

/// The etcd members as node `i`'s own etcd reports them (its healthcheck client):
/// (name, is_learner).
fn members(c: &Cluster, i: usize) -> Vec<(String, bool)> {
    let out = etcdctl(c, i, &["member", "list", "-w", "json"]);
    let v: Value = serde_json::from_str(&out).expect("member list json");
    let list = v["members"].as_array().expect("members").iter();
    list.map(|m| (m["name"].as_str().unwrap_or("").to_string(), m["isLearner"].as_bool().unwrap_or(false))).collect()
}

/// The real etcdctl against node `i`'s local etcd; its stdout, which must succeed.
fn etcdctl(c: &Cluster, i: usize, args: &[&str]) -> String {
    let h = &c.hosts[i];
    let pki = at(&h.root, "/etc/kubernetes/pki/etcd");
    let mut cmd = h.netns.command(bins::bin("etcdctl"));
    cmd.args(["--endpoints", "https://127.0.0.1:2379", "--cacert"]).arg(pki.join("ca.crt"));
    cmd.arg("--cert").arg(pki.join("healthcheck-client.crt")).arg("--key").arg(pki.join("healthcheck-client.key"));
    let (code, out, err) = capture(cmd.args(args));
    assert_eq!(code, 0, "etcdctl {args:?} on {}: {err}", h.name);
    out
}

/// Some(()) once Lease `namespace/name` was renewed after `t`.
fn renewed_after(c: &Cluster, namespace: &str, name: &str, t: time::OffsetDateTime) -> Option<()> {
    let lease = c.get(&["-n", namespace, "lease", name]);
    let renewed = lease["spec"]["renewTime"].as_str()?;
    let at = time::OffsetDateTime::parse(renewed, &time::format_description::well_known::Rfc3339).ok()?;
    (at > t).then_some(())
}

fn ip(netns: &Netns, args: &str) {
    let (code, out, err) = sh(&format!("ip -n {} {args}", netns.name));
    assert_eq!(code, 0, "ip -n {} {args}: {out}{err}", netns.name);
}

/// The index of host `name` in the cluster.
fn host(c: &Cluster, name: &str) -> usize {
    c.hosts.iter().position(|h| h.name == name).unwrap_or_else(|| panic!("no host {name}"))
}

/// The etcd voters (no learner left) as node `name`'s etcd lists them, sorted, once there are
/// `n`.
fn voters(c: &Cluster, name: &str, n: usize) -> Vec<String> {
    c.wait(&format!("{n} etcd voters"), || {
        let m = members(c, host(c, name));
        let mut names: Vec<String> = m.iter().map(|(n, _)| n.clone()).collect();
        names.sort();
        (m.len() == n && m.iter().all(|(_, learner)| !learner)).then_some(names)
    })
}

/// `kubestrap reset --force` on the running node `name`, which then leaves the cluster's hosts.
/// Returns what reset said and the host, to power off.
fn reset_node(c: &mut Cluster, name: &str) -> (String, Host) {
    let i = host(c, name);
    let root = c.hosts[i].root.display().to_string();
    let reset = run_in(&c.hosts[i].netns, &["reset", "--force", "--root", &root]);
    assert_eq!(reset.code(), 0, "{name} reset:\n{}\n{}", reset.stdout(), reset.stderr());
    (format!("{}{}", reset.stdout(), reset.stderr()), c.hosts.remove(i))
}

/// Deletes Node `name` (as Cluster API deletes the Machine).
fn delete_node(c: &Cluster, name: &str) {
    let (code, _, err) = c.kubectl(&["delete", "node", name]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn three_control_planes_and_a_worker_replaced_by_the_next_minor() {
    let started = Instant::now();
    // cp-1: kubestrap init at v1.36.3, its node image's kubelet v1.36.3 (the harness runs the
    // kubelet of the config's version, the static Pods of their images' versions). The endpoint
    // is cp-1's address, which the nodes' kubelets use directly (it moves when cp-1 leaves, as
    // kube-vip's would); the test's clients reach it through a load balancer.
    let template =
        fixture!("real/init.yaml").replace("kubernetesVersion: v1.37.2", &format!("kubernetesVersion: {OLD}"));
    assert!(template.contains(OLD));
    let endpoint = format!("controlPlaneEndpoint: {CP_ADDR}:{{port}}\n");
    let mut c = Cluster::init_from(Tool::Kubestrap, &template, "24h", &endpoint, &["--upload-certs"], &[]);
    assert_eq!(c.version("cp-1"), OLD);
    assert_eq!(tags(&c.root()), want_tags(OLD), "cp-1's manifests");
    assert_eq!(api_version(&c, &c.netns, CP_ADDR), OLD, "cp-1's real API server");
    assert_eq!(kubelet_version(&c, "cp-1"), OLD);
    c.wait_probes(0);
    let out = c.init.stdout();
    let key = out.split_whitespace().skip_while(|w| *w != "--certificate-key").nth(1).expect("key").to_string();
    c.wait_cluster_info_signed();
    let join_cp = fixture!("real/join-control-plane.yaml").replace("{key}", &key);

    // Two more v1.36.3 control planes and a v1.36.3 worker.
    for (name, i) in [("cp-2", 1), ("cp-3", 2)] {
        c.set_version(name, OLD);
        let run = c.join(name, i, &join_cp, &[]);
        assert_eq!(run.code(), 0, "{name} join:\n{}\n{}\n{}", run.stdout(), run.stderr(), c.status());
        c.wait_ready(name);
    }
    assert_eq!(voters(&c, "cp-1", 3), ["cp-1", "cp-2", "cp-3"]);
    c.set_version("worker-1", OLD);
    let run = c.join("worker-1", 20, fixture!("real/join.yaml"), &[]);
    assert_eq!(run.code(), 0, "worker-1 join:\n{}\n{}\n{}", run.stdout(), run.stderr(), c.status());
    c.wait_ready("worker-1");
    assert_eq!(kubelet_version(&c, "worker-1"), OLD);

    // A node whose kubelet is v1.37.2, newer than the v1.36.3 API server, is refused once
    // discovery has verified the cluster and before any of its files is written, the skew rule
    // named (its root's /usr/bin/kubelet is the one asked).
    let w = Scratch::new("");
    let root = w.root();
    std::fs::create_dir_all(root.join("usr/bin")).expect("usr/bin");
    std::os::unix::fs::symlink(bins::bin_of(NEW, "kubelet"), root.join("usr/bin/kubelet")).expect("kubelet");
    std::fs::write(w.config(), c.fill_node(fixture!("real/join.yaml"), "worker-9", 22, &root)).expect("config");
    let refused = run_in(&c.bare_node("worker-9", 22), &["join", "--config", &w.config(), "--root", &w.root_str()]);
    let err = refused.stderr();
    assert_eq!(refused.code(), 3, "{}\n{err}", refused.stdout());
    assert!(err.contains("[ERROR KubeletVersion]"), "{err}");
    assert!(
        err.contains(&format!("Kubelet version: \"{}\" Control plane version: \"{}\"", &NEW[1..], &OLD[1..])),
        "{err}"
    );
    for dir in ["etc/kubernetes", "var/lib/kubelet"] {
        let written: Vec<_> = std::fs::read_dir(root.join(dir)).map(|d| d.flatten().collect()).unwrap_or_default();
        assert!(written.is_empty(), "{dir} written by a refused join: {written:?}");
    }

    // The API's clients (the monitor, kubectl) from a client machine, through a load balancer
    // over the control planes.
    let (client, lb) = (Arc::new(c.bare_node("client", 30)), c.bare_node("lb", 31));
    let mut pool: Vec<String> = (0..3).map(addr).collect();
    let balancer = Balancer::start(&client, &lb, c.port, &pool);
    c.netns = client.clone();
    let admin = std::fs::read(c.admin_conf()).expect("admin.conf");
    let monitor = Monitor::start(&client, &admin, c.port);
    let rolling = Instant::now();

    // KCP's first step: the cluster's ClusterConfiguration names the next version.
    let cm = c.get(&["-n", "kube-system", "configmap", "kubeadm-config"]);
    let cluster_cfg = cm["data"]["ClusterConfiguration"].as_str().expect("ClusterConfiguration");
    let line = format!("kubernetesVersion: {OLD}\n");
    assert!(cluster_cfg.contains(&line), "{cluster_cfg}");
    let updated = cluster_cfg.replace(&line, &format!("kubernetesVersion: {NEW}\n"));
    c.set_config_data("kubeadm-config", serde_json::json!({ "ClusterConfiguration": updated }));

    // One control plane at a time: a v1.37.2 one joins (the cluster's new version in its
    // manifests, its etcd a learner promoted), the load balancer drains an old one, which leaves.
    let mut moved = time::OffsetDateTime::now_utc();
    for (k, (old, new)) in [("cp-1", "cp-4"), ("cp-2", "cp-5"), ("cp-3", "cp-6")].into_iter().enumerate() {
        c.set_version(new, NEW);
        let run = c.join(new, 3 + k, &join_cp, &[]);
        assert_eq!(run.code(), 0, "{new} join:\n{}\n{}\n{}", run.stdout(), run.stderr(), c.status());
        check_first_join_log(&run, &key, &addr(3 + k), c.port);
        let i = host(&c, new);
        assert_eq!(tags(&c.hosts[i].root), want_tags(NEW), "{new}'s manifests");
        c.wait_ready(new);
        c.wait_probes(i);
        assert_eq!(api_version(&c, &c.hosts[i].netns, &addr(3 + k)), NEW, "{new}'s real API server");
        assert_eq!(kubelet_version(&c, new), NEW);
        assert_eq!(voters(&c, new, 4).len(), 4);

        pool.retain(|a| *a != addr(k));
        pool.push(addr(3 + k));
        balancer.set_pool(&pool);
        let (said, gone) = reset_node(&mut c, old);
        if old == "cp-1" {
            // kubectl's admin.conf and the joins' CA, which the harness reads from cp-1's root
            // (its reset removed them), from cp-4's.
            let from = &c.hosts[host(&c, new)].root;
            for f in ["admin.conf", "pki/ca.crt"] {
                let to = c.scratch.path(&format!("/etc/kubernetes/{f}"));
                std::fs::create_dir_all(to.parent().expect("parent")).expect("dir");
                std::fs::copy(at(from, &format!("/etc/kubernetes/{f}")), &to).expect(f);
            }
        }
        delete_node(&c, old);
        let peer = format!("https://{}:2380", addr(k));
        assert!(said.contains(&format!("[reset] Removed etcd member {old} ({peer}); members now: ")), "{said}");
        let (gone_netns, _) = gone.power_off();
        if old == "cp-1" {
            // The endpoint address moves to cp-4 (a VIP's failover; the neighbours' caches
            // flushed as its gratuitous ARP would).
            ip(&gone_netns, &format!("addr del {CP_ADDR}/24 dev eth0"));
            ip(&c.hosts[host(&c, new)].netns, &format!("addr add {CP_ADDR}/32 dev eth0"));
            ip(&lb, "neigh flush all");
            for h in &c.hosts {
                ip(&h.netns, "neigh flush all");
            }
        }
        moved = time::OffsetDateTime::now_utc();
        let left = voters(&c, new, 3);
        assert!(!left.contains(&old.to_string()), "{old} is no member: {left:?}");
    }
    let rolled = rolling.elapsed();
    assert_eq!(voters(&c, "cp-6", 3), ["cp-4", "cp-5", "cp-6"]);

    // The cluster is v1.37.2's: every API server, the endpoint, etcd healthy, the add-ons'
    // objects there, kubeadm-config at the new version.
    for k in 3..6 {
        assert_eq!(api_version(&c, &c.netns, &addr(k)), NEW);
    }
    assert_eq!(api_version(&c, &c.hosts[0].netns, CP_ADDR), NEW, "the endpoint");
    let health = etcdctl(&c, host(&c, "cp-6"), &["endpoint", "health", "-w", "json"]);
    assert!(health.contains("\"health\":true"), "{health}");
    for obj in
        [["deployment", "coredns"], ["configmap", "coredns"], ["daemonset", "kube-proxy"], ["configmap", "kube-proxy"]]
    {
        let (code, _, err) = c.kubectl(&["-n", "kube-system", "get", obj[0], obj[1]]);
        assert_eq!(code, 0, "{obj:?}: {err}");
    }
    let cfg = c.get(&["-n", "kube-system", "configmap", "kubeadm-config"]);
    assert!(cfg["data"]["ClusterConfiguration"].as_str().unwrap().contains(&format!("kubernetesVersion: {NEW}\n")));
    // The v1.37.2 controller-manager and scheduler lead: their leases are renewed after the last
    // old control plane left.
    for lease in ["kube-controller-manager", "kube-scheduler"] {
        c.wait(&format!("the {lease} lease renewed by a new control plane"), || {
            renewed_after(&c, "kube-system", lease, moved)
        });
    }

    // The v1.36.3 worker stays Ready on the v1.37.2 control planes (its lease renewed after the
    // last change), until a v1.37.2 worker replaces it.
    c.wait("worker-1's lease renewed", || renewed_after(&c, "kube-node-lease", "worker-1", moved));
    c.wait_ready("worker-1");
    assert_eq!(kubelet_version(&c, "worker-1"), OLD);
    c.set_version("worker-2", NEW);
    let run = c.join("worker-2", 21, fixture!("real/join.yaml"), &[]);
    assert_eq!(run.code(), 0, "worker-2 join:\n{}\n{}\n{}", run.stdout(), run.stderr(), c.status());
    c.wait_ready("worker-2");
    assert_eq!(kubelet_version(&c, "worker-2"), NEW);
    let (_, gone) = reset_node(&mut c, "worker-1");
    gone.power_off();
    delete_node(&c, "worker-1");
    let mut names: Vec<String> = c.get(&["nodes"])["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["cp-4", "cp-5", "cp-6", "worker-2"]);

    // The API through the load balancer, throughout: no gap longer than an etcd leader change and
    // a client's retry (generous, for a loaded 2-core machine).
    let r = monitor.stop();
    println!(
        "rolling replacement: 3 control planes in {rolled:.0?}, {:.0?} from init to the last check; the API through \
         the load balancer: {} polls, {} failed, longest gap {:.1?} ({})",
        started.elapsed(),
        r.polls,
        r.failed,
        r.longest_gap,
        r.why
    );
    assert!(r.polls > 100, "the monitor polled {} times", r.polls);
    assert!(r.longest_gap < Duration::from_secs(15), "the API was unavailable for {:?}: {}", r.longest_gap, r.why);
}
