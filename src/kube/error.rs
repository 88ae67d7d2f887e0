//! What went wrong talking to an API server, typed so callers can tell waiting from failing and
//! tell the operator *why* (DNS, refused, TLS, who we were and what was refused).

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// The name did not resolve.
    Dns,
    /// Nothing listens (yet).
    Refused,
    /// TLS failed: wrong CA, SAN mismatch, handshake refused.
    Tls,
    Timeout,
    Other,
}

#[derive(Debug, Clone)]
pub enum ApiError {
    /// No HTTP answer.
    Transport { kind: Transport, url: String, detail: String },
    /// An HTTP answer with an error status (Kubernetes `Status` reason and message when given).
    Status { code: u16, reason: String, message: String, who: String, what: String },
    /// The server answered something we cannot parse.
    BadResponse { what: String, detail: String },
    /// A plain health endpoint answered, but not with 200.
    Unhealthy { url: String, code: u16 },
    /// Credentials or trust we were handed (CA, client certificate, client key) are unusable.
    BadCredentials { what: String, detail: String },
    /// The kubeconfig we were asked to connect with is unusable.
    Kubeconfig(crate::kubeconfig::KubeconfigError),
    /// An object we were asked to send has no REST path (a bug in the object, not the server).
    BadObject(super::paths::PathError),
}

impl ApiError {
    pub fn code(&self) -> Option<u16> {
        match self {
            ApiError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// A call's result as one retry attempt: transient errors are waited out, others end it.
    pub(crate) fn attempt<T, E: From<ApiError>>(r: Result<T, ApiError>) -> crate::retry::Attempt<T, E> {
        use crate::retry::Attempt;
        match r {
            Ok(t) => Attempt::Done(t),
            Err(e) if e.is_broken() => Attempt::Broken(e.to_string()),
            Err(e) if e.is_transient() => Attempt::Wait(e.to_string()),
            Err(e) => Attempt::Fail(e.into()),
        }
    }

    /// The exchange broke after the connection was made (a reset, a stream cut short): the
    /// network failed, not the server, so it is worth repeating at once.
    pub(crate) fn is_broken(&self) -> bool {
        matches!(self, ApiError::Transport { kind: Transport::Other, .. })
    }

    /// Worth retrying: the server may come up, or become ready, later.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            ApiError::Transport { kind, .. } => *kind != Transport::Tls,
            ApiError::Status { code, .. } => matches!(code, 429 | 500 | 502 | 503 | 504),
            ApiError::Unhealthy { .. } => true,
            ApiError::BadResponse { .. }
            | ApiError::BadCredentials { .. }
            | ApiError::Kubeconfig(_)
            | ApiError::BadObject(_) => false,
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Transport { kind, url, detail } => {
                let why = match kind {
                    Transport::Dns => "the host name does not resolve",
                    Transport::Refused => "connection refused (is the server up yet?)",
                    Transport::Tls => "TLS failed (wrong CA, or the server certificate does not name this host)",
                    Transport::Timeout => "timed out",
                    Transport::Other => "cannot connect",
                };
                write!(f, "{url}: {why}: {detail}")
            }
            ApiError::Status { code, reason, message, who, what } => {
                let verdict = match code {
                    401 => "authentication failed (the credentials were rejected)",
                    403 => "forbidden",
                    404 => "not found",
                    409 => "conflict",
                    422 => "invalid",
                    _ => "failed",
                };
                write!(f, "{what} as {who}: {verdict} (HTTP {code} {reason}): {message}")
            }
            ApiError::BadResponse { what, detail } => write!(f, "{what}: unreadable answer from the server: {detail}"),
            ApiError::Unhealthy { url, code } => write!(f, "{url} answered HTTP {code}"),
            ApiError::BadCredentials { what, detail } => write!(f, "{what} is unusable: {detail}"),
            ApiError::Kubeconfig(e) => e.fmt(f),
            ApiError::BadObject(e) => write!(f, "cannot send an object: {e}"),
        }
    }
}

impl std::error::Error for ApiError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ApiError::Kubeconfig(e) => Some(e),
            ApiError::BadObject(e) => Some(e),
            _ => None,
        }
    }
}

impl From<crate::kubeconfig::KubeconfigError> for ApiError {
    fn from(e: crate::kubeconfig::KubeconfigError) -> Self {
        ApiError::Kubeconfig(e)
    }
}

impl From<super::paths::PathError> for ApiError {
    fn from(e: super::paths::PathError) -> Self {
        ApiError::BadObject(e)
    }
}

/// Sorts a ureq failure into the transport kinds an operator acts on.
pub(crate) fn classify(url: &str, e: &ureq::Error) -> ApiError {
    let detail = e.to_string();
    let kind = match e {
        ureq::Error::HostNotFound => Transport::Dns,
        ureq::Error::Timeout(_) => Transport::Timeout,
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) => Transport::Tls,
        ureq::Error::Io(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused => Transport::Refused,
            std::io::ErrorKind::TimedOut => Transport::Timeout,
            _ if detail.contains("invalid peer certificate") || detail.contains("certificate") => Transport::Tls,
            _ if detail.contains("failed to lookup address") || detail.contains("Name or service not known") => {
                Transport::Dns
            }
            _ => Transport::Other,
        },
        ureq::Error::ConnectionFailed => Transport::Refused,
        _ => Transport::Other,
    };
    ApiError::Transport { kind, url: url.to_string(), detail }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_url_and_object() {
        let e = ApiError::Transport {
            kind: Transport::Refused,
            url: "https://10.0.0.1:6443/version".into(),
            detail: "x".into(),
        };
        assert!(e.to_string().starts_with("https://10.0.0.1:6443/version: connection refused"), "{e}");
        assert!(e.is_transient());
        let e = ApiError::Unhealthy { url: "http://127.0.0.1:10248/healthz".into(), code: 500 };
        assert_eq!(e.to_string(), "http://127.0.0.1:10248/healthz answered HTTP 500");
        let e = ApiError::from(crate::kubeconfig::KubeconfigError::Unreadable { path: "/etc/k/client.key".into() });
        assert_eq!(e.to_string(), "cannot read /etc/k/client.key");
        assert!(!e.is_transient());
        let e = ApiError::from(super::super::paths::PathError::NoName { object: "ConfigMap kube-system/?".into() });
        assert_eq!(e.to_string(), "cannot send an object: ConfigMap kube-system/? has no name");
    }
}
