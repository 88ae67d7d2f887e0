//! Dry run: a stand-in for the API server behind [`super::Client`]. It answers at once, from
//! what this run has "created", and records every change in order, so the same phase code
//! that talks to a real cluster produces the plan of what it would create or patch.
//!
//! Like kubeadm's dry-run client, it answers the reads init depends on with what a healthy
//! cluster would say: `/livez` is ok, and the Node the kubelet registers exists. A join's dry
//! run seeds it with what the cluster holds and a [`StandIn`] for the rest (etcd, the CSR
//! signer), and reads its [`Exchange`] log, which also has the reads and who made them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use serde_json::{Value, json};

/// One change the run would make.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recorded {
    /// create, update, patch or delete.
    pub verb: &'static str,
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
    /// The request path (for a create, the collection it is posted to).
    pub path: String,
    /// The object sent (for a patch, the patch), Secret values redacted.
    pub object: Value,
}

/// One request as sent (reads included), for a join's plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// GET, POST, PUT, PATCH, DELETE, or WATCH.
    pub method: &'static str,
    pub path: String,
    /// The client's identity ([`super::Client::who`]).
    pub who: String,
    pub body: Value,
    pub status: u16,
    pub answer: Value,
}

/// The rest of a cluster, for what the recorder does not hold: requests it alone can answer
/// (etcd's gateway), and what a watch sees happen to a stored object (a signer issuing a CSR).
pub trait StandIn: Send + Sync {
    fn answer(&self, method: &str, path: &str, body: &Value) -> Option<(u16, Value)>;
    /// The object as a watch would next see it; `None`: nothing happens.
    fn watched(&self, object: &Value) -> Option<Value>;
}

#[derive(Default)]
struct State {
    /// Objects by their own path.
    objects: BTreeMap<String, Value>,
    log: Vec<Recorded>,
    exchanges: Vec<Exchange>,
    stand_in: Option<Arc<dyn StandIn>>,
}

/// Shared by every client of one dry run (each phase makes its own).
#[derive(Clone, Default)]
pub struct Recorder(Arc<Mutex<State>>);

impl Recorder {
    /// The changes so far, in order.
    pub(crate) fn recorded(&self) -> Vec<Recorded> {
        self.state().log.clone()
    }

    /// Every request so far (reads included), in order.
    pub(crate) fn exchanges(&self) -> Vec<Exchange> {
        self.state().exchanges.clone()
    }

    /// An object the cluster already holds, at its own path (or a list at its query path).
    pub fn seed(&self, path: &str, object: Value) {
        self.state().objects.insert(path.to_string(), object);
    }

    pub(crate) fn set_stand_in(&self, stand_in: Arc<dyn StandIn>) {
        self.state().stand_in = Some(stand_in);
    }

    /// [`Self::answer`], logged as an exchange made by `who`.
    pub(crate) fn exchange(&self, method: &'static str, path: &str, body: Option<&Value>, who: &str) -> (u16, Value) {
        let stand_in = self.state().stand_in.clone();
        let sent = body.cloned().unwrap_or(Value::Null);
        let (status, answer) = match stand_in.and_then(|s| s.answer(method, path, &sent)) {
            Some(a) => a,
            None => self.answer(method, path, body),
        };
        let e = Exchange { method, path: path.into(), who: who.into(), body: sent, status, answer: answer.clone() };
        self.state().exchanges.push(e);
        (status, answer)
    }

    /// A watch of `<collection>?fieldSelector=metadata.name%3D<name>`: the stored object as the
    /// stand-in says a watch sees it next (nothing if it says nothing happens).
    pub fn watch(&self, path: &str, who: &str) -> Option<Value> {
        let (collection, query) = path.split_once('?').unwrap_or((path, ""));
        let name = query.split('&').find_map(|q| q.strip_prefix("fieldSelector=metadata.name%3D"));
        let (stored, stand_in) = {
            let s = self.state();
            (name.and_then(|n| s.objects.get(&format!("{collection}/{n}")).cloned()), s.stand_in.clone())
        };
        let seen = stored.as_ref().zip(stand_in).and_then(|(o, s)| s.watched(o));
        let e = Exchange {
            method: "WATCH",
            path: path.into(),
            who: who.into(),
            body: Value::Null,
            status: 200,
            answer: seen.clone().or(stored).unwrap_or(Value::Null),
        };
        self.state().exchanges.push(e);
        seen
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere cannot leave the map half-written: every update is one insert.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The answer the API server would give: (status, body).
    pub fn answer(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let mut s = self.state();
        let body = body.cloned().unwrap_or(Value::Null);
        match method {
            "GET" => match s.objects.get(path) {
                Some(o) => (200, o.clone()),
                None if path == "/livez" || path == "/readyz" || path == "/healthz" => (200, json!("ok")),
                None => match node_name(path) {
                    Some(name) => (200, registered_node(name)),
                    None => (404, status(404, "NotFound", &format!("{path} not found (dry run)"))),
                },
            },
            "POST" => {
                let Ok(own) = super::paths::object(&body) else {
                    return (422, status(422, "Invalid", "object without a REST path"));
                };
                if s.objects.contains_key(&own) {
                    return (409, status(409, "AlreadyExists", &format!("{own} already exists")));
                }
                // As the server: a created object has a uid (owner references point at it).
                let mut stored = body.clone();
                if let Some(meta) = stored.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.insert("uid".into(), json!(format!("dry-run-{}", s.log.len() + 1)));
                }
                s.objects.insert(own, stored.clone());
                s.log.push(recorded("create", path, &body, &body));
                (201, stored)
            }
            "PUT" => {
                s.objects.insert(path.to_string(), body.clone());
                s.log.push(recorded("update", path, &body, &body));
                (200, body)
            }
            "PATCH" => {
                let current = s.objects.get(path).cloned().unwrap_or_else(|| identity_from_path(path));
                s.log.push(recorded("patch", path, &current, &body));
                (200, current)
            }
            "DELETE" => {
                let current = s.objects.remove(path).unwrap_or_else(|| identity_from_path(path));
                s.log.push(recorded("delete", path, &current, &Value::Null));
                (200, status(200, "", "deleted"))
            }
            _ => (405, status(405, "MethodNotAllowed", method)),
        }
    }
}

fn recorded(verb: &'static str, path: &str, identity: &Value, sent: &Value) -> Recorded {
    let meta = &identity["metadata"];
    Recorded {
        verb,
        kind: identity["kind"].as_str().unwrap_or_default().to_string(),
        namespace: meta["namespace"].as_str().unwrap_or_default().to_string(),
        name: meta["name"].as_str().unwrap_or_default().to_string(),
        path: path.to_string(),
        object: redacted(sent),
    }
}

/// Bootstrap-token Secret keys that are not secret (kubeadm prints them in `token list`).
const PUBLIC_SECRET_KEYS: &[&str] = &["token-id", "description", "expiration", "auth-extra-groups"];

/// A Secret with every secret value replaced: a plan is printed, and secrets are never shown.
fn redacted(obj: &Value) -> Value {
    let mut o = obj.clone();
    if o["kind"] == "Secret" {
        for field in ["data", "stringData"] {
            if let Some(m) = o.get_mut(field).and_then(Value::as_object_mut) {
                for (k, v) in m.iter_mut() {
                    if !(PUBLIC_SECRET_KEYS.contains(&k.as_str()) || k.starts_with("usage-bootstrap-")) {
                        *v = json!("<redacted>");
                    }
                }
            }
        }
    }
    o
}

/// `/api/v1/nodes/<name>` → the name.
fn node_name(path: &str) -> Option<&str> {
    path.strip_prefix("/api/v1/nodes/").filter(|n| !n.is_empty() && !n.contains('/'))
}

/// The Node a kubelet would have registered by the time init looks for it.
fn registered_node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}}, "spec": {}})
}

/// kind/namespace/name read back from a path, for changes to objects this run did not create.
fn identity_from_path(path: &str) -> Value {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let (resource, name) = match parts.as_slice() {
        [.., r, n] => (*r, *n),
        _ => ("", ""),
    };
    let namespace = parts.iter().position(|p| *p == "namespaces").and_then(|i| parts.get(i + 1)).copied();
    let namespace = namespace.filter(|_| resource != "namespaces").unwrap_or_default();
    let kind = match resource {
        "nodes" => "Node",
        other => other,
    };
    json!({"kind": kind, "metadata": {"name": name, "namespace": namespace}})
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "code": code, "reason": reason, "message": message})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_conflict_once_made_and_changes_are_logged_in_order() {
        let r = Recorder::default();
        let cm =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "kube-system"}});
        let coll = "/api/v1/namespaces/kube-system/configmaps";
        assert_eq!(r.answer("POST", coll, Some(&cm)).0, 201);
        assert_eq!(r.answer("POST", coll, Some(&cm)).0, 409);
        let (code, stored) = r.answer("GET", &format!("{coll}/c"), None);
        assert_eq!((code, &stored["metadata"]["name"]), (200, &cm["metadata"]["name"]));
        assert_eq!(stored["metadata"]["uid"], "dry-run-1", "a created object has a uid, as on the server");
        assert_eq!(r.answer("GET", &format!("{coll}/d"), None).0, 404);
        assert_eq!(r.answer("PATCH", "/api/v1/nodes/cp-1", Some(&json!({"spec": {}}))).0, 200);
        let log = r.recorded();
        assert_eq!(log.len(), 2);
        assert_eq!((log[0].verb, log[0].kind.as_str(), log[0].name.as_str()), ("create", "ConfigMap", "c"));
        assert_eq!((log[1].verb, log[1].kind.as_str(), log[1].name.as_str()), ("patch", "Node", "cp-1"));
    }

    struct Signer;
    impl StandIn for Signer {
        fn answer(&self, _: &str, path: &str, _: &Value) -> Option<(u16, Value)> {
            (path == "/v3/x").then(|| (200, json!({"etcd": true})))
        }
        fn watched(&self, o: &Value) -> Option<Value> {
            let mut o = o.clone();
            o["status"] = json!({"certificate": "Yw=="});
            Some(o)
        }
    }

    #[test]
    fn reads_are_logged_with_who_and_a_stand_in_answers_the_rest() {
        let r = Recorder::default();
        r.seed("/api/v1/namespaces/kube-system/configmaps/c", json!({"kind": "ConfigMap"}));
        assert_eq!(r.exchange("GET", "/api/v1/namespaces/kube-system/configmaps/c", None, "me").0, 200);
        assert_eq!(r.exchange("POST", "/v3/x", Some(&json!({})), "etcd").0, 422, "no stand-in yet");
        r.set_stand_in(Arc::new(Signer));
        assert_eq!(r.exchange("POST", "/v3/x", Some(&json!({})), "etcd").1["etcd"], true);
        let csr = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                         "metadata": {"name": "n"}});
        let csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
        r.exchange("POST", csrs, Some(&csr), "token");
        let seen = r.watch(&format!("{csrs}?fieldSelector=metadata.name%3Dn"), "token").unwrap();
        assert_eq!(seen["status"]["certificate"], "Yw==");
        let log: Vec<(&str, String)> = r.exchanges().iter().map(|e| (e.method, e.who.clone())).collect();
        assert_eq!(log.len(), 5);
        assert_eq!((log[0].0, log[0].1.as_str()), ("GET", "me"));
        assert_eq!(log[4].0, "WATCH");
        assert_eq!(r.recorded().len(), 1, "only the create is a change");
    }

    #[test]
    fn a_healthy_cluster_is_assumed_and_secrets_are_hidden() {
        let r = Recorder::default();
        assert_eq!(r.answer("GET", "/livez", None).0, 200);
        assert_eq!(r.answer("GET", "/api/v1/nodes/cp-1", None).1["metadata"]["name"], "cp-1");
        let s = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "kube-system"},
                       "data": {"token-secret": "MDEyMzQ1Njc4OWFiY2RlZg==", "token-id": "YWJjZGVm", "other": "eA=="}});
        r.answer("POST", "/api/v1/namespaces/kube-system/secrets", Some(&s));
        let data = &r.recorded()[0].object["data"];
        assert_eq!((&data["token-secret"], &data["other"]), (&json!("<redacted>"), &json!("<redacted>")));
        assert_eq!(data["token-id"], "YWJjZGVm");
        // What later reads see is the real object.
        let back = r.answer("GET", "/api/v1/namespaces/kube-system/secrets/s", None).1;
        assert_eq!(back["data"]["token-secret"], "MDEyMzQ1Njc4OWFiY2RlZg==");
    }
}
