//! Authentication in the real server's order: client certificate, then
//! bearer token (bootstrap tokens are the only kind the double knows), then
//! anonymous.

use crate::resources::SECRETS;
use crate::status::ApiError;
use crate::store::{Store, meta_str};
use crate::tokens;
use subtle::ConstantTimeEq;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
}

pub const ANONYMOUS: &str = "system:anonymous";
const AUTHENTICATED: &str = "system:authenticated";
const UNAUTHENTICATED: &str = "system:unauthenticated";

impl UserInfo {
    pub fn anonymous() -> UserInfo {
        UserInfo { name: ANONYMOUS.into(), uid: String::new(), groups: vec![UNAUTHENTICATED.into()] }
    }

    /// The real server appends `system:authenticated` to every
    /// authenticated user's groups (unless already present).
    fn authenticated(name: String, mut groups: Vec<String>) -> UserInfo {
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.into());
        }
        UserInfo { name, uid: String::new(), groups }
    }
}

/// The identity of a client certificate that TLS already verified against
/// the client CA: CN is the user, O values are groups. A certificate with
/// an empty CN authenticates nobody (upstream x509 authenticator).
pub fn from_client_cert(der: &[u8]) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let cn = subject.iter_common_name().next()?.as_str().ok()?.to_string();
    if cn.is_empty() {
        return None;
    }
    let groups = subject.iter_organization().filter_map(|o| o.as_str().ok()).map(str::to_string).collect();
    Some(UserInfo::authenticated(cn, groups))
}

/// Picks the request's user. `cert_user` is the verified client certificate
/// identity, `authorization` the raw Authorization header.
pub fn authenticate(
    store: &Store,
    cert_user: Option<&UserInfo>,
    authorization: Option<&str>,
) -> Result<UserInfo, ApiError> {
    if let Some(user) = cert_user {
        return Ok(user.clone());
    }
    let bearer = authorization.and_then(|h| {
        let mut parts = h.splitn(3, ' ');
        let scheme = parts.next()?;
        let token = parts.next()?;
        (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
    });
    match bearer {
        // An invalid bearer token is an error, never a fall-back to anonymous.
        Some(token) => bootstrap_token_user(store, token).ok_or_else(ApiError::unauthorized),
        None => Ok(UserInfo::anonymous()),
    }
}

/// Upstream `plugin/pkg/auth/authenticator/token/bootstrap`: every check must
/// pass, the secret compared in constant time.
fn bootstrap_token_user(store: &Store, token: &str) -> Option<UserInfo> {
    let (id, secret) = token.split_once('.')?;
    if !tokens::valid_token_id(id) || !tokens::valid_token_secret(secret) {
        return None;
    }
    let s = store.try_get(&SECRETS, "kube-system", &format!("{}{id}", tokens::SECRET_PREFIX))?;
    if !meta_str(s, "deletionTimestamp").is_empty() || !tokens::is_token_secret(s) {
        return None;
    }
    let stored_secret = tokens::secret_data(s, "token-secret").unwrap_or_default();
    if !bool::from(stored_secret.as_bytes().ct_eq(secret.as_bytes())) {
        return None;
    }
    if tokens::secret_data(s, "token-id").as_deref() != Some(id) {
        return None;
    }
    if tokens::is_expired(s, time::OffsetDateTime::now_utc()) || !tokens::usage(s, "authentication") {
        return None;
    }
    let groups = tokens::groups(s)?;
    Some(UserInfo::authenticated(format!("system:bootstrap:{id}"), groups))
}
