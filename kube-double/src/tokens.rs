//! Reading bootstrap-token Secrets (kube-system/bootstrap-token-<id>), shared
//! by the token authenticator and the bootstrap signer, which apply
//! different subsets of the rules.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
pub const SECRET_PREFIX: &str = "bootstrap-token-";
pub const DEFAULT_GROUP: &str = "system:bootstrappers";

/// One decoded `data` value of a Secret; a value that is not valid base64
/// or UTF-8 counts as missing.
pub fn secret_data(secret: &Value, key: &str) -> Option<String> {
    let raw = secret.get("data")?.get(key)?.as_str()?;
    String::from_utf8(STANDARD.decode(raw).ok()?).ok()
}

/// `\A[a-z0-9]{6}\z`
pub fn valid_token_id(id: &str) -> bool {
    id.len() == 6 && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// `\A[a-z0-9]{16}\z`
pub fn valid_token_secret(secret: &str) -> bool {
    secret.len() == 16 && secret.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// `\Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\z`
pub fn valid_extra_group(group: &str) -> bool {
    let Some(rest) = group.strip_prefix("system:bootstrappers:") else { return false };
    let Some(last) = rest.bytes().last() else { return false };
    rest.len() <= 256
        && (last.is_ascii_lowercase() || last.is_ascii_digit())
        && rest.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b':' || b == b'-')
}

/// Upstream `isSecretExpired`: no key never expires, an unparseable value
/// is expired.
pub fn is_expired(secret: &Value, now: OffsetDateTime) -> bool {
    match secret_data(secret, "expiration") {
        None => false,
        Some(exp) => match OffsetDateTime::parse(&exp, &Rfc3339) {
            Ok(t) => now > t,
            Err(_) => true,
        },
    }
}

/// The token id a Secret's name claims, if it is `bootstrap-token-<id>`.
pub fn id_from_secret_name(name: &str) -> Option<&str> {
    name.strip_prefix(SECRET_PREFIX).filter(|id| valid_token_id(id))
}

pub fn is_token_secret(secret: &Value) -> bool {
    secret["type"].as_str() == Some(SECRET_TYPE)
}

pub fn usage(secret: &Value, usage: &str) -> bool {
    secret_data(secret, &format!("usage-bootstrap-{usage}")).as_deref() == Some("true")
}

/// `system:bootstrappers` plus the extra groups, sorted and de-duplicated;
/// None if any extra group is invalid (which makes the token unusable).
pub fn groups(secret: &Value) -> Option<Vec<String>> {
    let mut groups = vec![DEFAULT_GROUP.to_string()];
    if let Some(extra) = secret_data(secret, "auth-extra-groups").filter(|s| !s.is_empty()) {
        for g in extra.split(',') {
            if !valid_extra_group(g) {
                return None;
            }
            groups.push(g.to_string());
        }
    }
    groups.sort();
    groups.dedup();
    Some(groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b64(s: &str) -> String {
        STANDARD.encode(s)
    }

    #[test]
    fn expiry_and_groups() {
        let now = OffsetDateTime::now_utc();
        let s = json!({"data": {"expiration": b64("2000-01-01T00:00:00Z")}});
        assert!(is_expired(&s, now));
        assert!(is_expired(&json!({"data": {"expiration": b64("tomorrow")}}), now));
        assert!(!is_expired(&json!({"data": {"expiration": b64("2999-01-01T00:00:00Z")}}), now));
        assert!(!is_expired(&json!({"data": {}}), now));
        let g = json!({"data": {"auth-extra-groups": b64("system:bootstrappers:kubeadm:default-node-token")}});
        assert_eq!(
            groups(&g).unwrap(),
            vec!["system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token"]
        );
        assert!(groups(&json!({"data": {"auth-extra-groups": b64("system:masters")}})).is_none());
        assert!(!valid_extra_group("system:bootstrappers:"));
        assert!(!valid_extra_group("system:bootstrappers:a-"));
        assert_eq!(id_from_secret_name("bootstrap-token-abcdef"), Some("abcdef"));
        assert_eq!(id_from_secret_name("bootstrap-token-ABCDEF"), None);
    }
}
