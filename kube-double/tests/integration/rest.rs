//! REST semantics for a system:masters client: create/get/update/patch/
//! delete with the real server's 404/409/422/400 answers, selectors,
//! generated metadata, and the fault/stand-in knobs (down_for, kubelet).

use crate::common::*;
use serde_json::json;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

const CMS: &str = "/api/v1/namespaces/kube-system/configmaps";

#[test]
fn crud_with_real_status_codes() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    pki.write_dir(dir.path());
    let server = kube_double::start(kube_double::Config::from_pki_dir(dir.path()).unwrap()).unwrap();
    let admin = Client::cert(&pki, &server.url(), &pki.admin);

    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "kubeadm-config", "labels": {"app": "a"}}, "data": {"k": "v"}});
    let created = admin.post(CMS, &cm);
    assert_eq!(created.status, 201, "{}", created.body);
    let meta = &created.body["metadata"];
    assert_eq!(meta["namespace"], "kube-system");
    assert_eq!(meta["uid"].as_str().unwrap().len(), 36);
    assert!(meta["resourceVersion"].as_str().unwrap().parse::<u64>().is_ok());
    assert!(meta["creationTimestamp"].as_str().unwrap().ends_with('Z'));

    let dup = admin.post(CMS, &cm);
    assert_eq!((dup.status, dup.body["reason"].as_str()), (409, Some("AlreadyExists")));
    assert_eq!(dup.body["message"], "configmaps \"kubeadm-config\" already exists");

    let got = admin.get(&format!("{CMS}/kubeadm-config"));
    assert_eq!(got.status, 200);
    assert_eq!(got.body["data"]["k"], "v");

    // Update with the current resourceVersion works and bumps it; a stale
    // one conflicts; none means unconditional.
    let mut upd = got.body.clone();
    upd["data"]["k"] = "v2".into();
    let r = admin.put(&format!("{CMS}/kubeadm-config"), &upd);
    assert_eq!(r.status, 200);
    assert_ne!(r.body["metadata"]["resourceVersion"], got.body["metadata"]["resourceVersion"]);
    assert_eq!(r.body["metadata"]["uid"], got.body["metadata"]["uid"]);
    let stale = admin.put(&format!("{CMS}/kubeadm-config"), &upd);
    assert_eq!((stale.status, stale.body["reason"].as_str()), (409, Some("Conflict")));
    upd["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    upd["data"]["k"] = "v3".into();
    assert_eq!(admin.put(&format!("{CMS}/kubeadm-config"), &upd).status, 200);

    let missing = admin.put(&format!("{CMS}/nope"), &json!({"metadata": {"name": "nope"}}));
    assert_eq!((missing.status, missing.body["reason"].as_str()), (404, Some("NotFound")));
    assert_eq!(missing.body["message"], "configmaps \"nope\" not found");
    let mismatch = admin.put(&format!("{CMS}/kubeadm-config"), &json!({"metadata": {"name": "other"}}));
    assert_eq!(mismatch.status, 400);

    let p = admin.merge_patch(&format!("{CMS}/kubeadm-config"), &json!({"data": {"extra": "1", "k": null}}));
    assert_eq!(p.status, 200);
    assert_eq!(p.body["data"], json!({"extra": "1"}));
    let p = admin.call(
        "PATCH",
        &format!("{CMS}/kubeadm-config"),
        Some(("application/strategic-merge-patch+json", &json!({"metadata": {"labels": {"b": "2"}}}))),
    );
    assert_eq!(p.status, 200);
    assert_eq!(p.body["metadata"]["labels"], json!({"app": "a", "b": "2"}));
    let p = admin.call(
        "PATCH",
        &format!("{CMS}/kubeadm-config"),
        Some(("application/json-patch+json", &json!([{"op": "replace", "path": "/data/extra", "value": "2"}]))),
    );
    assert_eq!((p.status, &p.body["data"]["extra"]), (200, &json!("2")));
    assert_eq!(admin.merge_patch(&format!("{CMS}/nope"), &json!({})).status, 404);

    // Selectors.
    admin.post(CMS, &json!({"metadata": {"name": "other", "labels": {"app": "b"}}}));
    let names = |q: &str| -> Vec<String> {
        let r = admin.get(&format!("{CMS}?{q}"));
        assert_eq!(r.status, 200);
        assert_eq!(r.body["kind"], "ConfigMapList");
        r.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names("labelSelector=app%3Da"), ["kubeadm-config"]);
    assert_eq!(names("fieldSelector=metadata.name%3Dother"), ["other"]);
    assert_eq!(names("labelSelector=app"), ["kubeadm-config", "other"]);

    // Invalid and missing things.
    let noname = admin.post(CMS, &json!({"metadata": {}}));
    assert_eq!((noname.status, noname.body["reason"].as_str()), (422, Some("Invalid")));
    let wrong_ns = admin.post(CMS, &json!({"metadata": {"name": "x", "namespace": "default"}}));
    assert_eq!(wrong_ns.status, 400);
    let no_ns = admin.post("/api/v1/namespaces/nope/configmaps", &json!({"metadata": {"name": "x"}}));
    assert_eq!((no_ns.status, no_ns.body["message"].as_str()), (404, Some("namespaces \"nope\" not found")));
    assert_eq!(admin.get("/api/v1/namespaces/kube-system/widgets").status, 404);
    assert_eq!(admin.get("/apis/example.com/v1/things").status, 404);
    let bad_json = admin.call("POST", CMS, Some(("application/json", &json!("not an object"))));
    assert_eq!(bad_json.status, 400);

    assert_eq!(admin.delete(&format!("{CMS}/other")).status, 200);
    assert_eq!(admin.delete(&format!("{CMS}/other")).status, 404);
    assert!(server.object(&format!("{CMS}/other")).is_none());
    assert!(server.object(&format!("{CMS}/kubeadm-config")).is_some());
}

#[test]
fn builtin_namespaces_secrets_and_cluster_scoped_objects() {
    let pki = Pki::new();
    let server = kube_double::start(pki.config()).unwrap();
    let admin = Client::cert(&pki, &server.url(), &pki.admin);
    let ns = admin.get("/api/v1/namespaces");
    let names: Vec<_> = ns.body["items"].as_array().unwrap().iter().map(|n| n["metadata"]["name"].clone()).collect();
    assert_eq!(names, ["default", "kube-node-lease", "kube-public", "kube-system"]);
    for crole in [
        "cluster-admin",
        "system:node-bootstrapper",
        "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
        "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
        "system:node-proxier",
    ] {
        let r = admin.get(&format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{crole}"));
        assert_eq!(r.status, 200, "{crole}");
    }
    // stringData is folded into base64 data like the real server does.
    let s = admin.post(
        "/api/v1/namespaces/kube-system/secrets",
        &json!({"metadata": {"name": "s"}, "type": "Opaque", "stringData": {"a": "b"}}),
    );
    assert_eq!(s.status, 201);
    assert_eq!(s.body["data"]["a"], b64("b"));
    assert!(s.body.get("stringData").is_none());
    // Apps and RBAC objects round-trip.
    let d = admin.post(
        "/apis/apps/v1/namespaces/kube-system/deployments",
        &json!({"metadata": {"name": "coredns"}, "spec": {"replicas": 2}}),
    );
    assert_eq!((d.status, d.body["kind"].as_str()), (201, Some("Deployment")));
    let ds =
        admin.post("/apis/apps/v1/namespaces/kube-system/daemonsets", &json!({"metadata": {"name": "kube-proxy"}}));
    assert_eq!(ds.status, 201);
    assert_eq!(
        admin
            .post("/api/v1/namespaces/kube-system/serviceaccounts", &json!({"metadata": {"name": "kube-proxy"}}))
            .status,
        201
    );
    assert_eq!(
        admin.post("/api/v1/namespaces/kube-system/services", &json!({"metadata": {"name": "kube-dns"}})).status,
        201
    );
    let crb = admin.post(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        &crb("kubeadm:get-nodes", "kubeadm:get-nodes", "Group", BOOTSTRAP_GROUP),
    );
    assert_eq!(crb.status, 201);
    assert_eq!(admin.get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/kubeadm:get-nodes").status, 200);
    // URL-encoded colon in the path.
    assert_eq!(admin.get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/kubeadm%3Aget-nodes").status, 200);
    // Namespaced resource without namespace, and cluster-scoped with one, are no routes.
    assert_eq!(admin.post("/api/v1/configmaps", &json!({"metadata": {"name": "x"}})).status, 404);
    assert_eq!(admin.get("/api/v1/namespaces/default/nodes/x").status, 404);
    // Status of a Node is only writable through /status.
    server.register_node("n1", &[("node-role.kubernetes.io/control-plane", "")]).unwrap();
    let node = admin.get("/api/v1/nodes/n1").body;
    let mut edited = node.clone();
    edited["status"]["conditions"][0]["status"] = "False".into();
    let r = admin.put("/api/v1/nodes/n1", &edited);
    assert_eq!(r.body["status"]["conditions"][0]["status"], "True");
    let r = admin.put(
        "/api/v1/nodes/n1/status",
        &r.body.clone().tap(|b| b["status"]["conditions"][0]["status"] = "False".into()),
    );
    assert_eq!((r.status, &r.body["status"]["conditions"][0]["status"]), (200, &json!("False")));
}

trait Tap: Sized {
    fn tap(self, f: impl FnOnce(&mut Self)) -> Self;
}

impl Tap for serde_json::Value {
    fn tap(mut self, f: impl FnOnce(&mut Self)) -> Self {
        f(&mut self);
        self
    }
}

#[test]
fn down_for_refuses_connections_then_serves() {
    let pki = Pki::new();
    let cfg = kube_double::Config { down_for: Duration::from_millis(700), ..pki.config() };
    let start = Instant::now();
    let server = kube_double::start(cfg).unwrap();
    let refused = std::net::TcpStream::connect(server.addr());
    assert!(refused.is_err(), "nothing may listen during down_for");
    let anon = Client::anonymous(&pki, &server.url());
    loop {
        if let Ok(200) = anon.try_get("/healthz") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "never came up");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(start.elapsed() >= Duration::from_millis(700));
}

#[test]
fn kubelet_stand_in_serves_healthz_and_registers_ready_nodes() {
    let pki = Pki::new();
    let cfg = kube_double::Config { kubelet_healthz: Some("127.0.0.1:0".parse().unwrap()), ..pki.config() };
    let server = kube_double::start(cfg).unwrap();
    let mut tcp = std::net::TcpStream::connect(server.kubelet_addr().unwrap()).unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut resp = String::new();
    tcp.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 200 OK\r\n"), "{resp}");
    assert!(resp.ends_with("\r\n\r\nok"));

    let node = server.register_node("worker-1", &[("role", "w")]).unwrap();
    assert_eq!(node["metadata"]["labels"]["role"], "w");
    let admin = Client::cert(&pki, &server.url(), &pki.admin);
    let n = admin.get("/api/v1/nodes/worker-1").body;
    let ready = n["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").unwrap();
    assert_eq!(ready["status"], "True");
}

#[test]
fn stop_closes_the_port() {
    let pki = Pki::new();
    let mut server = kube_double::start(pki.config()).unwrap();
    let addr = server.addr();
    assert!(std::net::TcpStream::connect(addr).is_ok());
    server.stop();
    assert!(std::net::TcpStream::connect(addr).is_err());
}
