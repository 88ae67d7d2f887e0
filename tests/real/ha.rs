//! Three real control planes: init --upload-certs, then two kubestrap join --control-plane on
//! their own nodes, each adding a real etcd learner that is promoted, and its own real API
//! server, controller-manager, scheduler and kubelet.

use super::bins;
use super::cluster::*;
use crate::common::*;

/// The etcd members as cp-1's etcd reports them: (name, is_learner).
fn members(c: &Cluster) -> Vec<(String, bool)> {
    let pki = c.scratch.pki("etcd");
    let (code, out, err) = capture(
        c.netns
            .command(bins::bin("etcdctl"))
            .args(["--endpoints", "https://127.0.0.1:2379", "member", "list", "-w", "json", "--cacert"])
            .arg(pki.join("ca.crt"))
            .arg("--cert")
            .arg(pki.join("healthcheck-client.crt"))
            .arg("--key")
            .arg(pki.join("healthcheck-client.key")),
    );
    assert_eq!(code, 0, "etcdctl member list: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("member list json");
    v["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| (m["name"].as_str().unwrap_or("").to_string(), m["isLearner"].as_bool().unwrap_or(false)))
        .collect()
}

#[test]
fn three_control_planes_join_with_real_etcd_learners() {
    let mut c = Cluster::init_with("24h", "controlPlaneEndpoint: 192.0.2.10:{port}\n", &["--upload-certs"]);
    let out = c.init.stdout();
    let key = out
        .split_whitespace()
        .skip_while(|w| *w != "--certificate-key")
        .nth(1)
        .unwrap_or_else(|| panic!("no certificate key in init's output:\n{out}"))
        .to_string();
    c.wait_cluster_info_signed();

    let template = fixture!("real/join-control-plane.yaml").replace("{key}", &key);
    for (i, name) in [(1, "cp-2"), (2, "cp-3")] {
        let run = c.join(name, i, &template, &[]);
        assert_eq!(run.code(), 0, "{name} join failed:\n{}\n{}\n{}", run.stdout(), run.stderr(), c.status());
        c.wait_ready(name);
        c.wait_probes(i);
        // Its kubelet talks to its own API server (kubeadm 1.35+).
        let conf = std::fs::read_to_string(at(&c.hosts[i].root, "/etc/kubernetes/kubelet.conf")).unwrap();
        assert!(conf.contains(&format!("server: https://{}:{}", addr(i), c.port)), "{name} kubelet.conf:\n{conf}");
        let node = c.get(&["node", name]);
        assert_eq!(node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"], "", "{name}");
    }

    // Three voting members, no learner left.
    c.wait("three etcd voters", || {
        let m = members(&c);
        (m.len() == 3 && m.iter().all(|(_, learner)| !learner)).then_some(())
    });
    let mut names: Vec<String> = members(&c).into_iter().map(|(n, _)| n).collect();
    names.sort();
    assert_eq!(names, ["cp-1", "cp-2", "cp-3"]);

    // kubeadm-certs is owned by its proxy token: when that goes, the real garbage collector
    // removes the uploaded (encrypted) keys.
    let certs = c.get(&["-n", "kube-system", "secret", "kubeadm-certs"]);
    let owner = certs["metadata"]["ownerReferences"][0]["name"].as_str().expect("owner").to_string();
    assert!(owner.starts_with("bootstrap-token-"), "{certs}");
    let (code, _, err) = c.kubectl(&["-n", "kube-system", "delete", "secret", &owner]);
    assert_eq!(code, 0, "{err}");
    c.wait("the garbage collector to remove kubeadm-certs", || {
        (c.kubectl(&["-n", "kube-system", "get", "secret", "kubeadm-certs"]).0 != 0).then_some(())
    });

    // Each API server serves on its own address with the cluster's CA.
    for i in 0..3 {
        let url = format!("https://{}:{}/readyz", addr(i), c.port);
        let (code, out, err) = capture(
            c.netns.command("curl").args(["-s", "--max-time", "5", "--cacert"]).arg(c.scratch.pki("ca.crt")).arg(&url),
        );
        assert_eq!((code, out.as_str()), (0, "ok"), "{url}: {err}");
    }
}
