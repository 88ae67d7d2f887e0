//! The bootstrap signer (kube-controller-manager's `bootstrapsigner`): keeps
//! one detached JWS per signing-capable bootstrap token in
//! kube-public/cluster-info under `jws-kubeconfig-<tokenID>`.

use crate::resources::{CONFIGMAPS, SECRETS};
use crate::store::{Store, meta_str};
use crate::tokens;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};
use std::time::Instant;

pub const JWS_PREFIX: &str = "jws-kubeconfig-";

/// HS256 compact JWS with a detached payload:
/// `b64url(header) + ".." + b64url(HMAC-SHA256(secret, b64url(header) + "." + b64url(content)))`,
/// header exactly `{"alg":"HS256","kid":"<id>"}`. go-jose zero-pads short
/// keys to 32 bytes, which HMAC's own zero-padding to the block size makes
/// a no-op, so plain HMAC with the secret's bytes is exact.
pub fn detached_jws(content: &str, token_id: &str, token_secret: &str) -> String {
    let header = URL_SAFE_NO_PAD.encode(format!(r#"{{"alg":"HS256","kid":"{token_id}"}}"#));
    let payload = URL_SAFE_NO_PAD.encode(content);
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token_secret.as_bytes());
    let tag = ring::hmac::sign(&key, format!("{header}.{payload}").as_bytes());
    format!("{header}..{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
}

/// (id, secret) of every token the signer may sign with, first Secret
/// winning on a duplicate id.
fn signing_tokens(store: &Store) -> Vec<(String, String)> {
    let now = time::OffsetDateTime::now_utc();
    let mut out: Vec<(String, String)> = Vec::new();
    for s in store.list(&SECRETS, "kube-system").filter(|s| tokens::is_token_secret(s)) {
        let Some(id) = tokens::id_from_secret_name(meta_str(s, "name")) else { continue };
        let data_id = tokens::secret_data(s, "token-id").unwrap_or_default();
        let secret = tokens::secret_data(s, "token-secret").unwrap_or_default();
        if data_id.is_empty() || data_id != id || secret.is_empty() {
            continue;
        }
        if tokens::is_expired(s, now) || !tokens::usage(s, "signing") {
            continue;
        }
        if !out.iter().any(|(i, _)| i == id) {
            out.push((id.to_string(), secret));
        }
    }
    out
}

/// One sync. Returns true if cluster-info was rewritten.
pub fn sync(store: &mut Store, now: Instant) -> bool {
    let Some(cm) = store.try_get(&CONFIGMAPS, "kube-public", "cluster-info").cloned() else {
        store.signer_pending_since = None;
        return false;
    };
    let Some(content) = cm["data"]["kubeconfig"].as_str().map(str::to_string) else {
        store.signer_pending_since = None;
        return false;
    };
    let old_data = cm["data"].as_object().cloned().unwrap_or_default();
    let mut new_data: Map<String, Value> =
        old_data.iter().filter(|(k, _)| !k.starts_with(JWS_PREFIX)).map(|(k, v)| (k.clone(), v.clone())).collect();
    for (id, secret) in signing_tokens(store) {
        new_data.insert(format!("{JWS_PREFIX}{id}"), detached_jws(&content, &id, &secret).into());
    }
    if new_data == old_data {
        store.signer_pending_since = None;
        return false;
    }
    let delay = store.knobs.signer_delay;
    let since = *store.signer_pending_since.get_or_insert(now);
    if now.duration_since(since) < delay {
        return false;
    }
    store.signer_pending_since = None;
    let mut updated = cm.clone();
    updated["data"] = Value::Object(new_data);
    // Carries the current resourceVersion, so this cannot conflict while we
    // hold the store lock.
    match store.replace(&CONFIGMAPS, "kube-public", "cluster-info", updated) {
        Ok(_) => true,
        Err(e) => {
            log::warn!("bootstrap signer: updating cluster-info: {e}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every vector in the shared reference (upstream jws_test.go plus the
    /// derived ones), copied verbatim.
    #[test]
    fn reference_vectors() {
        let hello = "Hello from the other side. I must have called a thousand times.";
        let cases = [
            (
                hello,
                "joshua",
                "my voice is my passcode",
                "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..VShe2taLd-YTrmWuRkcL_8QTNDHYxQIEBsAYYiIj1_8",
            ),
            (
                "",
                "joshua",
                "my voice is my passcode",
                "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..7Ui1ALizW4jXphVUB7xUqC9vLYLL9RZeOFfVLoB7Tgk",
            ),
            (
                hello,
                "joshua",
                "",
                "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..UfkqvDGiIFxrMnFseDj9LYJOLNrvjW8aHhF71mvvAs8",
            ),
            (
                "",
                "abcdef",
                "0123456789abcdef",
                "eyJhbGciOiJIUzI1NiIsImtpZCI6ImFiY2RlZiJ9..MO2tlCpY1xB334qWeOe_XEv9c6DIMRNmKJZImOzY17k",
            ),
            (
                "test",
                "abcdef",
                "0123456789abcdef",
                "eyJhbGciOiJIUzI1NiIsImtpZCI6ImFiY2RlZiJ9..Ev-SxHPDGoHOGXeKoWSpAVXNZidFC5VjXwXh-fd9PA0",
            ),
            (
                "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: AAAA\n    server: https://10.0.0.1:6443\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\nusers: null\n",
                "abcdef",
                "0123456789abcdef",
                "eyJhbGciOiJIUzI1NiIsImtpZCI6ImFiY2RlZiJ9..u_ZthThgN5w0Eb7-okkc3L3JWdhHWWdqdVndZMULVuY",
            ),
        ];
        for (content, id, secret, expected) in cases {
            assert_eq!(detached_jws(content, id, secret), expected, "content {content:?} secret {secret:?}");
        }
        // The negative vector: a tampered signature must not compare equal.
        let tampered = "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..VShe2taLd-YTrmWuRkcL_8QTNDHYxQIEBsAYYiIj1_8foo";
        assert_ne!(detached_jws(hello, "joshua", "my voice is my passcode"), tampered);
        assert!(detached_jws("", "abcdef", "x").starts_with("eyJhbGciOiJIUzI1NiIsImtpZCI6ImFiY2RlZiJ9.."));
    }
}
