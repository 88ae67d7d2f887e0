//! Authentication order and RBAC: client certificates, bootstrap tokens
//! (every rule), anonymous, and anonymous access to cluster-info only once
//! kubeadm's Role and RoleBinding exist.

use crate::common::*;
use serde_json::json;

const CLUSTER_INFO: &str = "/api/v1/namespaces/kube-public/configmaps/cluster-info";

#[test]
fn health_and_version_are_public_but_bad_tokens_are_401() {
    let pki = Pki::new();
    let server = kube_double::start(pki.config()).unwrap();
    let anon = Client::anonymous(&pki, &server.url());
    for p in ["/livez", "/readyz", "/healthz"] {
        let r = anon.get(p);
        assert_eq!((r.status, r.body.as_str()), (200, Some("ok")), "{p}");
    }
    let v = anon.get("/version");
    assert_eq!(v.status, 200);
    assert_eq!(v.body["gitVersion"], "v1.37.0");
    assert_eq!(v.body["major"], "1");
    // Discovery is for authenticated users only.
    assert_eq!(anon.get("/api").status, 403);
    let bogus = Client::token(&pki, &server.url(), "abcdef.0123456789abcdef");
    let r = bogus.get("/healthz");
    assert_eq!(r.status, 401);
    assert_eq!(r.body["reason"], "Unauthorized");
    assert_eq!(r.body["kind"], "Status");
    assert_eq!(Client::token(&pki, &server.url(), "not-a-bootstrap-token").get("/healthz").status, 401);
}

#[test]
fn anonymous_reads_cluster_info_only_with_kubeadm_role_and_binding() {
    let pki = Pki::new();
    let server = kube_double::start(pki.config()).unwrap();
    let admin = Client::cert(&pki, &server.url(), &pki.admin);
    let anon = Client::anonymous(&pki, &server.url());
    let cm = json!({"metadata": {"name": "cluster-info", "namespace": "kube-public"}, "data": {"kubeconfig": "x"}});
    assert_eq!(admin.post("/api/v1/namespaces/kube-public/configmaps", &cm).status, 201);

    let r = anon.get(CLUSTER_INFO);
    assert_eq!(r.status, 403);
    assert_eq!(r.body["reason"], "Forbidden");
    assert_eq!(
        r.body["message"],
        "configmaps \"cluster-info\" is forbidden: User \"system:anonymous\" cannot get resource \"configmaps\" \
         in API group \"\" in the namespace \"kube-public\""
    );

    let role = json!({
        "metadata": {"name": "kubeadm:bootstrap-signer-clusterinfo", "namespace": "kube-public"},
        "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cluster-info"]}],
    });
    assert_eq!(admin.post("/apis/rbac.authorization.k8s.io/v1/namespaces/kube-public/roles", &role).status, 201);
    assert_eq!(anon.get(CLUSTER_INFO).status, 403, "a Role without a RoleBinding grants nothing");

    let binding = json!({
        "metadata": {"name": "kubeadm:bootstrap-signer-clusterinfo", "namespace": "kube-public"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kubeadm:bootstrap-signer-clusterinfo"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "system:anonymous"}],
    });
    assert_eq!(
        admin.post("/apis/rbac.authorization.k8s.io/v1/namespaces/kube-public/rolebindings", &binding).status,
        201
    );
    let r = anon.get(CLUSTER_INFO);
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["kubeconfig"], "x");
    // Only that one object, only get.
    assert_eq!(anon.get("/api/v1/namespaces/kube-public/configmaps").status, 403);
    assert_eq!(anon.get("/api/v1/namespaces/kube-public/configmaps/other").status, 403);

    let log = server.request_log();
    let anon_reads: Vec<_> =
        log.iter().filter(|l| l.path == CLUSTER_INFO).map(|l| (l.user.as_str(), l.status)).collect();
    assert_eq!(anon_reads, [("system:anonymous", 403), ("system:anonymous", 403), ("system:anonymous", 200)]);
}

#[test]
fn bootstrap_tokens_follow_every_rule() {
    let pki = Pki::new();
    let server = kube_double::start(pki.config()).unwrap();
    let url = server.url();
    let both = ["signing", "authentication"];
    server.put_object(token_secret("abcdef", "0123456789abcdef", Some("2999-01-01T00:00:00Z"), &both)).unwrap();
    server.put_object(token_secret("expird", "0123456789abcdef", Some("2001-01-01T00:00:00Z"), &both)).unwrap();
    server.put_object(token_secret("badexp", "0123456789abcdef", Some("next tuesday"), &both)).unwrap();
    server.put_object(token_secret("signon", "0123456789abcdef", None, &["signing"])).unwrap();
    let mut wrong_type = token_secret("wrongt", "0123456789abcdef", None, &both);
    wrong_type["type"] = "Opaque".into();
    server.put_object(wrong_type).unwrap();
    let mut bad_group = token_secret("badgrp", "0123456789abcdef", None, &both);
    bad_group["data"]["auth-extra-groups"] = b64("system:masters").into();
    server.put_object(bad_group).unwrap();

    // Valid: authenticated as system:bootstrap:<id>; RBAC still applies.
    let ok = Client::token(&pki, &url, "abcdef.0123456789abcdef");
    let r = ok.get("/api/v1/nodes");
    assert_eq!(r.status, 403);
    assert!(r.body["message"].as_str().unwrap().contains("User \"system:bootstrap:abcdef\""), "{}", r.body);
    assert_eq!(ok.get("/api").status, 200, "authenticated users may read discovery");

    for token in [
        "abcdef.0123456789abcdee", // wrong secret
        "expird.0123456789abcdef", // expired
        "badexp.0123456789abcdef", // unparseable expiration counts as expired
        "signon.0123456789abcdef", // no usage-bootstrap-authentication
        "wrongt.0123456789abcdef", // wrong Secret type
        "badgrp.0123456789abcdef", // invalid extra group
        "nosuch.0123456789abcdef", // no Secret
    ] {
        assert_eq!(Client::token(&pki, &url, token).get("/api/v1/nodes").status, 401, "{token}");
    }

    // The groups are system:bootstrappers + the extra group: a binding to
    // the extra group grants access.
    server.put_object(crb("t", "kubeadm-test:get-nodes", "Group", BOOTSTRAP_GROUP)).unwrap();
    server
        .put_object(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "kubeadm-test:get-nodes"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"]}]}))
        .unwrap();
    assert_eq!(ok.get("/api/v1/nodes/n1").status, 404, "allowed to get, and the node does not exist");
    assert_eq!(ok.get("/api/v1/nodes").status, 403, "list is not granted");
    let users: Vec<_> = server.request_log().into_iter().map(|l| l.user).collect();
    assert!(users.contains(&"system:bootstrap:abcdef".to_string()));
    assert!(users.contains(&String::new()), "401s log an empty user");
}

#[test]
fn client_certificates_map_cn_and_o_and_untrusted_ones_fail_the_handshake() {
    let pki = Pki::new();
    let server = kube_double::start(pki.config()).unwrap();
    let node = Client::cert(&pki, &server.url(), &pki.node1);
    // Nodes are not masters: cannot read secrets.
    let r = node.get("/api/v1/namespaces/kube-system/secrets");
    assert_eq!(r.status, 403);
    assert!(r.body["message"].as_str().unwrap().contains("User \"system:node:n1\""));
    // A cert from another CA is rejected during the TLS handshake.
    let rogue = Client::cert(&pki, &server.url(), &pki.rogue);
    assert!(rogue.try_get("/healthz").is_err(), "untrusted client certificate must not be accepted");
    // A client certificate wins over a (bogus) bearer token.
    let admin = Client::cert_and_token(&pki, &server.url(), &pki.admin, "abcdef.0123456789abcdef");
    assert_eq!(admin.get("/api/v1/namespaces/kube-system/secrets").status, 200);
}
