//! A small etcd v3 client over etcd's gRPC-JSON gateway (`POST /v3/...`, served by etcd 3.4 and
//! newer on its client port), on the project's one HTTP/TLS stack (`kube::Client`) with the
//! etcd CA and a client certificate. Like etcd's own client it walks its endpoints: one that is
//! down, has no leader or is a learner is skipped for the next.

use std::sync::Mutex;

use log::debug;
use serde_json::{Value, json};

use super::error::EtcdError;
use crate::fsutil::NodeFs;
use crate::kube::{self, ApiError, Auth, Trust};
use crate::paths;
use crate::timeouts::ETCD_REQUEST;

/// The client certificate kubeadm's etcd client uses (joins, health checks).
pub const HEALTHCHECK_CLIENT: &str = "etcd/healthcheck-client";
/// The API server's etcd client certificate.
pub const APISERVER_ETCD_CLIENT: &str = "apiserver-etcd-client";
const ETCD_CA: &str = "etcd/ca";

/// One etcd member as the member API reports it. A member added but never started has no name
/// and no client URLs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: u64,
    pub name: String,
    pub peer_urls: Vec<String>,
    pub client_urls: Vec<String>,
    pub is_learner: bool,
}

impl Member {
    pub(crate) fn has_peer_url(&self, url: &str) -> bool {
        self.peer_urls.iter().any(|u| u == url)
    }
    /// Started members have published their name.
    pub(crate) fn is_started(&self) -> bool {
        !self.name.is_empty()
    }
}

/// One endpoint's `Status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub version: String,
    pub member_id: u64,
    pub leader: u64,
    pub raft_index: u64,
    pub is_learner: bool,
    /// What the member reports wrong with itself (an alarm such as NOSPACE).
    pub errors: Vec<String>,
}

/// The etcd CA and a client certificate and key, as PEM; paths name them in errors. No Debug:
/// it holds a private key.
pub struct Credentials {
    ca: (String, Vec<u8>),
    cert: (String, Vec<u8>),
    key: (String, Vec<u8>),
}

impl Credentials {
    /// `<certs_dir>/etcd/ca.crt` and `<certs_dir>/<client>.{crt,key}` (`client` is
    /// [`HEALTHCHECK_CLIENT`] or [`APISERVER_ETCD_CLIENT`]) from the node's disk.
    pub fn load(fs: &NodeFs, certs_dir: &str, client: &str) -> Result<Credentials, EtcdError> {
        let read = |f: paths::File| {
            let path = f.as_str().to_string();
            match fs.read(&path) {
                Ok(Some(b)) => Ok((path, b)),
                Ok(None) => Err(EtcdError::MissingFile { path }),
                Err(e) => Err(EtcdError::BadCredentials { path, detail: e.to_string() }),
            }
        };
        Ok(Credentials {
            ca: read(paths::cert(certs_dir, ETCD_CA))?,
            cert: read(paths::cert(certs_dir, client))?,
            key: read(paths::key(certs_dir, client))?,
        })
    }

    pub fn from_pem(ca: Vec<u8>, cert: Vec<u8>, key: Vec<u8>) -> Credentials {
        Credentials {
            ca: ("the etcd CA".into(), ca),
            cert: ("the client certificate".into(), cert),
            key: ("the client key".into(), key),
        }
    }
}

pub struct Client {
    http: kube::Client,
    endpoints: Mutex<Vec<String>>,
    /// How long each member call is retried (kubeadm's `timeouts.etcdAPICall`).
    call_timeout: std::time::Duration,
}

/// The answer of a member call: etcd's member list after it.
fn members(v: &Value) -> Result<Vec<Member>, String> {
    let list = v["members"].as_array().ok_or("no \"members\" list")?;
    list.iter().map(member).collect()
}

/// uint64s come as JSON strings from the gateway; accept numbers too.
fn u64_of(v: &Value) -> Option<u64> {
    match v {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

fn member(v: &Value) -> Result<Member, String> {
    let id = u64_of(&v["ID"]).ok_or_else(|| format!("a member without a numeric ID: {v}"))?;
    Ok(Member {
        id,
        name: v["name"].as_str().unwrap_or_default().to_string(),
        peer_urls: strings(&v["peerURLs"]),
        client_urls: strings(&v["clientURLs"]),
        is_learner: v["isLearner"].as_bool().unwrap_or(false),
    })
}

impl Client {
    /// A client for `endpoints` (client URLs such as `https://10.0.0.11:2379`); every request
    /// is bounded by kubeadm's 2 s etcd timeout.
    pub fn new(endpoints: &[String], creds: &Credentials) -> Result<Client, EtcdError> {
        let auth =
            Auth::Cert { cert_pem: creds.cert.1.clone(), key_pem: creds.key.1.clone(), user: "etcd client".into() };
        // Every call names its endpoint (`kube::Client::at`), so the base is never used.
        let http = kube::Client::new("", Trust::Ca(creds.ca.1.clone()), auth, ETCD_REQUEST).map_err(|e| match e {
            ApiError::BadCredentials { what, detail } => {
                let path = if what.contains("CA") {
                    &creds.ca.0
                } else if what.contains("key") {
                    &creds.key.0
                } else {
                    &creds.cert.0
                };
                EtcdError::BadCredentials { path: path.clone(), detail }
            }
            other => EtcdError::BadCredentials { path: creds.cert.0.clone(), detail: other.to_string() },
        })?;
        let call_timeout = crate::timeouts::ETCD_API_CALL;
        Ok(Client { http, endpoints: Mutex::new(endpoints.to_vec()), call_timeout })
    }

    /// The same client in dry-run mode: calls go to `recorder`, never to etcd.
    pub fn recording(self, recorder: kube::Recorder) -> Client {
        Client { http: self.http.recording(recorder), ..self }
    }

    /// The same client with member calls retried for `timeout` (`timeouts.etcdAPICall`).
    pub fn with_call_timeout(self, timeout: std::time::Duration) -> Client {
        Client { call_timeout: timeout, ..self }
    }

    pub(crate) fn call_timeout(&self) -> std::time::Duration {
        self.call_timeout
    }

    pub fn endpoints(&self) -> Vec<String> {
        self.endpoints.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Adds an endpoint (a joining member's client URL) at the end, once.
    pub(crate) fn add_endpoint(&self, url: &str) {
        let mut eps = self.endpoints.lock().unwrap_or_else(|p| p.into_inner());
        if !eps.iter().any(|e| e == url) {
            eps.push(url.to_string());
        }
    }

    /// Replaces the endpoints with the client URLs of the started voting members (etcd's own
    /// client Sync): the member list, not the Pods, is the truth.
    pub fn sync(&self) -> Result<Vec<String>, EtcdError> {
        let list = self.member_list()?;
        let eps: Vec<String> =
            list.iter().filter(|m| m.is_started() && !m.is_learner).flat_map(|m| m.client_urls.clone()).collect();
        if eps.is_empty() {
            return Err(EtcdError::NoEndpoints { why: "no started voting member advertises a client URL".into() });
        }
        *self.endpoints.lock().unwrap_or_else(|p| p.into_inner()) = eps.clone();
        Ok(eps)
    }

    pub fn member_list(&self) -> Result<Vec<Member>, EtcdError> {
        self.call("MemberList", "/v3/cluster/member/list", &json!({}), members)
    }

    /// MemberAdd (`learner`: MemberAddAsLearner): the new member and the list after it.
    pub fn member_add(&self, peer_urls: &[String], learner: bool) -> Result<(Member, Vec<Member>), EtcdError> {
        let body = json!({ "peerURLs": peer_urls, "isLearner": learner });
        self.call("MemberAdd", "/v3/cluster/member/add", &body, |v| Ok((member(&v["member"])?, members(v)?)))
    }

    pub(crate) fn member_promote(&self, id: u64) -> Result<Vec<Member>, EtcdError> {
        self.call("MemberPromote", "/v3/cluster/member/promote", &json!({ "ID": id.to_string() }), members)
    }

    pub fn member_remove(&self, id: u64) -> Result<Vec<Member>, EtcdError> {
        self.call("MemberRemove", "/v3/cluster/member/remove", &json!({ "ID": id.to_string() }), members)
    }

    /// `Status` of one endpoint (no failover: the question is about that member).
    pub fn status(&self, endpoint: &str) -> Result<Status, EtcdError> {
        let v = self.call_at(endpoint, "Status", "/v3/maintenance/status", &json!({}))?;
        let bad = |detail: &str| EtcdError::BadAnswer {
            endpoint: endpoint.to_string(),
            call: "Status",
            http: 200,
            detail: detail.to_string(),
        };
        Ok(Status {
            version: v["version"].as_str().ok_or_else(|| bad("no version"))?.to_string(),
            member_id: u64_of(&v["header"]["member_id"]).ok_or_else(|| bad("no header.member_id"))?,
            leader: u64_of(&v["leader"]).unwrap_or(0),
            raft_index: u64_of(&v["raftIndex"]).unwrap_or(0),
            is_learner: v["isLearner"].as_bool().unwrap_or(false),
            errors: v["errors"]
                .as_array()
                .map(|a| a.iter().filter_map(|e| e.as_str().map(String::from)).collect())
                .unwrap_or_default(),
        })
    }

    /// One call, endpoint after endpoint until one answers for the cluster; the endpoint that
    /// answered goes first next time.
    fn call<T>(
        &self,
        call: &'static str,
        path: &str,
        body: &Value,
        parse: impl Fn(&Value) -> Result<T, String>,
    ) -> Result<T, EtcdError> {
        let endpoints = self.endpoints();
        let mut last = EtcdError::NoEndpoints { why: "the endpoint list is empty".into() };
        for (i, ep) in endpoints.iter().enumerate() {
            match self.call_at(ep, call, path, body) {
                Ok(v) => {
                    if i > 0 {
                        self.prefer(ep);
                    }
                    return parse(&v).map_err(|detail| EtcdError::BadAnswer {
                        endpoint: ep.clone(),
                        call,
                        http: 200,
                        detail,
                    });
                }
                Err(e) if e.try_next_endpoint() => {
                    debug!("[etcd] {e}; trying the next endpoint");
                    last = e;
                }
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    fn call_at(&self, endpoint: &str, call: &'static str, path: &str, body: &Value) -> Result<Value, EtcdError> {
        let (http, v) = self
            .http
            .at(endpoint)
            .request("POST", path, Some(("application/json", body)))
            .map_err(|e| EtcdError::from_api(endpoint, call, e))?;
        if http == 200 {
            return Ok(v);
        }
        let message = v["message"].as_str().or_else(|| v["error"].as_str());
        match (v["code"].as_i64(), message) {
            (Some(code), Some(m)) => {
                Err(EtcdError::Rejected { endpoint: endpoint.to_string(), call, http, code, message: m.to_string() })
            }
            _ => {
                let text = match &v {
                    Value::String(s) => s.trim().chars().take(200).collect(),
                    other => other.to_string().chars().take(200).collect(),
                };
                Err(EtcdError::BadAnswer { endpoint: endpoint.to_string(), call, http, detail: text })
            }
        }
    }

    fn prefer(&self, endpoint: &str) {
        put_first(&mut self.endpoints.lock().unwrap_or_else(|p| p.into_inner()), endpoint);
    }
}

/// Moves `endpoint` to the front, keeping the others in order.
fn put_first(eps: &mut [String], endpoint: &str) {
    if let Some(i) = eps.iter().position(|e| e == endpoint) {
        eps[..=i].rotate_right(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_lists_read_as_etcd_3_4_writes_them() {
        // A real etcd 3.4.23 answer to MemberAddAsLearner (IDs as strings, defaults omitted).
        let v: Value = serde_json::from_str(
            r#"{"header":{"cluster_id":"5095065068867908107","member_id":"6646560559792245563","raft_term":"2"},
            "member":{"ID":"927924914069292063","peerURLs":["https://127.0.0.3:32380"],"isLearner":true},
            "members":[{"ID":"927924914069292063","peerURLs":["https://127.0.0.3:32380"],"isLearner":true},
            {"ID":"6646560559792245563","name":"cp-1","peerURLs":["https://127.0.0.2:32380"],
            "clientURLs":["https://127.0.0.2:32379"]}]}"#,
        )
        .unwrap();
        let new = member(&v["member"]).unwrap();
        assert_eq!((new.id, new.is_learner, new.is_started()), (927924914069292063, true, false));
        let list = members(&v).unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[1].name, "cp-1");
        assert_eq!(list[1].client_urls, ["https://127.0.0.2:32379"]);
        assert!(!list[1].is_learner && list[1].has_peer_url("https://127.0.0.2:32380"));
        assert_eq!(member(&serde_json::json!({"ID": 7})).unwrap().id, 7);
        assert!(member(&serde_json::json!({"name": "x"})).unwrap_err().contains("without a numeric ID"));
        assert!(members(&serde_json::json!({})).is_err());
    }

    #[test]
    fn the_endpoint_that_answered_goes_first() {
        let mut eps: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        put_first(&mut eps, "c");
        assert_eq!(eps, ["c", "a", "b"]);
        put_first(&mut eps, "x");
        assert_eq!(eps, ["c", "a", "b"]);
    }

    #[test]
    fn unusable_credentials_are_named() {
        let creds = Credentials::from_pem(Vec::new(), Vec::new(), Vec::new());
        // Empty PEM: the CA is named in the error.
        let e = Client::new(&["https://a:2379".into()], &creds).err().expect("no CA");
        assert!(e.to_string().starts_with("the etcd CA is unusable"), "{e}");
    }
}
