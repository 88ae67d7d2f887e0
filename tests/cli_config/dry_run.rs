//! `init --dry-run` and `join --dry-run`: every phase runs, nothing is written, nothing is
//! waited for, nothing is sent; the plan on stdout lists the files and the API objects (that
//! init's is exactly what a real init then writes is checked on the real API server:
//! tests/real/dry_run.rs).

use crate::common::*;

use std::net::TcpListener;

use serde_json::Value;

fn plan(r: &Run) -> Value {
    serde_json::from_str(&r.stdout()).unwrap_or_else(|e| panic!("stdout is not one JSON plan ({e}):\n{}", r.stdout()))
}

fn objects(plan: &Value) -> &Vec<Value> {
    plan["objects"].as_array().unwrap_or_else(|| panic!("no objects list: {plan}"))
}

#[test]
fn init_dry_run_runs_every_phase_and_touches_nothing() {
    let s = Scratch::new("");
    let root = s.root_str();
    let r = kubestrap(&[
        "init",
        "--dry-run",
        "--root",
        &root,
        "--apiserver-advertise-address=127.0.0.1",
        "--node-name=cp-1",
        "--pod-network-cidr=10.244.0.0/16",
    ])
    .ok();
    assert!(snapshot(&s.root()).is_empty(), "a dry run wrote under the root");
    let p = plan(&r);
    let files: Vec<&str> = p["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    for f in [
        "/etc/kubernetes/manifests/kube-apiserver.yaml",
        "/etc/kubernetes/admin.conf",
        "/var/lib/kubelet/config.yaml",
        "/var/lib/kubestrap/bootstrap-token",
    ] {
        assert!(files.contains(&f), "{f} missing from the plan: {files:?}");
    }
    let objs = objects(&p);
    let names: Vec<String> =
        objs.iter().map(|o| format!("{} {} {}", o["verb"], o["kind"], o["name"]).replace('"', "")).collect();
    assert_eq!(names.first().map(String::as_str), Some("create ClusterRoleBinding kubeadm:cluster-admins"));
    assert_eq!(names.last().map(String::as_str), Some("create DaemonSet kube-proxy"));
    for want in [
        "create ConfigMap kubeadm-config",
        "create ConfigMap kubelet-config",
        "patch Node cp-1",
        "create ConfigMap cluster-info",
        "create Deployment coredns",
        "create Service kube-dns",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing: {names:#?}");
    }
    let node = objs.iter().find(|o| o["kind"] == "Node").unwrap();
    assert!(
        node["object"].to_string().contains("node-role.kubernetes.io/control-plane"),
        "the Node patch carries the label and taint: {node}"
    );
    let err = r.stderr();
    assert!(err.contains("[dry-run] Would wait for a healthy kubelet"), "{err}");
    assert!(err.contains("--token <value withheld>"), "{err}");
}

#[test]
fn init_dry_run_from_the_configuration_dry_run_field() {
    let s =
        Scratch::new(&BASE_CONFIG.replacen("kind: InitConfiguration\n", "kind: InitConfiguration\ndryRun: true\n", 1));
    let r = s.init_full(&[]).ok();
    assert!(snapshot(&s.root()).is_empty());
    assert!(!objects(&plan(&r)).is_empty());
}

/// Init waits for the kubelet where its config says, an IPv6 address in brackets (the URL
/// join waits on too: one builder).
#[test]
fn init_waits_for_an_ipv6_kubelet_healthz_in_brackets() {
    let cfg = format!(
        "{}---\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nhealthzBindAddress: \"::1\"\n",
        BASE_CONFIG
    );
    let s = Scratch::new(&cfg);
    let r = s.init_full(&["--dry-run"]).ok();
    assert!(r.stderr().contains("Would wait for a healthy kubelet at http://[::1]:10248/healthz"), "{}", r.stderr());
}

/// A join dry run resolves and checks everything a join would, contacts nobody (a listener at
/// the endpoint sees no connection) and plans the CSR.
#[test]
fn join_dry_run_sends_nothing_and_plans_the_csr() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let endpoint = listener.local_addr().unwrap().to_string();
    let s = Scratch::new("");
    let root = s.root_str();
    let hash = format!("sha256:{}", "ab".repeat(32));
    let r = kubestrap(&[
        "join",
        &endpoint,
        "--token",
        TOKEN,
        &format!("--discovery-token-ca-cert-hash={hash}"),
        "--node-name=worker-1",
        "--root",
        &root,
        "--dry-run",
    ])
    .ok();
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the dry run connected to the endpoint"
    );
    assert!(snapshot(&s.root()).is_empty(), "a dry run wrote under the root");
    let p = plan(&r);
    assert_eq!(p["discovery"]["apiServerEndpoint"], endpoint.as_str());
    assert_eq!(p["discovery"]["caCertHashes"][0], hash.as_str());
    assert_eq!(p["discovery"]["tokenId"], "abcdef");
    let objs = objects(&p);
    let csr = objs.iter().find(|o| o["verb"] == "create").unwrap_or_else(|| panic!("no create in {objs:?}"));
    assert_eq!(csr["kind"], "CertificateSigningRequest");
    assert_eq!(csr["object"]["spec"]["signerName"], "kubernetes.io/kube-apiserver-client-kubelet");
    if needs::needs(needs::Need::tool("openssl")) {
        let (code, subject, err) = sh(&format!(
            "printf %s '{}' | base64 -d | openssl req -noout -subject",
            csr["object"]["spec"]["request"].as_str().unwrap()
        ));
        assert_eq!(code, 0, "{err}");
        assert!(subject.contains("system:node:worker-1") && subject.contains("system:nodes"), "{subject}");
    }
    let later: Vec<&str> =
        p["filesFromCluster"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert!(later.contains(&"/etc/kubernetes/kubelet.conf"), "{later:?}");

    // A join that could not run is refused the same way in a dry run.
    let r = kubestrap(&["join", &endpoint, "--token", TOKEN, "--root", &root, "--dry-run"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("--discovery-token-ca-cert-hash"), "{}", r.stderr());
}

#[test]
fn join_dry_run_from_the_configuration_dry_run_field() {
    let w = tempfile::tempdir().unwrap();
    let cfg = w.path().join("join.yaml");
    let text =
        fill(fixture!("cluster-e2e/join.yaml"), &[("port", &1), ("hash", &format!("sha256:{}", "cd".repeat(32)))]);
    std::fs::write(&cfg, text.replacen("kind: JoinConfiguration\n", "kind: JoinConfiguration\ndryRun: true\n", 1))
        .unwrap();
    let root = w.path().join("root");
    let r = kubestrap(&["join", "--config", cfg.to_str().unwrap(), "--root", root.to_str().unwrap()]).ok();
    assert!(!root.exists() || snapshot(&root).is_empty());
    assert_eq!(plan(&r)["discovery"]["apiServerEndpoint"], "127.0.0.1:1");
}

/// `join --dry-run --control-plane`: the control-plane phases are planned (the kubeadm-config
/// and kubeadm-certs reads, every file by path and mode, etcd-join's member calls,
/// wait-control-plane's waits), nobody is contacted and nothing is written.
#[test]
fn control_plane_join_dry_run_plans_its_phases_and_touches_nothing() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let endpoint = listener.local_addr().unwrap().to_string();
    let s = Scratch::new("");
    let (root, hash) = (s.root_str(), format!("sha256:{}", "ab".repeat(32)));
    let key = "e6a2eb8581237ab72a4f494f30285ec12a9694d750b9785706a83bfcbbbd2204";
    let run = |extra: &[&str]| {
        let mut args = vec!["join", &endpoint, "--token", TOKEN, "--discovery-token-ca-cert-hash", &hash];
        args.extend_from_slice(&["--control-plane", "--certificate-key", key]);
        args.extend_from_slice(&["--apiserver-advertise-address", "10.0.0.12", "--apiserver-bind-port", "7443"]);
        args.extend_from_slice(&["--node-name", "cp-2", "--root", &root, "--dry-run"]);
        args.extend_from_slice(extra);
        kubestrap(&args).ok()
    };
    let r = run(&[]);
    assert!(!r.stdout().contains(key) && !r.stderr().contains(key), "the certificate key is never shown");
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the dry run connected to the endpoint"
    );
    assert!(snapshot(&s.root()).is_empty(), "a dry run wrote under the root");
    let p = plan(&r);

    let reqs: Vec<String> = objects(&p)
        .iter()
        .map(|o| format!("{} {} {} as {}", o["verb"].as_str().unwrap(), o["kind"], o["path"], o["as"]))
        .collect();
    let want = [
        r#"get "ConfigMap" "/api/v1/namespaces/kube-system/configmaps/kubeadm-config" as "bootstrap token""#,
        r#"get "Secret" "/api/v1/namespaces/kube-system/secrets/kubeadm-certs" as "bootstrap token""#,
        r#"list "Pod" "/api/v1/namespaces/kube-system/pods?labelSelector=component%3Detcd%2Ctier%3Dcontrol-plane" as "admin.conf""#,
        r#"patch "Node" "/api/v1/nodes/cp-2" as "admin.conf""#,
    ];
    for w in want {
        assert!(reqs.iter().any(|r| r == w), "{w} not in {reqs:#?}");
    }
    // In phase order: the control-plane-prepare reads before the CSR, etcd after it.
    let at = |w: &str| reqs.iter().position(|r| r.starts_with(w)).unwrap_or_else(|| panic!("{w}: {reqs:#?}"));
    assert!(at("get \"Secret\"") < at("create") && at("create") < at("list \"Pod\""), "{reqs:#?}");

    let files: Vec<(String, String)> = p["filesFromCluster"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap().to_string(), f["mode"].as_str().unwrap().to_string()))
        .collect();
    let has = |path: &str, mode: &str| files.iter().any(|(p, m)| p == path && m == mode);
    for (path, mode) in [
        ("/etc/kubernetes/pki/ca.key", "0600"),
        ("/etc/kubernetes/pki/sa.pub", "0644"),
        ("/etc/kubernetes/pki/etcd/ca.crt", "0644"),
        ("/etc/kubernetes/pki/etcd/ca.key", "0600"),
        ("/etc/kubernetes/pki/apiserver.crt", "0644"),
        ("/etc/kubernetes/pki/apiserver.key", "0600"),
        ("/etc/kubernetes/pki/etcd/peer.crt", "0644"),
        ("/etc/kubernetes/pki/etcd/healthcheck-client.key", "0600"),
        ("/etc/kubernetes/admin.conf", "0600"),
        ("/etc/kubernetes/controller-manager.conf", "0600"),
        ("/etc/kubernetes/scheduler.conf", "0600"),
        ("/etc/kubernetes/manifests/kube-apiserver.yaml", "0600"),
        ("/etc/kubernetes/manifests/kube-scheduler.yaml", "0600"),
        ("/etc/kubernetes/manifests/etcd.yaml", "0600"),
        ("/var/lib/etcd", "0700"),
    ] {
        assert!(has(path, mode), "{path} {mode} not in {files:#?}");
    }
    assert!(!files.iter().any(|(p, _)| p.ends_with("super-admin.conf")), "{files:#?}");

    let cp = &p["controlPlane"];
    let calls: Vec<&str> = cp["etcdCalls"].as_array().unwrap().iter().map(|c| c["call"].as_str().unwrap()).collect();
    assert_eq!(calls, ["MemberList", "MemberAdd", "MemberPromote", "Status"]);
    let add = &cp["etcdCalls"][1];
    assert_eq!(
        (add["path"].as_str(), add["as"].as_str()),
        (Some("/v3/cluster/member/add"), Some("etcd/healthcheck-client.crt"))
    );
    assert_eq!(add["body"], serde_json::json!({"peerURLs": ["https://10.0.0.12:2380"], "isLearner": true}));
    assert_eq!(cp["waits"][1]["url"], "https://10.0.0.12:7443/livez");
    assert_eq!(cp["waits"][1]["timeout"], "240s");

    // Skipping etcd-join drops its calls and files; a worker's plan has no control-plane part.
    let p = plan(&run(&["--skip-phases", "etcd-join"]));
    assert_eq!(p["controlPlane"]["etcdCalls"], serde_json::json!([]));
    assert!(!p.to_string().contains("/etc/kubernetes/manifests/etcd.yaml"));
    let worker = kubestrap(&[
        "join",
        &endpoint,
        "--token",
        TOKEN,
        "--discovery-token-ca-cert-hash",
        &hash,
        "--node-name",
        "w",
        "--root",
        &root,
        "--dry-run",
    ])
    .ok();
    assert!(plan(&worker)["controlPlane"].is_null());
    assert!(snapshot(&s.root()).is_empty());
}
