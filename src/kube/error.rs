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
}

impl ApiError {
    pub fn code(&self) -> Option<u16> {
        match self {
            ApiError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Worth retrying: the server may come up, or become ready, later.
    pub fn is_transient(&self) -> bool {
        match self {
            ApiError::Transport { kind, .. } => *kind != Transport::Tls,
            ApiError::Status { code, .. } => matches!(code, 429 | 500 | 502 | 503 | 504),
            ApiError::BadResponse { .. } => false,
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Transport { kind, url, detail } => {
                let why = match kind {
                    Transport::Dns => "the host name does not resolve",
                    Transport::Refused => "connection refused (is the API server up?)",
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
        }
    }
}

impl From<ApiError> for crate::error::Error {
    fn from(e: ApiError) -> Self {
        crate::error::Error::runtime(e.to_string())
    }
}

/// Sorts a ureq failure into the transport kinds an operator acts on.
pub fn classify(url: &str, e: &ureq::Error) -> ApiError {
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
