//! The tokencleaner and the garbage collector: expired bootstrap tokens go, and so does
//! whatever they own (kubeadm-certs is owned by a 2 h proxy token).

use crate::common::*;
use serde_json::json;

/// kubeadm's proxy token has no usages and no groups.
const NO_USAGES: &[&str] = &[];

#[test]
fn expired_tokens_are_cleaned_and_their_dependents_collected() {
    let pki = Pki::new();
    let server = kube_double::start(pki.config()).unwrap();
    let secrets = "/api/v1/namespaces/kube-system/secrets";
    let owner =
        server.put_object(token_secret("proxyt", "0123456789abcdef", Some("2999-01-01T00:00:00Z"), NO_USAGES)).unwrap();
    let uid = owner["metadata"]["uid"].as_str().unwrap().to_string();
    let owned = |name: &str, uid: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": {"name": name, "namespace": "kube-system",
                            "ownerReferences": [{"apiVersion": "v1", "kind": "Secret", "name": "bootstrap-token-proxyt",
                                                 "uid": uid, "controller": true, "blockOwnerDeletion": true}]},
               "data": {"ca.crt": "AQI="}})
    };
    server.put_object(owned("kubeadm-certs", &uid)).unwrap();
    server.put_object(owned("orphan-from-the-start", "no-such-uid")).unwrap();
    assert!(server.object(&format!("{secrets}/kubeadm-certs")).is_some(), "a live owner keeps it");
    assert!(server.object(&format!("{secrets}/orphan-from-the-start")).is_none(), "owner never existed");

    // An expired token is deleted by the tokencleaner; its dependents follow.
    let _ = server.put_object(token_secret("proxyt", "0123456789abcdef", Some("2001-01-01T00:00:00Z"), NO_USAGES));
    assert!(server.object(&format!("{secrets}/bootstrap-token-proxyt")).is_none());
    assert!(server.object(&format!("{secrets}/kubeadm-certs")).is_none(), "collected with its owner");
    // Unowned objects and unexpired tokens stay.
    server.put_object(token_secret("keeper", "0123456789abcdef", None, &["signing"])).unwrap();
    assert!(server.object(&format!("{secrets}/bootstrap-token-keeper")).is_some());
}

#[test]
fn static_pod_manifests_get_mirror_pods_with_their_annotations() {
    let pki = Pki::new();
    let server = kube_double::start(pki.config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("etcd.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd\n  namespace: kube-system\n  labels:\n    component: etcd\n    tier: control-plane\n  annotations:\n    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://10.0.0.11:2379\nspec:\n  containers:\n  - name: etcd\n    image: registry.k8s.io/etcd:3.6.9-0\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a manifest").unwrap();
    assert_eq!(server.mirror_static_pods(dir.path(), "cp-1").unwrap(), ["etcd-cp-1"]);
    let admin = Client::cert(&pki, &server.url(), &pki.admin);
    let list = admin.get("/api/v1/namespaces/kube-system/pods?labelSelector=component%3Detcd,tier%3Dcontrol-plane");
    assert_eq!(list.status, 200);
    let items = list.body["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 1);
    let pod = &items[0];
    assert_eq!(
        pod["metadata"]["annotations"]["kubeadm.kubernetes.io/etcd.advertise-client-urls"],
        "https://10.0.0.11:2379"
    );
    assert_eq!(pod["spec"]["nodeName"], "cp-1");
    assert_eq!(pod["metadata"]["annotations"]["kubernetes.io/config.mirror"], "mirror");
}
