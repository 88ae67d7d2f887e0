//! A tiny plain-HTTP client for metadata services (IMDS, NoCloud seed URLs): one request, a
//! bounded body, no proxy (metadata addresses are link-local), every status returned as a value.

use std::time::Duration;

use super::SourceError;

/// A response: status and body (at most the caller's limit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Sends `method` (GET or PUT, empty body) to `url` with `headers`; the error says why in the
/// words an operator acts on ("connection refused", "timed out").
pub fn request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
    limit: u64,
) -> Result<Response, SourceError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .timeout_global(Some(timeout))
        .build()
        .into();
    let result = match method {
        "GET" => {
            let mut b = agent.get(url);
            for (k, v) in headers {
                b = b.header(*k, *v);
            }
            b.call()
        }
        "PUT" => {
            let mut b = agent.put(url);
            for (k, v) in headers {
                b = b.header(*k, *v);
            }
            b.send_empty()
        }
        other => return Err(SourceError::Method { method: other.into() }),
    };
    let failed = |detail: String| SourceError::Http { method: method.into(), url: url.into(), detail };
    let mut resp = result.map_err(|e| failed(describe(&e)))?;
    let status = resp.status().as_u16();
    let body = resp.body_mut().with_config().limit(limit).read_to_vec().map_err(|e| SourceError::HttpBody {
        method: method.into(),
        url: url.into(),
        detail: describe(&e),
    })?;
    Ok(Response { status, body })
}

fn describe(e: &ureq::Error) -> String {
    match e {
        ureq::Error::ConnectionFailed => "connection refused".into(),
        ureq::Error::HostNotFound => "host not found".into(),
        ureq::Error::Timeout(_) => "timed out".into(),
        ureq::Error::BodyExceedsLimit(n) => format!("body larger than {n} bytes"),
        ureq::Error::Io(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
            std::io::ErrorKind::TimedOut => "timed out".into(),
            _ => io.to_string(),
        },
        other => other.to_string(),
    }
}
