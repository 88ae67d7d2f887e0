//! The bootstrap signer: cluster-info carries one detached JWS per valid
//! signing token, stale ones are removed, and `signer_delay` holds signing
//! back.

use crate::common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const CLUSTER_INFO: &str = "/api/v1/namespaces/kube-public/configmaps/cluster-info";
/// The kubeconfig cluster-info carries (kube-double/tests/fixtures/cluster-info/kubeconfig.yaml).
const KUBECONFIG: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/cluster-info/kubeconfig.yaml"));

fn jws_keys(cm: &Value) -> Vec<String> {
    cm["data"].as_object().unwrap().keys().filter(|k| k.starts_with("jws-kubeconfig-")).cloned().collect()
}

fn cluster_info() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "cluster-info", "namespace": "kube-public"},
           "data": {"kubeconfig": KUBECONFIG}})
}

#[test]
fn signs_for_signing_tokens_only_and_removes_stale_signatures() {
    let pki = Pki::new();
    let server = kube_double::start(pki.config()).unwrap();
    let admin = Client::cert(&pki, &server.url(), &pki.admin);
    let secrets = "/api/v1/namespaces/kube-system/secrets";
    let both = ["signing", "authentication"];
    for s in [
        token_secret("abcdef", "0123456789abcdef", None, &both),
        token_secret("authon", "0123456789abcdef", None, &["authentication"]),
        token_secret("expird", "0123456789abcdef", Some("2001-01-01T00:00:00Z"), &both),
        token_secret("second", "fedcba9876543210", Some("2999-01-01T00:00:00Z"), &["signing"]),
    ] {
        assert_eq!(admin.post(secrets, &s).status, 201);
    }
    // A stale signature from a token that no longer exists.
    let mut ci = cluster_info();
    ci["data"]["jws-kubeconfig-gone00"] = "stale".into();
    assert_eq!(admin.post("/api/v1/namespaces/kube-public/configmaps", &ci).status, 201);

    let cm = admin.get(CLUSTER_INFO).body;
    assert_eq!(jws_keys(&cm), ["jws-kubeconfig-abcdef", "jws-kubeconfig-second"]);
    // The reference's derived vector for exactly this content and token.
    assert_eq!(
        cm["data"]["jws-kubeconfig-abcdef"],
        "eyJhbGciOiJIUzI1NiIsImtpZCI6ImFiY2RlZiJ9..u_ZthThgN5w0Eb7-okkc3L3JWdhHWWdqdVndZMULVuY"
    );
    assert_eq!(
        cm["data"]["jws-kubeconfig-second"],
        kube_double::detached_jws(KUBECONFIG, "second", "fedcba9876543210")
    );
    assert_eq!(cm["data"]["kubeconfig"], KUBECONFIG);

    // Deleting a token removes its signature; changing the kubeconfig re-signs.
    assert_eq!(admin.delete(&format!("{secrets}/bootstrap-token-second")).status, 200);
    assert_eq!(jws_keys(&admin.get(CLUSTER_INFO).body), ["jws-kubeconfig-abcdef"]);
    let r = admin.merge_patch(CLUSTER_INFO, &json!({"data": {"kubeconfig": "changed"}}));
    assert_eq!(r.status, 200);
    let cm = admin.get(CLUSTER_INFO).body;
    assert_eq!(cm["data"]["jws-kubeconfig-abcdef"], kube_double::detached_jws("changed", "abcdef", "0123456789abcdef"));
}

#[test]
fn signer_delay_leaves_cluster_info_unsigned_for_a_while() {
    let pki = Pki::new();
    let cfg = kube_double::Config { signer_delay: Duration::from_millis(600), ..pki.config() };
    let server = kube_double::start(cfg).unwrap();
    server.put_object(token_secret("abcdef", "0123456789abcdef", None, &["signing", "authentication"])).unwrap();
    let start = Instant::now();
    server.put_object(cluster_info()).unwrap();
    assert!(jws_keys(&server.object(CLUSTER_INFO).unwrap()).is_empty(), "signed too early");
    let signed = server.wait_for(CLUSTER_INFO, Duration::from_secs(5), |cm| !jws_keys(cm).is_empty()).unwrap();
    assert!(start.elapsed() >= Duration::from_millis(600));
    assert_eq!(jws_keys(&signed), ["jws-kubeconfig-abcdef"]);
}

#[test]
fn token_expiry_removes_the_signature_without_any_write() {
    let pki = Pki::new();
    let server = kube_double::start(pki.config()).unwrap();
    let soon = time::OffsetDateTime::now_utc() + time::Duration::seconds(2);
    let exp = soon.format(&time::format_description::well_known::Rfc3339).unwrap();
    server.put_object(token_secret("abcdef", "0123456789abcdef", Some(&exp), &["signing"])).unwrap();
    server.put_object(cluster_info()).unwrap();
    assert_eq!(jws_keys(&server.object(CLUSTER_INFO).unwrap()), ["jws-kubeconfig-abcdef"]);
    assert!(server.wait_for(CLUSTER_INFO, Duration::from_secs(6), |cm| jws_keys(cm).is_empty()).is_some());
}
