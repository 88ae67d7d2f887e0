//! The plan's `objects`: the API requests join's phases sent, as the plan shows them.

use std::collections::HashSet;

use serde::Serialize;
use serde_json::Value;

use crate::kube::Exchange;

/// A request join sends.
#[derive(Debug, Serialize)]
pub(super) struct Request {
    pub(super) verb: &'static str,
    pub(super) kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) path: String,
    /// Who sends it: anonymous (discovery), the bootstrap token (TLS bootstrap) or admin.conf.
    #[serde(rename = "as")]
    pub(super) identity: &'static str,
    #[serde(skip_serializing_if = "Value::is_null")]
    pub(super) object: Value,
}

fn identity(who: &str) -> &'static str {
    if who.starts_with("bootstrap token") {
        "bootstrap token"
    } else if who.starts_with("client certificate") {
        "admin.conf"
    } else {
        "anonymous"
    }
}

/// The API requests in order: each read once (a re-read, or a read of what this run created,
/// adds nothing), every change the cluster accepts (a create of what exists changes nothing),
/// every watch.
pub(super) fn requests(exchanges: &[Exchange]) -> Vec<Request> {
    let mut created = HashSet::new();
    let mut read = HashSet::new();
    let mut out = Vec::new();
    for e in exchanges.iter().filter(|e| e.path.starts_with("/api/") || e.path.starts_with("/apis/")) {
        let identity = identity(&e.who);
        let (own, query) = e.path.split_once('?').unwrap_or((&e.path, ""));
        let change = !matches!(e.method, "GET" | "WATCH");
        if change && !(200..300).contains(&e.status) {
            continue;
        }
        match e.method {
            "GET" if created.contains(own) || !read.insert((e.path.clone(), identity)) => continue,
            "POST" => {
                if let Ok(p) = crate::kube::paths::object(&e.body) {
                    created.insert(p);
                }
            }
            _ => {}
        }
        out.push(request(e, identity, own, query));
    }
    out
}

/// One exchange as the plan shows it; `own` and `query` are its path's two halves.
fn request(e: &Exchange, identity: &'static str, own: &str, query: &str) -> Request {
    let meta = |v: &Value, field: &str| v["metadata"][field].as_str().unwrap_or_default().to_string();
    let kind = |v: &Value| v["kind"].as_str().unwrap_or_default().to_string();
    match e.method {
        "GET" => match e.answer["kind"].as_str().and_then(|k| k.strip_suffix("List")) {
            Some(kind) => Request {
                verb: "list",
                kind: kind.to_string(),
                namespace: namespace_of(own),
                name: String::new(),
                path: e.path.clone(),
                identity,
                object: Value::Null,
            },
            None => Request {
                verb: "get",
                kind: kind(&e.answer),
                namespace: meta(&e.answer, "namespace"),
                name: meta(&e.answer, "name"),
                path: e.path.clone(),
                identity,
                object: Value::Null,
            },
        },
        "POST" => Request {
            verb: "create",
            kind: kind(&e.body),
            namespace: meta(&e.body, "namespace"),
            name: meta(&e.body, "name"),
            path: e.path.clone(),
            identity,
            object: e.body.clone(),
        },
        "WATCH" => Request {
            verb: "watch",
            kind: kind(&e.answer),
            namespace: meta(&e.answer, "namespace"),
            name: query
                .split('&')
                .find_map(|q| q.strip_prefix("fieldSelector=metadata.name%3D"))
                .unwrap_or_default()
                .to_string(),
            path: own.to_string(),
            identity,
            object: Value::Null,
        },
        method => Request {
            verb: match method {
                "PUT" => "update",
                "PATCH" => "patch",
                _ => "delete",
            },
            kind: kind(&e.answer),
            namespace: meta(&e.answer, "namespace"),
            name: meta(&e.answer, "name"),
            path: e.path.clone(),
            identity,
            object: e.body.clone(),
        },
    }
}

/// `/api/v1/namespaces/<ns>/...` → ns.
fn namespace_of(path: &str) -> String {
    let mut parts = path.split('/');
    parts.find(|p| *p == "namespaces");
    parts.next().unwrap_or_default().to_string()
}
