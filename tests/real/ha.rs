//! Three real control planes: init --upload-certs (the kubeadm-certs Secret as kubeadm writes
//! it, opened by Python's AES-GCM too), then two kubestrap join --control-plane on their own
//! nodes, each adding a real etcd learner that is promoted, and its own real API server,
//! controller-manager, scheduler and kubelet; cp-3's join is SIGKILLed once its learner is in
//! the member list, and its rerun reuses that member.

use std::time::Duration;

use super::bins;
use super::cluster::*;
use super::front::in_netns;
use super::ha_checks::*;
use super::proc::wait_for;
use crate::common::*;

/// The etcd client URLs a joining control plane finds (`endpoints_from_cluster`, in-process in
/// cp-1's namespace, as admin), once `want` etcd Pods are mirrored.
fn etcd_endpoints(c: &Cluster, want: usize) -> Vec<String> {
    let admin = std::fs::read(c.admin_conf()).expect("admin.conf");
    let kc = kubestrap::kubeconfig::Kubeconfig::parse(&admin).expect("admin.conf");
    let server = format!("https://{CP_ADDR}:{}", c.port);
    c.wait(&format!("{want} etcd endpoints from the mirror Pods"), || {
        in_netns(&c.netns, || {
            let api =
                kubestrap::kube::Client::from_kubeconfig(&kc, &|_| None, Duration::from_secs(5)).ok()?.at(&server);
            let clock = kubestrap::clock::FakeClock::new();
            let eps = kubestrap::etcd::endpoints_from_cluster(&api, Duration::from_secs(5), &clock).ok()?;
            (eps.len() == want).then_some(eps)
        })
    })
}

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

    check_uploaded_certs(&c, &key);
    upload_certs_phase(&c, &key);

    let template = fixture!("real/join-control-plane.yaml").replace("{key}", &key);
    let run = c.join("cp-2", 1, &template, &[]);
    assert_eq!(run.code(), 0, "cp-2 join failed:\n{}\n{}\n{}", run.stdout(), run.stderr(), c.status());

    // What cp-3's join reads to find etcd: the real kubelets' mirror Pods of both members.
    assert_eq!(etcd_endpoints(&c, 2), [addr(0), addr(1)].map(|a| format!("https://{a}:2379")));

    // cp-3's join, SIGKILLed once its learner is in the member list, then run again.
    let w = Scratch::new("");
    std::fs::write(w.config(), c.fill_node(&template, "cp-3", 2, &w.root())).unwrap();
    let args = ["join", "--config", &w.config(), "--root", &w.root_str()].map(str::to_string);
    let rerun = c.node_then("cp-3", 2, w, |c, host, logs| {
        let mut child = ChildGuard(host.netns.command(&*BIN).args(&args).env_remove("JOURNAL_STREAM").spawn().unwrap());
        let health = || c.health().and_then(|_| host.health());
        wait_for("cp-3's learner", Duration::from_secs(180), &health, || {
            assert!(child.0.try_wait().unwrap().is_none(), "cp-3's join ended before its learner was added");
            (members(c).len() == 3).then_some(())
        });
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        assert_eq!(members(c).len(), 3, "the killed join left one member for cp-3");
        run_watched(&host.netns, &args.each_ref().map(String::as_str), logs, &health)
    });
    assert_eq!(rerun.code(), 0, "cp-3 rerun failed:\n{}\n{}\n{}", rerun.stdout(), rerun.stderr(), c.status());
    assert!(rerun.stderr().contains("already exists"), "the rerun reuses its member:\n{}", rerun.stderr());
    check_first_join_log(&run, &key, &addr(1), c.port);

    for (i, name) in [(1, "cp-2"), (2, "cp-3")] {
        c.wait_ready(name);
        c.wait_probes(i);
        // Its kubelet talks to its own API server (kubeadm 1.35+).
        let conf = std::fs::read_to_string(at(&c.hosts[i].root, "/etc/kubernetes/kubelet.conf")).unwrap();
        assert!(conf.contains(&format!("server: https://{}:{}", addr(i), c.port)), "{name} kubelet.conf:\n{conf}");
        check_joined_control_plane(&c, i, name);
    }
    wrong_key_refused(&c, &template, &key);

    // Three voting members, no learner left.
    c.wait("three etcd voters", || {
        let m = members(&c);
        (m.len() == 3 && m.iter().all(|(_, learner)| !learner)).then_some(())
    });
    let mut names: Vec<String> = members(&c).into_iter().map(|(n, _)| n).collect();
    names.sort();
    assert_eq!(names, ["cp-1", "cp-2", "cp-3"]);

    // kubeadm-certs is owned by its proxy token: when that expires, the real tokencleaner
    // deletes it and the real garbage collector the uploaded (encrypted) keys.
    let owner = owner(&c);
    assert!(owner.starts_with("bootstrap-token-"), "{owner}");
    let expired = r#"{"stringData":{"expiration":"2001-01-01T00:00:00Z"}}"#;
    let (code, _, err) = c.kubectl(&["-n", "kube-system", "patch", "secret", &owner, "-p", expired]);
    assert_eq!(code, 0, "{err}");
    c.wait("the tokencleaner and garbage collector to remove kubeadm-certs", || {
        (c.kubectl(&["-n", "kube-system", "get", "secret", "kubeadm-certs"]).0 != 0).then_some(())
    });
    assert_ne!(c.kubectl(&["-n", "kube-system", "get", "secret", &owner]).0, 0, "the expired token is gone");

    // Each API server serves on its own address with the cluster's CA.
    for i in 0..3 {
        let url = format!("https://{}:{}/readyz", addr(i), c.port);
        let (code, out, err) = capture(
            c.netns.command("curl").args(["-s", "--max-time", "5", "--cacert"]).arg(c.scratch.pki("ca.crt")).arg(&url),
        );
        assert_eq!((code, out.as_str()), (0, "ok"), "{url}: {err}");
    }

    // cp-3 powered off and reset: its member removed through the cluster, two voters left, and
    // its root ready for a first boot.
    let (netns, scratch) = c.hosts.remove(2).power_off();
    let w = scratch.expect("cp-3's root");
    let reset = run_in(&netns, &["reset", "--force", "--root", &w.root_str()]);
    assert_eq!(reset.code(), 0, "reset failed:\n{}\n{}", reset.stdout(), reset.stderr());
    let mut names: Vec<String> = members(&c).into_iter().map(|(n, _)| n).collect();
    names.sort();
    assert_eq!(names, ["cp-1", "cp-2"], "cp-3's member is removed");
    assert!(members(&c).iter().all(|(_, learner)| !learner));
    let root = w.root();
    for gone in ["etc/kubernetes/manifests/etcd.yaml", "etc/kubernetes/admin.conf", "etc/kubernetes/pki/ca.key"] {
        assert!(!root.join(gone).exists(), "{gone} survived the reset");
    }
    // kubestrap's state is emptied (its run lock may stay: reset held it).
    let state: Vec<String> = std::fs::read_dir(root.join("var/lib/kubestrap"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "lock")
        .collect();
    assert!(state.is_empty(), "kubestrap's state survived the reset: {state:?}");
    assert!(
        std::fs::read_dir(root.join("var/lib/etcd")).map_or(true, |mut d| d.next().is_none()),
        "etcd's data is emptied"
    );
    let boot = run_in(&netns, &boot_args("pre-kubelet", &w.root_str()));
    assert_ne!(boot.events().first().map(|e| e["event"].clone()), None);
    assert!(boot.events().iter().all(|e| e["event"] != "skipped"), "a first boot again:\n{}", boot.stdout());
}
