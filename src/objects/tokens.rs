//! Bootstrap token Secrets (reference §1): kubeadm's encodeTokenSecretData, and the reverse for
//! `kubestrap token list`.

use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::{KUBE_SYSTEM, b64, meta};
use crate::config::types::BootstrapToken;
use crate::config::values::{Token, parse_duration};

pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
pub const SECRET_PREFIX: &str = "bootstrap-token-";
const USAGE_PREFIX: &str = "usage-bootstrap-";
/// kubeadm's DefaultTokenDuration, applied when a token has neither ttl nor expires (kubeadm's
/// defaulting always sets a TTL before encoding).
const DEFAULT_TTL: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// A bootstrap token that cannot be encoded as a Secret, or a token Secret that cannot be read
/// back. Never carries the token's secret; the Secret's name and data key are named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("bad token format (value hidden): expected [a-z0-9]{{6}}.[a-z0-9]{{16}}")]
    BadFormat,
    #[error("expires {value:?} is not an RFC 3339 time (e.g. 2030-01-02T03:04:05Z)")]
    BadExpires { value: String },
    #[error("ttl: {0}")]
    BadTtl(crate::config::values::ValueError),
    #[error("ttl is too long")]
    TtlTooLong,
    #[error("cannot format {time}: {detail}")]
    Format { time: String, detail: String },
    #[error("Secret {name:?} is not of type {SECRET_TYPE}")]
    WrongType { name: String },
    #[error("Secret {name:?} has no data")]
    NoData { name: String },
    #[error("Secret {name:?}: data.{key} is not a string")]
    NotString { name: String, key: String },
    #[error("Secret {name:?}: data.{key}: {source}")]
    NotBase64 { name: String, key: String, source: crate::kubeconfig::KubeconfigError },
    #[error("Secret {name:?}: data.{key} is not UTF-8")]
    NotUtf8 { name: String, key: String },
    #[error("Secret {name:?} has no token-id")]
    NoTokenId { name: String },
    #[error("Secret name {name:?} does not match its token-id {id:?}")]
    NameMismatch { name: String, id: String },
    #[error("Secret {name:?}: expiration {value:?} is not an RFC 3339 time")]
    BadExpiration { name: String, value: String },
}

/// What `token list` shows. Deliberately has no secret field, so it can be printed and logged.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenInfo {
    pub id: String,
    /// None: the token never expires.
    pub expiration: Option<OffsetDateTime>,
    /// Sorted, as kubeadm's decoder returns them.
    pub usages: Vec<String>,
    pub groups: Vec<String>,
    pub description: String,
}

/// RFC 3339 in UTC with whole seconds, as Go's `t.UTC().Format(time.RFC3339)` writes it.
fn rfc3339_utc(t: OffsetDateTime) -> Result<String, TokenError> {
    let failed = |e: &dyn std::fmt::Display| TokenError::Format { time: t.to_string(), detail: e.to_string() };
    let t = t.to_offset(time::UtcOffset::UTC).replace_nanosecond(0).map_err(|e| failed(&e))?;
    t.format(&Rfc3339).map_err(|e| failed(&e))
}

/// The expiration to store: `expires` wins (as in kubeadm's encoder), else now + ttl; a ttl of 0
/// means "never expires" and gives None.
fn expiration(token: &BootstrapToken, now: OffsetDateTime) -> Result<Option<String>, TokenError> {
    if let Some(exp) = &token.expires {
        let t = OffsetDateTime::parse(exp, &Rfc3339).map_err(|_| TokenError::BadExpires { value: exp.clone() })?;
        return rfc3339_utc(t).map(Some);
    }
    let ttl = match &token.ttl {
        Some(s) => parse_duration(s).map_err(TokenError::BadTtl)?,
        None => DEFAULT_TTL,
    };
    if ttl.is_zero() {
        return Ok(None);
    }
    let ttl = time::Duration::try_from(ttl).map_err(|_| TokenError::TtlTooLong)?;
    let at = now.checked_add(ttl).ok_or(TokenError::TtlTooLong)?;
    rfc3339_utc(at).map(Some)
}

/// `kube-system/bootstrap-token-<id>`, type `bootstrap.kubernetes.io/token`, data as kubeadm
/// encodes it. Errors never include the token's value.
pub fn token_secret(token: &BootstrapToken, now: OffsetDateTime) -> Result<Value, TokenError> {
    let t = Token::parse(&token.token).map_err(|_| TokenError::BadFormat)?;
    let (id, secret) = (t.id(), t.secret());
    let mut data = Map::new();
    let mut put = |k: &str, v: &str| {
        data.insert(k.to_string(), json!(b64(v)));
    };
    put("token-id", id);
    put("token-secret", secret);
    if !token.description.is_empty() {
        put("description", &token.description);
    }
    if let Some(exp) = expiration(token, now)? {
        put("expiration", &exp);
    }
    for u in &token.usages {
        put(&format!("{USAGE_PREFIX}{u}"), "true");
    }
    if !token.groups.is_empty() {
        put("auth-extra-groups", &token.groups.join(","));
    }
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta(&format!("{SECRET_PREFIX}{id}"), KUBE_SYSTEM),
        "type": SECRET_TYPE,
        "data": data,
    }))
}

/// Reads a token Secret back (kubeadm's BootstrapTokenFromSecret), without the secret.
pub fn parse_token_secret(secret: &Value) -> Result<TokenInfo, TokenError> {
    let name = secret["metadata"]["name"].as_str().unwrap_or_default();
    let named = || name.to_string();
    if secret["type"].as_str() != Some(SECRET_TYPE) {
        return Err(TokenError::WrongType { name: named() });
    }
    let data = secret["data"].as_object().ok_or_else(|| TokenError::NoData { name: named() })?;
    let get = |k: &str| -> Result<Option<String>, TokenError> {
        let Some(v) = data.get(k) else { return Ok(None) };
        let key = || k.to_string();
        let raw = v.as_str().ok_or_else(|| TokenError::NotString { name: named(), key: key() })?;
        let bytes = crate::kubeconfig::decode_b64(raw).map_err(|source| TokenError::NotBase64 {
            name: named(),
            key: key(),
            source,
        })?;
        String::from_utf8(bytes).map(Some).map_err(|_| TokenError::NotUtf8 { name: named(), key: key() })
    };
    let id = get("token-id")?.ok_or_else(|| TokenError::NoTokenId { name: named() })?;
    if name != format!("{SECRET_PREFIX}{id}") {
        return Err(TokenError::NameMismatch { name: named(), id });
    }
    let expiration = match get("expiration")? {
        None => None,
        Some(s) => Some(
            OffsetDateTime::parse(&s, &Rfc3339)
                .map_err(|_| TokenError::BadExpiration { name: named(), value: s.clone() })?,
        ),
    };
    let mut usages: Vec<String> = Vec::new();
    for k in data.keys() {
        if let Some(u) = k.strip_prefix(USAGE_PREFIX)
            && get(k)?.as_deref() == Some("true")
        {
            usages.push(u.to_string());
        }
    }
    usages.sort();
    let groups = get("auth-extra-groups")?
        .map(|g| g.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect())
        .unwrap_or_default();
    Ok(TokenInfo { id, expiration, usages, groups, description: get("description")?.unwrap_or_default() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2025-01-02 03:04:05.678 UTC);

    fn token() -> BootstrapToken {
        BootstrapToken {
            token: "abcdef.0123456789abcdef".into(),
            description: String::new(),
            ttl: Some("24h0m0s".into()),
            expires: None,
            usages: vec!["signing".into(), "authentication".into()],
            groups: vec!["system:bootstrappers:kubeadm:default-node-token".into()],
        }
    }

    fn data(s: &Value, k: &str) -> Option<String> {
        s["data"][k].as_str().map(|v| String::from_utf8(crate::kubeconfig::decode_b64(v).unwrap()).unwrap())
    }

    #[test]
    fn secret_matches_kubeadm_encoding() {
        let s = token_secret(&token(), NOW).unwrap();
        assert_eq!(s["apiVersion"], "v1");
        assert_eq!(s["kind"], "Secret");
        assert_eq!(s["metadata"]["name"], "bootstrap-token-abcdef");
        assert_eq!(s["metadata"]["namespace"], "kube-system");
        assert_eq!(s["type"], "bootstrap.kubernetes.io/token");
        // Raw base64, not the plain text.
        assert_eq!(s["data"]["token-id"], "YWJjZGVm");
        assert_eq!(data(&s, "token-secret").as_deref(), Some("0123456789abcdef"));
        // now + 24h, UTC, whole seconds.
        assert_eq!(data(&s, "expiration").as_deref(), Some("2025-01-03T03:04:05Z"));
        assert_eq!(data(&s, "usage-bootstrap-signing").as_deref(), Some("true"));
        assert_eq!(data(&s, "usage-bootstrap-authentication").as_deref(), Some("true"));
        assert_eq!(data(&s, "auth-extra-groups").as_deref(), Some("system:bootstrappers:kubeadm:default-node-token"));
        assert!(s["data"].get("description").is_none(), "empty description is not written");
        assert_eq!(s["data"].as_object().unwrap().len(), 6);
    }

    #[test]
    fn ttl_zero_never_expires_and_expires_wins() {
        let mut t = token();
        t.ttl = Some("0s".into());
        let s = token_secret(&t, NOW).unwrap();
        assert!(s["data"].get("expiration").is_none());

        let mut t = token();
        t.ttl = None;
        t.expires = Some("2030-06-01T12:00:00+02:00".into());
        let s = token_secret(&t, NOW).unwrap();
        assert_eq!(data(&s, "expiration").as_deref(), Some("2030-06-01T10:00:00Z"), "converted to UTC");

        let mut t = token();
        t.ttl = None;
        let s = token_secret(&t, NOW).unwrap();
        assert_eq!(data(&s, "expiration").as_deref(), Some("2025-01-03T03:04:05Z"), "kubeadm's 24h default");

        let mut t = token();
        t.ttl = Some("1h30m".into());
        assert_eq!(data(&token_secret(&t, NOW).unwrap(), "expiration").as_deref(), Some("2025-01-02T04:34:05Z"));
    }

    #[test]
    fn groups_joined_description_kept_only_given_usages() {
        let mut t = token();
        t.groups = vec!["system:bootstrappers:a".into(), "system:bootstrappers:b".into()];
        t.description = "for workers".into();
        t.usages = vec!["authentication".into()];
        let s = token_secret(&t, NOW).unwrap();
        assert_eq!(data(&s, "auth-extra-groups").as_deref(), Some("system:bootstrappers:a,system:bootstrappers:b"));
        assert_eq!(data(&s, "description").as_deref(), Some("for workers"));
        assert!(s["data"].get("usage-bootstrap-signing").is_none());

        t.groups.clear();
        let s = token_secret(&t, NOW).unwrap();
        assert!(s["data"].get("auth-extra-groups").is_none(), "no groups, no key");
    }

    #[test]
    fn bad_token_is_rejected_without_echo() {
        let mut t = token();
        t.token = "ABCDEF.0123456789abcdef".into();
        let e = token_secret(&t, NOW).unwrap_err().to_string();
        assert!(!e.contains("0123456789abcdef") && !e.contains("ABCDEF"), "{e}");
        assert!(e.starts_with("bad token format (value hidden): expected [a-z0-9]{6}.[a-z0-9]{16}"), "{e}");
        t.token = "abcdef.0123456789abcdef".into();
        t.ttl = Some("forever".into());
        assert_eq!(
            token_secret(&t, NOW).unwrap_err().to_string(),
            "ttl: \"forever\" is not a duration (examples: 24h, 1h30m, 90s, 500ms)"
        );
    }

    #[test]
    fn parse_round_trips_without_the_secret() {
        let mut t = token();
        t.description = "d".into();
        let s = token_secret(&t, NOW).unwrap();
        let info = parse_token_secret(&s).unwrap();
        assert_eq!(info.id, "abcdef");
        assert_eq!(info.expiration, Some(datetime!(2025-01-03 03:04:05 UTC)));
        assert_eq!(info.usages, vec!["authentication", "signing"], "sorted");
        assert_eq!(info.groups, vec!["system:bootstrappers:kubeadm:default-node-token"]);
        assert_eq!(info.description, "d");
        assert!(!format!("{info:?}").contains("0123456789abcdef"));

        let mut never = t.clone();
        never.ttl = Some("0s".into());
        assert_eq!(parse_token_secret(&token_secret(&never, NOW).unwrap()).unwrap().expiration, None);
    }

    #[test]
    fn parse_rejects_mismatched_name_type_and_bad_usage_values() {
        let s = token_secret(&token(), NOW).unwrap();
        let mut wrong_name = s.clone();
        wrong_name["metadata"]["name"] = json!("bootstrap-token-zzzzzz");
        assert_eq!(
            parse_token_secret(&wrong_name).unwrap_err().to_string(),
            "Secret name \"bootstrap-token-zzzzzz\" does not match its token-id \"abcdef\""
        );
        let mut wrong_type = s.clone();
        wrong_type["type"] = json!("Opaque");
        assert!(parse_token_secret(&wrong_type).is_err());
        let mut bad_exp = s.clone();
        bad_exp["data"]["expiration"] = json!(b64("tomorrow"));
        assert_eq!(
            parse_token_secret(&bad_exp).unwrap_err().to_string(),
            "Secret \"bootstrap-token-abcdef\": expiration \"tomorrow\" is not an RFC 3339 time"
        );
        let mut bad_b64 = s.clone();
        bad_b64["data"]["description"] = json!("%%%");
        let e = parse_token_secret(&bad_b64).unwrap_err().to_string();
        assert!(e.starts_with("Secret \"bootstrap-token-abcdef\": data.description: bad base64: "), "{e}");
        // Only the exact value "true" grants a usage.
        let mut not_true = s;
        not_true["data"]["usage-bootstrap-signing"] = json!(b64("yes"));
        assert_eq!(parse_token_secret(&not_true).unwrap().usages, vec!["authentication"]);
    }
}
