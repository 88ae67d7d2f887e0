//! The only module that speaks HTTP/TLS: a small Kubernetes API client on ureq + rustls (ring).
//! The base URL is a constructor argument, so tests point it at the API test double. `etcd/`
//! talks to etcd's v3 JSON gateway through this same [`Client`] (one TLS stack).

pub mod error;
pub mod paths;
pub mod record;

use std::io::{BufRead, BufReader, Read};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsConfig, TlsProvider};

pub use error::{ApiError, Transport};
pub use record::{Exchange, Recorded, Recorder, StandIn};

use crate::kubeconfig::{Kubeconfig, KubeconfigError, decode_b64};

/// Whom we trust for the server certificate.
pub enum Trust {
    /// The cluster CA (PEM): the normal case.
    Ca(Vec<u8>),
    /// The machine's CA bundle: HTTPS discovery files.
    SystemRoots,
    /// No verification: only token discovery's first fetch, whose answer is then verified by
    /// the JWS signature and the CA pin before anything is trusted.
    InsecureForDiscovery,
}

/// Who we are.
pub enum Auth {
    Anonymous,
    /// A bearer token (bootstrap token). Never logged.
    Token(String),
    /// A client certificate and key (PEM); `user` is for messages.
    Cert {
        cert_pem: Vec<u8>,
        key_pem: Vec<u8>,
        user: String,
    },
}

pub struct Client {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
    /// "system:anonymous", "bootstrap token abcdef", "client certificate CN=...": for errors.
    who: String,
    /// Dry run: every request is answered by this recorder, none reaches the network.
    record: Option<Recorder>,
}

/// The outcome of a create: made now, or already there (409), which init treats as done.
#[derive(Debug)]
pub enum Created {
    New(Value),
    Exists,
}

const SYSTEM_BUNDLES: &[&str] = &["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"];

fn bad(what: &str, detail: impl std::fmt::Display) -> ApiError {
    ApiError::BadResponse { what: what.to_string(), detail: detail.to_string() }
}

impl Client {
    pub fn new(base: &str, trust: Trust, auth: Auth, timeout: Duration) -> Result<Client, ApiError> {
        let mut tls = TlsConfig::builder().provider(TlsProvider::Rustls);
        match trust {
            Trust::Ca(pem) => {
                let certs = parse_certs("the cluster CA", &pem)?;
                tls = tls.root_certs(RootCerts::Specific(Arc::new(certs)));
            }
            Trust::SystemRoots => {
                let bundle = SYSTEM_BUNDLES.iter().find_map(|p| std::fs::read(p).ok());
                tls = match bundle.map(|b| parse_certs("the system CA bundle", &b)) {
                    Some(Ok(certs)) if !certs.is_empty() => tls.root_certs(RootCerts::Specific(Arc::new(certs))),
                    _ => tls.root_certs(RootCerts::WebPki),
                };
            }
            Trust::InsecureForDiscovery => tls = tls.disable_verification(true),
        }
        let (token, who) = match auth {
            Auth::Anonymous => (None, "system:anonymous".to_string()),
            Auth::Token(t) => {
                let id = t.split('.').next().unwrap_or_default().to_string();
                (Some(t), format!("bootstrap token {id}"))
            }
            Auth::Cert { cert_pem, key_pem, user } => {
                let chain = parse_certs("the client certificate", &cert_pem)?;
                let key = PrivateKey::from_pem(&key_pem)
                    .map_err(|e| ApiError::BadCredentials { what: "the client key".into(), detail: e.to_string() })?;
                tls = tls.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
                (None, format!("client certificate {user}"))
            }
        };
        let agent = ureq::Agent::config_builder()
            .tls_config(tls.build())
            .http_status_as_error(false)
            .timeout_connect(Some(timeout))
            .timeout_recv_response(Some(timeout))
            .timeout_per_read(Some(timeout.max(Duration::from_secs(5)) * 7))
            .user_agent(concat!("kubestrap/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(Client { agent, base: base.trim_end_matches('/').to_string(), token, who, record: None })
    }

    /// A client for a kubeconfig's current context. `read` loads files the kubeconfig names
    /// (client-certificate/client-key paths), e.g. under `--root`.
    pub fn from_kubeconfig(
        kc: &Kubeconfig,
        read: &dyn Fn(&str) -> Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<Client, ApiError> {
        let (cluster, user) = kc.current()?;
        let data = |field: &str, value: &str| decode_b64(value).map_err(|e| e.in_field(field));
        let ca = data("certificate-authority-data", &cluster.certificate_authority_data)?;
        let file = |p: &str| read(p).ok_or_else(|| KubeconfigError::Unreadable { path: p.to_string() });
        let auth = match user {
            Some(u) if !u.token.is_empty() => Auth::Token(u.token.clone()),
            Some(u) if !u.client_certificate_data.is_empty() || !u.client_certificate.is_empty() => {
                let cert_pem = if u.client_certificate_data.is_empty() {
                    file(&u.client_certificate)?
                } else {
                    data("client-certificate-data", &u.client_certificate_data)?
                };
                let key_pem = if u.client_key_data.is_empty() {
                    file(&u.client_key)?
                } else {
                    data("client-key-data", &u.client_key_data)?
                };
                Auth::Cert { cert_pem, key_pem, user: kc.current_context.clone() }
            }
            _ => Auth::Anonymous,
        };
        Client::new(&cluster.server, Trust::Ca(ca), auth, timeout)
    }

    /// The same client in dry-run mode: requests go to `recorder`, never to the network.
    pub fn recording(mut self, recorder: Recorder) -> Client {
        self.record = Some(recorder);
        self
    }

    /// The same credentials, trust and timeouts (one TLS set-up) aimed at another base URL:
    /// etcd's client walks its endpoints this way.
    pub fn at(&self, base: &str) -> Client {
        Client {
            agent: self.agent.clone(),
            base: base.trim_end_matches('/').to_string(),
            token: self.token.clone(),
            who: self.who.clone(),
            record: self.record.clone(),
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn who(&self) -> &str {
        &self.who
    }

    /// One HTTP exchange: the status and the body (JSON when it parses, else a string).
    pub fn request(&self, method: &str, path: &str, body: Option<(&str, &Value)>) -> Result<(u16, Value), ApiError> {
        if let Some(r) = &self.record {
            let method = match method {
                "GET" => "GET",
                "POST" => "POST",
                "PUT" => "PUT",
                "PATCH" => "PATCH",
                "DELETE" => "DELETE",
                _ => "OTHER",
            };
            return Ok(r.exchange(method, path, body.map(|(_, v)| v), &self.who));
        }
        let url = format!("{}{path}", self.base);
        let mut resp = self.send(method, &url, body)?;
        let status = resp.status().as_u16();
        let mut text = String::new();
        resp.body_mut().as_reader().take(64 << 20).read_to_string(&mut text).map_err(|e| ApiError::Transport {
            kind: Transport::Other,
            url: url.clone(),
            detail: e.to_string(),
        })?;
        let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok((status, v))
    }

    fn send(
        &self,
        method: &str,
        url: &str,
        body: Option<(&str, &Value)>,
    ) -> Result<ureq::http::Response<ureq::Body>, ApiError> {
        let mut b = ureq::http::Request::builder().method(method).uri(url).header("Accept", "application/json");
        if let Some(t) = &self.token {
            b = b.header("Authorization", format!("Bearer {t}"));
        }
        let result = match body {
            Some((ct, v)) => b.header("Content-Type", ct).body(v.to_string()).map(|r| self.agent.run(r)),
            None => b.body(()).map(|r| self.agent.run(r)),
        };
        match result {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(error::classify(url, &e)),
            Err(e) => Err(bad(url, e)),
        }
    }

    fn status_error(&self, code: u16, body: &Value, what: String) -> ApiError {
        let reason = body["reason"].as_str().unwrap_or_default().to_string();
        let message = body["message"].as_str().map(str::to_string).unwrap_or_else(|| match body {
            Value::String(s) => s.chars().take(200).collect(),
            _ => String::new(),
        });
        ApiError::Status { code, reason, message, who: self.who.clone(), what }
    }

    /// GET an object; `None` on 404.
    pub fn get(&self, path: &str) -> Result<Option<Value>, ApiError> {
        let (code, body) = self.request("GET", path, None)?;
        match code {
            200 => Ok(Some(body)),
            404 => Ok(None),
            _ => Err(self.status_error(code, &body, format!("GET {path}"))),
        }
    }

    /// POST into a collection; 409 AlreadyExists is `Created::Exists`.
    pub fn create(&self, obj: &Value) -> Result<Created, ApiError> {
        let path = paths::collection(obj)?;
        let (code, body) = self.request("POST", &path, Some(("application/json", obj)))?;
        match code {
            200..=202 => Ok(Created::New(body)),
            409 => Ok(Created::Exists),
            _ => Err(self.status_error(code, &body, format!("creating {}", paths::describe(obj)))),
        }
    }

    /// Create, or replace what is there (kubeadm's CreateOrUpdate): POST, and on 409 PUT with
    /// the current resourceVersion, retrying if someone else wrote in between.
    pub fn apply(&self, obj: &Value) -> Result<(), ApiError> {
        match self.create(obj) {
            Ok(Created::New(_)) => return Ok(()),
            Ok(Created::Exists) => {}
            // A Service with a fixed clusterIP that exists already is refused as Invalid ("provided
            // IP is already allocated") before the name is checked; kubeadm's DNS addon tolerates
            // that and updates, and so do we.
            Err(e) if e.code() == Some(422) && obj["kind"] == "Service" => {}
            Err(e) => return Err(e),
        }
        let path = paths::object(obj)?;
        for _ in 0..5 {
            let Some(current) = self.get(&path)? else {
                // Deleted meanwhile: create again.
                if let Created::New(_) = self.create(obj)? {
                    return Ok(());
                }
                continue;
            };
            let mut next = obj.clone();
            next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
            let (code, body) = self.request("PUT", &path, Some(("application/json", &next)))?;
            match code {
                200 | 201 => return Ok(()),
                409 => continue,
                _ => return Err(self.status_error(code, &body, format!("updating {}", paths::describe(obj)))),
            }
        }
        Err(self.status_error(409, &Value::Null, format!("updating {} (kept conflicting)", paths::describe(obj))))
    }

    /// Create, or set only `obj`'s `data` keys on what is there, keeping its other keys, labels
    /// and annotations (kubeadm's CreateOrMutateConfigMap, as its upload-config uses it).
    pub fn create_or_set_data(&self, obj: &Value) -> Result<(), ApiError> {
        if let Created::New(_) = self.create(obj)? {
            return Ok(());
        }
        let path = paths::object(obj)?;
        for _ in 0..5 {
            let Some(mut current) = self.get(&path)? else {
                if let Created::New(_) = self.create(obj)? {
                    return Ok(());
                }
                continue;
            };
            if let Some(data) = obj["data"].as_object() {
                if !current["data"].is_object() {
                    current["data"] = serde_json::json!({});
                }
                for (k, v) in data {
                    current["data"][k] = v.clone();
                }
            }
            let (code, body) = self.request("PUT", &path, Some(("application/json", &current)))?;
            match code {
                200 | 201 => return Ok(()),
                409 => continue,
                _ => return Err(self.status_error(code, &body, format!("updating {}", paths::describe(obj)))),
            }
        }
        Err(self.status_error(409, &Value::Null, format!("updating {} (kept conflicting)", paths::describe(obj))))
    }

    /// JSON merge patch.
    pub fn merge_patch(&self, path: &str, patch: &Value) -> Result<Value, ApiError> {
        let (code, body) = self.request("PATCH", path, Some(("application/merge-patch+json", patch)))?;
        match code {
            200 | 201 => Ok(body),
            _ => Err(self.status_error(code, &body, format!("patching {path}"))),
        }
    }

    /// DELETE; `false` if it was already gone.
    pub fn delete(&self, path: &str) -> Result<bool, ApiError> {
        let (code, body) = self.request("DELETE", path, None)?;
        match code {
            200 | 202 => Ok(true),
            404 => Ok(false),
            _ => Err(self.status_error(code, &body, format!("deleting {path}"))),
        }
    }

    /// The items of a list.
    pub fn list(&self, path: &str) -> Result<Vec<Value>, ApiError> {
        match self.get(path)? {
            Some(v) => Ok(v["items"].as_array().cloned().unwrap_or_default()),
            None => Err(self.status_error(404, &Value::Null, format!("listing {path}"))),
        }
    }

    /// Follows a watch stream, calling `on_event(type, object)` until it returns `Some` or the
    /// server ends the stream (after `timeout`).
    pub fn watch<T>(
        &self,
        path: &str,
        timeout: Duration,
        mut on_event: impl FnMut(&str, &Value) -> Option<T>,
    ) -> Result<Option<T>, ApiError> {
        if let Some(r) = &self.record {
            // Only what the recorder's stand-in makes happen; otherwise a watch would only wait.
            return Ok(r.watch(path, &self.who).and_then(|o| on_event("MODIFIED", &o)));
        }
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = format!("{}{path}{sep}watch=true&timeoutSeconds={}", self.base, timeout.as_secs().max(1));
        let mut resp = self.send("GET", &url, None)?;
        let code = resp.status().as_u16();
        if code != 200 {
            let mut text = String::new();
            let _ = resp.body_mut().as_reader().take(1 << 20).read_to_string(&mut text);
            let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
            return Err(self.status_error(code, &body, format!("watching {path}")));
        }
        let reader = BufReader::new(resp.body_mut().as_reader());
        for line in reader.lines() {
            let line = line.map_err(|e| ApiError::Transport {
                kind: Transport::Other,
                url: url.clone(),
                detail: e.to_string(),
            })?;
            if line.trim().is_empty() {
                continue;
            }
            let ev: Value = serde_json::from_str(&line).map_err(|e| bad("a watch event", e))?;
            if let Some(t) = on_event(ev["type"].as_str().unwrap_or_default(), &ev["object"]) {
                return Ok(Some(t));
            }
        }
        Ok(None)
    }
}

/// The certificates of a PEM bundle; `what` names it in the error ("the cluster CA").
fn parse_certs(what: &str, pem: &[u8]) -> Result<Vec<Certificate<'static>>, ApiError> {
    let unusable = |detail: String| ApiError::BadCredentials { what: what.to_string(), detail };
    let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(pem)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => Some(Ok(c)),
            Ok(_) => None,
            Err(e) => Some(Err(unusable(e.to_string()))),
        })
        .collect::<Result<_, _>>()?;
    if certs.is_empty() {
        return Err(unusable("no PEM certificate found".into()));
    }
    Ok(certs)
}

/// A plain-HTTP GET that must answer 200 (the kubelet's local healthz endpoint).
/// Why a health endpoint said no, in a line: the checks a /livez or /readyz body marks failed
/// (`[-]…`), else a Status message, else the body cut short. The whole body is 40 lines of
/// passing checks, printed on every attempt.
pub(crate) fn why_unhealthy(body: &Value) -> String {
    if let Some(text) = body.as_str() {
        let failed: Vec<&str> = text.lines().filter(|l| l.starts_with("[-]")).collect();
        if !failed.is_empty() {
            return failed.join("; ");
        }
    }
    if let Some(msg) = body["message"].as_str() {
        return msg.to_string();
    }
    let text = body.as_str().map_or_else(|| body.to_string(), str::to_string);
    match text.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

pub(crate) fn http_ok(url: &str, timeout: Duration) -> Result<(), ApiError> {
    get_ok(url, timeout, false)
}

/// GET `url` over HTTPS without verifying the server, as kubeadm asks the controller-manager's
/// and scheduler's health endpoints (their serving certificates are self-signed at start).
pub(crate) fn https_ok_unverified(url: &str, timeout: Duration) -> Result<(), ApiError> {
    get_ok(url, timeout, true)
}

fn get_ok(url: &str, timeout: Duration, unverified: bool) -> Result<(), ApiError> {
    let tls = ureq::tls::TlsConfig::builder().disable_verification(unverified).build();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .tls_config(tls)
        .build()
        .into();
    match agent.get(url).call() {
        Ok(r) if r.status() == 200 => Ok(()),
        Ok(r) => Err(ApiError::Unhealthy { url: url.to_string(), code: r.status().as_u16() }),
        Err(e) => Err(error::classify(url, &e)),
    }
}

#[cfg(test)]
mod tests {
    use super::why_unhealthy;
    use serde_json::json;

    #[test]
    fn an_unhealthy_answer_comes_down_to_what_failed() {
        let livez = "[+]ping ok\n[+]etcd ok\n[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\nlivez check failed\n";
        assert_eq!(why_unhealthy(&json!(livez)), "[-]poststarthook/rbac/bootstrap-roles failed: reason withheld");
        let status =
            json!({"kind": "Status", "code": 403, "message": "forbidden: User \"x\" cannot get path \"/livez\""});
        assert_eq!(why_unhealthy(&status), "forbidden: User \"x\" cannot get path \"/livez\"");
        let long = "x".repeat(300);
        assert_eq!(why_unhealthy(&json!(long)).chars().count(), 201);
    }
}
