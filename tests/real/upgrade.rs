//! Upgrade by replacement, as Cluster API's KubeadmControlPlane rolls a cluster to the next
//! minor, on the real components of both versions: a v1.36.3 control plane and worker made by
//! kubestrap; `kubeadm-config`'s `kubernetesVersion` set to v1.37.2 (KCP does this before
//! rolling); a v1.37.2 control plane joins (its etcd a learner, promoted); the old one leaves
//! (`kubestrap reset` removes its etcd member, its Node is deleted, the endpoint address moves to
//! the new one as a load balancer's or kube-vip's would); a v1.37.2 worker joins, and the v1.36.3
//! worker (kubelet one minor older than the API server: allowed skew) stays Ready.

use std::path::Path;
use std::time::Instant;

use serde_json::Value;

use super::bins;
use super::cluster::*;
use super::ha_checks::check_first_join_log;
use super::net::Netns;
use crate::common::*;

const OLD: &str = "v1.36.3";
const NEW: &str = "v1.37.2";

/// `/version`'s gitVersion as the API server at `ip` answers it (asked in `netns`, with the
/// cluster's CA).
fn api_version(c: &Cluster, netns: &Netns, ip: &str) -> String {
    let url = format!("https://{ip}:{}/version", c.port);
    let ca = c.scratch.pki("ca.crt");
    let (code, out, err) = capture(netns.command("curl").args(["-s", "--max-time", "5", "--cacert"]).arg(ca).arg(&url));
    assert_eq!(code, 0, "{url}: {err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{url}: {e}: {out}"));
    v["gitVersion"].as_str().expect("gitVersion").to_string()
}

/// The kubelet version a Node reports (its kubelet's own, in `status.nodeInfo`).
fn kubelet_version(c: &Cluster, node: &str) -> String {
    c.get(&["node", node])["status"]["nodeInfo"]["kubeletVersion"].as_str().expect("kubeletVersion").to_string()
}

const COMPONENTS: [&str; 4] = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"];

/// The image tags of a node's control-plane manifests, by component.
fn tags(root: &Path) -> Vec<(&'static str, String)> {
    let tag = |n| super::static_pods::StaticPod::read(root, n).image().rsplit(':').next().unwrap().to_string();
    COMPONENTS.iter().map(|n| (*n, tag(n))).collect()
}

/// What a control plane of Kubernetes `v` runs: kubeadm 1.37 pins etcd 3.7.0-0 for 1.35–1.37.
fn want_tags(v: &str) -> Vec<(&'static str, String)> {
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

#[test]
fn control_plane_and_workers_replaced_by_the_next_minor() {
    let started = Instant::now();
    // cp-1: kubestrap init at v1.36.3, its node image's kubelet v1.36.3 (the harness runs the
    // kubelet of the config's version, the static Pods of their images' versions). The endpoint
    // is cp-1's address, as a load balancer's would be; it moves when cp-1 leaves.
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

    // A v1.36.3 worker.
    c.set_version("worker-1", OLD);
    let run = c.join("worker-1", 20, fixture!("real/join.yaml"), &[]);
    assert_eq!(run.code(), 0, "worker-1 join:\n{}\n{}\n{}", run.stdout(), run.stderr(), c.status());
    c.wait_ready("worker-1");
    assert_eq!(kubelet_version(&c, "worker-1"), OLD);

    // KCP's first step: the cluster's ClusterConfiguration names the next version.
    let cm = c.get(&["-n", "kube-system", "configmap", "kubeadm-config"]);
    let cluster_cfg = cm["data"]["ClusterConfiguration"].as_str().expect("ClusterConfiguration");
    let line = format!("kubernetesVersion: {OLD}\n");
    assert!(cluster_cfg.contains(&line), "{cluster_cfg}");
    let updated = cluster_cfg.replace(&line, &format!("kubernetesVersion: {NEW}\n"));
    let patch = serde_json::json!({ "data": { "ClusterConfiguration": updated } }).to_string();
    let (code, _, err) =
        c.kubectl(&["-n", "kube-system", "patch", "configmap", "kubeadm-config", "--type=merge", "-p", &patch]);
    assert_eq!(code, 0, "{err}");

    // cp-2: kubestrap join --control-plane on a v1.37.2 node image; its manifests are the
    // cluster's new version, its etcd joins as a learner and is promoted.
    c.set_version("cp-2", NEW);
    let join_cp = fixture!("real/join-control-plane.yaml").replace("{key}", &key);
    let run = c.join("cp-2", 1, &join_cp, &[]);
    assert_eq!(run.code(), 0, "cp-2 join:\n{}\n{}\n{}", run.stdout(), run.stderr(), c.status());
    check_first_join_log(&run, &key, &addr(1), c.port);
    assert_eq!(tags(&c.hosts[2].root), want_tags(NEW), "cp-2's manifests");
    c.wait_ready("cp-2");
    c.wait_probes(2);
    assert_eq!(api_version(&c, &c.netns, &addr(1)), NEW, "cp-2's real API server");
    assert_eq!(api_version(&c, &c.netns, CP_ADDR), OLD, "cp-1's still serves");
    assert_eq!(kubelet_version(&c, "cp-2"), NEW);
    c.wait("two etcd voters", || {
        let m = members(&c, 0);
        (m.len() == 2 && m.iter().all(|(_, learner)| !learner)).then_some(())
    });

    // cp-1 leaves: `kubestrap reset` on it while it runs removes its etcd member (as kubeadm
    // reset does), then the machine is gone and its Node deleted (as KCP deletes the Machine).
    let reset = run_in(&c.hosts[0].netns, &["reset", "--force", "--root", &c.scratch.root_str()]);
    assert_eq!(reset.code(), 0, "cp-1 reset:\n{}\n{}", reset.stdout(), reset.stderr());
    let said = format!("{}{}", reset.stdout(), reset.stderr());
    assert!(said.contains("[reset] Removed etcd member cp-1 (https://192.0.2.10:2380); members now: cp-2"), "{said}");
    let cp1 = c.hosts.remove(0);
    let (cp1_netns, _) = cp1.power_off();
    // The endpoint address moves to cp-2 (a VIP's failover; the neighbours' caches flushed as
    // its gratuitous ARP would); kubectl now runs on cp-2 with its admin.conf.
    ip(&cp1_netns, &format!("addr del {CP_ADDR}/24 dev eth0"));
    ip(&c.hosts[1].netns, &format!("addr add {CP_ADDR}/32 dev eth0"));
    for h in &c.hosts {
        ip(&h.netns, "neigh flush all");
    }
    let moved = time::OffsetDateTime::now_utc();
    // The test's client (kubectl, curl, the joins' CA pin) now runs on cp-2 with cp-2's admin.conf
    // and CA, put where the harness reads cp-1's (the reset removed those).
    c.netns = c.hosts[1].netns.clone();
    for f in ["admin.conf", "pki/ca.crt"] {
        let to = c.scratch.path(&format!("/etc/kubernetes/{f}"));
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(at(&c.hosts[1].root, &format!("/etc/kubernetes/{f}")), &to).expect(f);
    }
    assert_eq!(members(&c, 1), [("cp-2".to_string(), false)], "one member left");
    let (code, _, err) = c.kubectl(&["delete", "node", "cp-1"]);
    assert_eq!(code, 0, "{err}");

    // The cluster works on cp-2 alone: the API at the endpoint is v1.37.2, etcd healthy, the
    // add-ons' objects there.
    c.wait("the API at the endpoint served by cp-2", || {
        (c.kubectl(&["get", "--raw", "/readyz"]).1 == "ok").then_some(())
    });
    assert_eq!(api_version(&c, &c.netns, CP_ADDR), NEW);
    let health = etcdctl(&c, 1, &["endpoint", "health", "-w", "json"]);
    assert!(health.contains("\"health\":true"), "{health}");
    for obj in
        [["deployment", "coredns"], ["configmap", "coredns"], ["daemonset", "kube-proxy"], ["configmap", "kube-proxy"]]
    {
        let (code, _, err) = c.kubectl(&["-n", "kube-system", "get", obj[0], obj[1]]);
        assert_eq!(code, 0, "{obj:?}: {err}");
    }
    let names: Vec<String> = c.get(&["nodes"])["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["cp-2", "worker-1"]);

    // A v1.37.2 worker joins through the endpoint.
    c.set_version("worker-2", NEW);
    let run = c.join("worker-2", 21, fixture!("real/join.yaml"), &[]);
    assert_eq!(run.code(), 0, "worker-2 join:\n{}\n{}\n{}", run.stdout(), run.stderr(), c.status());
    c.wait_ready("worker-2");
    assert_eq!(kubelet_version(&c, "worker-2"), NEW);

    // The v1.36.3 worker stays Ready on the v1.37.2 control plane: its lease is renewed after
    // the move, through cp-2.
    c.wait("worker-1's lease renewed through cp-2", || renewed_after(&c, "kube-node-lease", "worker-1", moved));
    c.wait_ready("worker-1");
    assert_eq!(kubelet_version(&c, "worker-1"), OLD);
    assert_eq!(kubelet_version(&c, "cp-2"), NEW);
    // cp-2's v1.37.2 controller-manager and scheduler lead: their leases are renewed after the
    // move, when no other runs (the holder names the test machine's hostname, not the node's).
    for lease in ["kube-controller-manager", "kube-scheduler"] {
        c.wait(&format!("the {lease} lease renewed by cp-2's"), || renewed_after(&c, "kube-system", lease, moved));
    }
    let cfg = c.get(&["-n", "kube-system", "configmap", "kubeadm-config"]);
    assert!(cfg["data"]["ClusterConfiguration"].as_str().unwrap().contains(&format!("kubernetesVersion: {NEW}\n")));
    eprintln!("upgrade by replacement: {:.0?} from init to the last check", started.elapsed());
}
