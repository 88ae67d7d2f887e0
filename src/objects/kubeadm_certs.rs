//! The `kube-system/kubeadm-certs` Secret as kubeadm's UploadCerts writes it: one data key per
//! shared file (sealed by `pki::copycerts`), owned by a short-lived bootstrap token Secret so the
//! garbage collector deletes it when that token expires.

use serde_json::{Map, Value, json};

use super::{KUBE_SYSTEM, b64, meta};
use crate::pki::copycerts::SECRET_NAME;

/// `entries`: (data key, sealed blob); an empty blob stands for a file that did not exist.
pub fn secret(entries: &[(String, Vec<u8>)], owner_name: &str, owner_uid: &str) -> Value {
    // Inserts rather than collect(): each collect() into a map instantiates its own sort.
    let mut data = Map::new();
    for (k, blob) in entries {
        data.insert(k.clone(), json!(b64(blob)));
    }
    let mut m = meta(SECRET_NAME, KUBE_SYSTEM);
    // metav1.NewControllerRef(tokenSecret, v1 Secret).
    m["ownerReferences"] = json!([{
        "apiVersion": "v1",
        "kind": "Secret",
        "name": owner_name,
        "uid": owner_uid,
        "controller": true,
        "blockOwnerDeletion": true,
    }]);
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": m, "type": "Opaque", "data": data})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_by_the_token_secret_with_every_entry() {
        let s =
            secret(&[("ca.crt".into(), vec![1, 2]), ("etcd-ca.key".into(), vec![])], "bootstrap-token-abcdef", "u-1");
        assert_eq!(s["metadata"]["name"], "kubeadm-certs");
        assert_eq!(s["metadata"]["namespace"], "kube-system");
        let o = &s["metadata"]["ownerReferences"][0];
        assert_eq!(
            (o["kind"].as_str(), o["name"].as_str(), o["uid"].as_str()),
            (Some("Secret"), Some("bootstrap-token-abcdef"), Some("u-1"))
        );
        assert_eq!((o["controller"].as_bool(), o["blockOwnerDeletion"].as_bool()), (Some(true), Some(true)));
        assert_eq!(s["data"]["ca.crt"], "AQI=");
        assert_eq!(s["data"]["etcd-ca.key"], "");
    }
}
