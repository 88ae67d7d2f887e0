//! TLS bootstrap CSRs: server-set requester identity, auto-approval through
//! the nodeclient/selfnodeclient SubjectAccessReviews, signing by the
//! cluster CA, the legacy usage rule, manual approval, denial, and watch.

use crate::common::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::time::Duration;

const TOKEN: &str = "abcdef.0123456789abcdef";

fn server_with(cfg: kube_double::Config, autoapprove_bindings: bool) -> kube_double::Handle {
    let server = kube_double::start(cfg).unwrap();
    server.put_object(token_secret("abcdef", "0123456789abcdef", None, &["signing", "authentication"])).unwrap();
    for b in kubeadm_csr_bindings(autoapprove_bindings) {
        server.put_object(b).unwrap();
    }
    server
}

fn issued_cert(pki: &Pki, csr: &Value) -> (String, Vec<String>) {
    let pem = unb64(csr["status"]["certificate"].as_str().expect("certificate issued"));
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    let cert = pem.parse_x509().unwrap();
    let (_, ca_pem) = x509_parser::pem::parse_x509_pem(pki.ca.cert.as_bytes()).unwrap();
    let ca = ca_pem.parse_x509().unwrap();
    cert.verify_signature(Some(ca.public_key())).expect("chains to the cluster CA");
    assert_eq!(cert.issuer(), ca.subject());
    let eku = cert.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.client_auth && !eku.server_auth);
    let validity = cert.validity().time_to_expiration().unwrap();
    assert!(validity > time::Duration::days(364) && validity <= time::Duration::days(365));
    let cn = cert.subject().iter_common_name().next().unwrap().as_str().unwrap().to_string();
    let orgs = cert.subject().iter_organization().map(|o| o.as_str().unwrap().to_string()).collect();
    (cn, orgs)
}

#[test]
fn bootstrap_token_csr_is_auto_approved_and_signed_with_kubeadm_bindings() {
    let pki = Pki::new();
    let server = server_with(pki.config(), true);
    let kubelet = Client::token(&pki, &server.url(), TOKEN);
    let created = kubelet.post(CSRS, &kubelet_csr("node-csr-1", "system:node:n2", &["system:nodes"], USAGES3));
    assert_eq!(created.status, 201, "{}", created.body);
    // The requester identity is the authenticated one, never the body's.
    assert_eq!(created.body["spec"]["username"], "system:bootstrap:abcdef");
    assert_eq!(
        created.body["spec"]["groups"],
        json!(["system:bootstrappers", BOOTSTRAP_GROUP, "system:authenticated"])
    );
    let got = kubelet.get(&format!("{CSRS}/node-csr-1"));
    assert_eq!(got.status, 200);
    let cond = &got.body["status"]["conditions"][0];
    assert_eq!(
        (cond["type"].as_str(), cond["status"].as_str(), cond["reason"].as_str()),
        (Some("Approved"), Some("True"), Some("AutoApproved"))
    );
    let (cn, orgs) = issued_cert(&pki, &got.body);
    assert_eq!(cn, "system:node:n2");
    assert_eq!(orgs, ["system:nodes"]);
    // The bootstrap client cannot approve by itself.
    let approve = kubelet.put(&format!("{CSRS}/node-csr-1/approval"), &got.body);
    assert_eq!(approve.status, 403);
}

#[test]
fn without_the_autoapprove_binding_the_csr_stays_pending() {
    let pki = Pki::new();
    let server = server_with(pki.config(), false);
    let kubelet = Client::token(&pki, &server.url(), TOKEN);
    assert_eq!(kubelet.post(CSRS, &kubelet_csr("c", "system:node:n2", &["system:nodes"], USAGES3)).status, 201);
    std::thread::sleep(Duration::from_millis(200)); // a few controller ticks
    let csr = kubelet.get(&format!("{CSRS}/c")).body;
    assert!(condition_types(&csr).is_empty(), "{csr}");
    assert!(csr["status"]["certificate"].is_null());
}

#[test]
fn without_node_bootstrapper_binding_creating_a_csr_is_forbidden() {
    let pki = Pki::new();
    let server = kube_double::start(pki.config()).unwrap();
    server.put_object(token_secret("abcdef", "0123456789abcdef", None, &["authentication"])).unwrap();
    let kubelet = Client::token(&pki, &server.url(), TOKEN);
    let r = kubelet.post(CSRS, &kubelet_csr("c", "system:node:n2", &["system:nodes"], USAGES3));
    assert_eq!(r.status, 403);
}

#[test]
fn usage_rules_new_and_legacy() {
    let pki = Pki::new();
    // Newer approvers accept the non-RSA two-usage set.
    let server = server_with(pki.config(), true);
    let kubelet = Client::token(&pki, &server.url(), TOKEN);
    kubelet.post(CSRS, &kubelet_csr("two", "system:node:n2", &["system:nodes"], USAGES2));
    assert_eq!(issued_cert(&pki, &kubelet.get(&format!("{CSRS}/two")).body).0, "system:node:n2");
    // Rules other than usages: wrong O, wrong CN prefix, extra usage.
    kubelet.post(CSRS, &kubelet_csr("bad-o", "system:node:n2", &["system:nodes", "x"], USAGES3));
    kubelet.post(CSRS, &kubelet_csr("bad-cn", "n2", &["system:nodes"], USAGES3));
    kubelet.post(
        CSRS,
        &kubelet_csr(
            "bad-u",
            "system:node:n2",
            &["system:nodes"],
            &["digital signature", "key encipherment", "client auth", "server auth"],
        ),
    );
    for name in ["bad-o", "bad-cn", "bad-u"] {
        assert!(condition_types(&kubelet.get(&format!("{CSRS}/{name}")).body).is_empty(), "{name}");
    }

    // Legacy (v1.24-era) approvers accept only the three-usage set.
    let legacy = server_with(kube_double::Config { legacy_approver: true, ..pki.config() }, true);
    let kubelet = Client::token(&pki, &legacy.url(), TOKEN);
    kubelet.post(CSRS, &kubelet_csr("two", "system:node:n2", &["system:nodes"], USAGES2));
    kubelet.post(CSRS, &kubelet_csr("three", "system:node:n3", &["system:nodes"], USAGES3));
    let two = kubelet.get(&format!("{CSRS}/two")).body;
    assert!(condition_types(&two).is_empty(), "2-usage CSR must stay pending under legacy_approver");
    assert_eq!(issued_cert(&pki, &kubelet.get(&format!("{CSRS}/three")).body).0, "system:node:n3");

    // Approved by hand, the legacy signer fails it as a v1.24 KCM did.
    let admin = Client::cert(&pki, &legacy.url(), &pki.admin);
    let mut approved = two.clone();
    approved["status"]["conditions"] =
        json!([{"type": "Approved", "status": "True", "reason": "Manual", "message": "by test"}]);
    let r = admin.put(&format!("{CSRS}/two/approval"), &approved);
    assert_eq!(r.status, 200, "{}", r.body);
    let failed = admin.get(&format!("{CSRS}/two")).body;
    assert_eq!(condition_types(&failed), ["Approved", "Failed"]);
    assert_eq!(failed["status"]["conditions"][1]["reason"], "SignerValidationFailure");
    assert_eq!(
        failed["status"]["conditions"][1]["message"],
        "usages did not match [client auth digital signature key encipherment]"
    );
    assert!(failed["status"]["certificate"].is_null());
}

#[test]
fn node_certificate_renewal_uses_selfnodeclient() {
    let pki = Pki::new();
    let server = server_with(pki.config(), false);
    let node = Client::cert(&pki, &server.url(), &pki.node1);
    let r = node.post(CSRS, &kubelet_csr("renew", "system:node:n1", &["system:nodes"], USAGES3));
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["spec"]["username"], "system:node:n1");
    assert!(condition_types(&node.get(&format!("{CSRS}/renew")).body).is_empty());
    // kubeadm:node-autoapprove-certificate-rotation turns approval on; the
    // approver reacts to the binding's creation.
    server
        .put_object(crb(
            "kubeadm:node-autoapprove-certificate-rotation",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            "Group",
            "system:nodes",
        ))
        .unwrap();
    let csr = node.get(&format!("{CSRS}/renew")).body;
    assert!(csr["status"]["conditions"][0]["message"].as_str().unwrap().contains("self kubelet client"));
    assert_eq!(issued_cert(&pki, &csr).0, "system:node:n1");
    // A node asking for another node's name is not "self", and the
    // selfnodeclient binding does not cover nodeclient.
    node.post(CSRS, &kubelet_csr("other", "system:node:n9", &["system:nodes"], USAGES3));
    assert!(condition_types(&node.get(&format!("{CSRS}/other")).body).is_empty());
}

#[test]
fn deny_knob_invalid_requests_and_no_ca_key() {
    let pki = Pki::new();
    let server = server_with(kube_double::Config { deny_csrs: true, ..pki.config() }, true);
    let kubelet = Client::token(&pki, &server.url(), TOKEN);
    kubelet.post(CSRS, &kubelet_csr("d", "system:node:n2", &["system:nodes"], USAGES3));
    let csr = kubelet.get(&format!("{CSRS}/d")).body;
    assert_eq!(condition_types(&csr), ["Denied"]);
    assert_eq!(csr["status"]["conditions"][0]["reason"], "TestDenied");
    let mut bad = kubelet_csr("bad", "system:node:n2", &["system:nodes"], USAGES3);
    bad["spec"]["request"] = b64("not a pem").into();
    let r = kubelet.post(CSRS, &bad);
    assert_eq!((r.status, r.body["reason"].as_str()), (422, Some("Invalid")));

    let no_key = server_with(kube_double::Config { ca_key_pem: None, ..pki.config() }, true);
    let kubelet = Client::token(&pki, &no_key.url(), TOKEN);
    kubelet.post(CSRS, &kubelet_csr("n", "system:node:n2", &["system:nodes"], USAGES3));
    let csr = kubelet.get(&format!("{CSRS}/n")).body;
    assert_eq!(condition_types(&csr), ["Approved"]);
    assert!(csr["status"]["certificate"].is_null(), "no CA key: never signed");
}

#[test]
fn watch_sees_the_certificate_arrive() {
    let pki = Pki::new();
    let server = server_with(kube_double::Config { auto_approve: false, ..pki.config() }, true);
    let kubelet = Client::token(&pki, &server.url(), TOKEN);
    let created = kubelet.post(CSRS, &kubelet_csr("w", "system:node:n2", &["system:nodes"], USAGES3));
    assert_eq!(created.status, 201);
    let mut resp =
        kubelet.raw("GET", &format!("{CSRS}?watch=true&fieldSelector=metadata.name%3Dw&timeoutSeconds=5"), None);
    assert_eq!(resp.status().as_u16(), 200);
    let mut lines = BufReader::new(resp.body_mut().as_reader()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["metadata"]["name"], "w");
    assert!(first["object"]["status"]["certificate"].is_null());

    // Another CSR's events are filtered out by the field selector.
    kubelet.post(CSRS, &kubelet_csr("zz-other", "system:node:n3", &["system:nodes"], USAGES3));
    server.set_knobs(|k| k.auto_approve = true);
    let mut certificate = None;
    for line in lines.by_ref() {
        let ev: Value = serde_json::from_str(&line.unwrap()).unwrap();
        assert_eq!(ev["type"], "MODIFIED");
        assert_eq!(ev["object"]["metadata"]["name"], "w");
        if let Some(c) = ev["object"]["status"]["certificate"].as_str() {
            certificate = Some(c.to_string());
            break;
        }
    }
    assert!(certificate.is_some(), "MODIFIED event with the certificate");

    // Resuming from the create's resourceVersion replays the changes
    // without a synthetic ADDED, then ends at timeoutSeconds.
    let rv = created.body["metadata"]["resourceVersion"].as_str().unwrap();
    let started = std::time::Instant::now();
    let mut resp = kubelet.raw(
        "GET",
        &format!("{CSRS}?watch=1&fieldSelector=metadata.name%3Dw&resourceVersion={rv}&timeoutSeconds=1"),
        None,
    );
    let events: Vec<Value> = BufReader::new(resp.body_mut().as_reader())
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert!(started.elapsed() >= Duration::from_secs(1));
    let types: Vec<_> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(!types.is_empty() && types.iter().all(|t| *t == "MODIFIED"), "{types:?}");
    assert!(events.last().unwrap()["object"]["status"]["certificate"].is_string());
}
