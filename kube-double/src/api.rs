//! The request pipeline of the real server, in its order: authenticate,
//! authorise (RBAC on request attributes), then route to the REST handler.

use crate::auth::{self, UserInfo};
use crate::http::Request;
use crate::patch;
use crate::rbac::{self, Attributes};
use crate::resources::{self, ApiPath, CSRS, NAMESPACES, Resource, ResourcePath, SECRETS};
use crate::select::Selector;
use crate::server::Shared;
use crate::status::ApiError;
use crate::store::{Store, meta_str};
use crate::{csr, watch};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

pub const GIT_VERSION: &str = "v1.37.0";

pub enum Reply {
    Json(u16, Value),
    Text(u16, String),
    Watch(watch::WatchRequest),
}

impl From<ApiError> for Reply {
    fn from(e: ApiError) -> Reply {
        Reply::Json(e.code, e.to_status())
    }
}

fn verb_for(req: &Request, path: &ResourcePath) -> &'static str {
    let watching = matches!(req.query_param("watch"), Some("true" | "1"));
    match (req.method.as_str(), path.name.is_some()) {
        ("GET" | "HEAD", _) if watching => "watch",
        ("GET" | "HEAD", true) => "get",
        ("GET" | "HEAD", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

/// Authenticates, authorises and serves one request against the locked
/// store. Returns the user name (for the request log) and the reply.
pub fn handle(shared: &Shared, store: &mut Store, req: &Request, cert_user: Option<&UserInfo>) -> (String, Reply) {
    let user = match auth::authenticate(store, cert_user, req.header("authorization")) {
        Ok(u) => u,
        Err(e) => return (String::new(), e.into()),
    };
    let reply = match resources::parse_path(&req.path) {
        ApiPath::NonResource(path) | ApiPath::Discovery(path) => {
            // Non-resource verbs are the lower-cased HTTP method.
            let verb = match req.method.as_str() {
                "GET" | "HEAD" => "get".to_string(),
                m => m.to_ascii_lowercase(),
            };
            let attrs = Attributes::NonResource { verb: verb.clone(), path: path.clone() };
            if !rbac::authorize(store, &user, &attrs) {
                ApiError::forbidden(rbac::forbidden_message(&user, &attrs)).into()
            } else if verb != "get" {
                ApiError::method_not_allowed().into()
            } else {
                non_resource(&path)
            }
        }
        ApiPath::Resource(path) => {
            let verb = verb_for(req, &path);
            let attrs = Attributes::Resource {
                verb: verb.into(),
                group: path.group.clone(),
                resource: path.plural.clone(),
                subresource: path.subresource.clone().unwrap_or_default(),
                namespace: path.namespace.clone(),
                name: path.name.clone().unwrap_or_default(),
            };
            if !rbac::authorize(store, &user, &attrs) {
                ApiError::forbidden(rbac::forbidden_message(&user, &attrs)).into()
            } else {
                match rest(shared, store, req, &user, &path, verb) {
                    Ok(r) => r,
                    Err(e) => e.into(),
                }
            }
        }
    };
    (user.name, reply)
}

fn non_resource(path: &str) -> Reply {
    match path {
        "/healthz" | "/livez" | "/readyz" => Reply::Text(200, "ok".into()),
        p if p.starts_with("/healthz/") || p.starts_with("/livez/") || p.starts_with("/readyz/") => {
            Reply::Text(200, "ok".into())
        }
        "/version" | "/version/" => Reply::Json(
            200,
            json!({
                "major": "1", "minor": "37", "gitVersion": GIT_VERSION,
                "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
                "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25.0", "compiler": "gc",
                "platform": "linux/amd64",
            }),
        ),
        "/api" | "/api/" => Reply::Json(
            200,
            json!({"kind": "APIVersions", "versions": ["v1"],
                   "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]}),
        ),
        "/apis" | "/apis/" => {
            let mut groups: Vec<(&str, &str)> =
                resources::ALL.iter().filter(|r| !r.group.is_empty()).map(|r| (r.group, r.version)).collect();
            groups.sort();
            groups.dedup();
            let groups: Vec<Value> = groups
                .into_iter()
                .map(|(g, v)| {
                    let gv = json!({"groupVersion": format!("{g}/{v}"), "version": v});
                    json!({"name": g, "versions": [gv.clone()], "preferredVersion": gv})
                })
                .collect();
            Reply::Json(200, json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
        }
        p => {
            let list: Vec<Value> = resources::ALL
                .iter()
                .filter(|r| r.path_prefix() == p.trim_end_matches('/'))
                .map(|r| {
                    json!({"name": r.plural, "singularName": "", "namespaced": r.namespaced, "kind": r.kind,
                           "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]})
                })
                .collect();
            if list.is_empty() {
                return ApiError::no_route().into();
            }
            let gv = p.trim_start_matches("/apis/").trim_start_matches("/api/").trim_end_matches('/');
            Reply::Json(
                200,
                json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list}),
            )
        }
    }
}

fn parse_body(req: &Request) -> Result<Value, ApiError> {
    let body: Value = serde_json::from_slice(&req.body)
        .map_err(|e| ApiError::bad_request(format!("the body of the request could not be decoded as JSON: {e}")))?;
    if !body.is_object() {
        return Err(ApiError::bad_request("the body of the request must be a JSON object"));
    }
    Ok(body)
}

/// Checks the body's namespace against the URL's, as the real handlers do.
fn check_namespace(body: &Value, namespace: &str) -> Result<(), ApiError> {
    let ns = meta_str(body, "namespace");
    if !ns.is_empty() && ns != namespace {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

/// Secrets accept write-only `stringData`, merged into base64 `data`.
fn normalize_secret(obj: &mut Value) {
    let Some(string_data) = obj.as_object_mut().and_then(|m| m.remove("stringData")) else { return };
    if !obj["data"].is_object() {
        obj["data"] = json!({});
    }
    for (k, v) in string_data.as_object().into_iter().flatten() {
        obj["data"][k] = STANDARD.encode(v.as_str().unwrap_or("")).into();
    }
}

fn rest(
    shared: &Shared,
    store: &mut Store,
    req: &Request,
    user: &UserInfo,
    path: &ResourcePath,
    verb: &str,
) -> Result<Reply, ApiError> {
    let r = resources::lookup(&path.group, &path.version, &path.plural).ok_or_else(ApiError::no_route)?;
    // A namespaced resource needs a namespace except for all-namespace
    // reads; a cluster-scoped one must not have one.
    if (r.namespaced && path.namespace.is_empty() && !matches!(verb, "list" | "watch"))
        || (!r.namespaced && !path.namespace.is_empty())
    {
        return Err(ApiError::no_route());
    }
    let ns = path.namespace.as_str();
    let sub = path.subresource.as_deref().unwrap_or("");
    let sub_ok = match sub {
        "" => true,
        "status" => r.has_status,
        "approval" => std::ptr::eq(r, &CSRS),
        _ => false,
    };
    if !sub_ok {
        return Err(ApiError::no_route());
    }
    match (verb, path.name.as_deref()) {
        ("get", Some(name)) => Ok(Reply::Json(200, store.get(r, ns, name)?.clone())),
        ("list", None) => list(store, r, ns, req),
        ("watch", name) => {
            let mut selector = Selector::parse(req.query_param("labelSelector"), req.query_param("fieldSelector"))?;
            if let Some(name) = name {
                selector = Selector::parse(req.query_param("labelSelector"), Some(&format!("metadata.name={name}")))?;
            }
            let since = match req.query_param("resourceVersion") {
                None | Some("") | Some("0") => None,
                Some(v) => Some(
                    v.parse::<u64>().map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {v:?}")))?,
                ),
            };
            let timeout = match req.query_param("timeoutSeconds").and_then(|t| t.parse::<u64>().ok()) {
                Some(t) => std::time::Duration::from_secs(t),
                None => shared.watch_timeout,
            };
            Ok(Reply::Watch(watch::WatchRequest { resource: r, namespace: ns.to_string(), selector, since, timeout }))
        }
        ("create", None) => {
            let mut body = parse_body(req)?;
            check_namespace(&body, ns)?;
            if std::ptr::eq(r, &SECRETS) {
                normalize_secret(&mut body);
            }
            if std::ptr::eq(r, &CSRS) {
                body = csr::prepare_create(body, user)?;
            }
            if std::ptr::eq(r, &NAMESPACES) {
                body["status"] = json!({"phase": "Active"});
                body["spec"] = json!({"finalizers": ["kubernetes"]});
            }
            let created = store.create(r, ns, body)?;
            shared.settle(store);
            Ok(Reply::Json(201, created))
        }
        ("update", Some(name)) => {
            let body = parse_body(req)?;
            let new = updated_object(store, r, ns, name, sub, user, body)?;
            let stored = store.replace(r, ns, name, new)?;
            shared.settle(store);
            Ok(Reply::Json(200, stored))
        }
        ("patch", Some(name)) => {
            let patch_body: Value = serde_json::from_slice(&req.body)
                .map_err(|e| ApiError::bad_request(format!("the body of the request could not be decoded: {e}")))?;
            let mut target = store.get(r, ns, name)?.clone();
            let content_type = req.header("content-type").unwrap_or("").split(';').next().unwrap_or("").trim();
            match content_type {
                "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                    patch::merge_patch(&mut target, &patch_body)
                }
                "application/json-patch+json" => patch::json_patch(&mut target, &patch_body)?,
                other => return Err(ApiError::unsupported_media_type(other)),
            }
            let new = updated_object(store, r, ns, name, sub, user, target)?;
            let stored = store.replace(r, ns, name, new)?;
            shared.settle(store);
            Ok(Reply::Json(200, stored))
        }
        ("delete", Some(name)) if sub.is_empty() => {
            let deleted = store.delete(r, ns, name)?;
            shared.settle(store);
            Ok(Reply::Json(200, deleted))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn list(store: &Store, r: &'static Resource, ns: &str, req: &Request) -> Result<Reply, ApiError> {
    let selector = Selector::parse(req.query_param("labelSelector"), req.query_param("fieldSelector"))?;
    let items: Vec<Value> = store.list(r, ns).filter(|o| selector.matches(o)).cloned().collect();
    Ok(Reply::Json(
        200,
        json!({
            "kind": format!("{}List", r.kind),
            "apiVersion": r.api_version(),
            "metadata": {"resourceVersion": store.resource_version().to_string()},
            "items": items,
        }),
    ))
}

/// The object an update or patch stores: name checks, per-subresource field
/// ownership, and the CSR approval admission check.
fn updated_object(
    store: &Store,
    r: &'static Resource,
    ns: &str,
    name: &str,
    sub: &str,
    user: &UserInfo,
    mut body: Value,
) -> Result<Value, ApiError> {
    let body_name = meta_str(&body, "name");
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    check_namespace(&body, ns)?;
    let old = store.get(r, ns, name)?;
    if std::ptr::eq(r, &CSRS) {
        if !sub.is_empty() {
            // The CertificateApproval / CertificateSigning admission plugins:
            // approving or signing needs a verb on the signer itself.
            let verb = if sub == "approval" { "approve" } else { "sign" };
            let signer = old["spec"]["signerName"].as_str().unwrap_or("");
            let domain_wildcard = format!("{}/*", signer.split('/').next().unwrap_or(""));
            let allowed = [signer, domain_wildcard.as_str()].iter().any(|n| {
                rbac::authorize(
                    store,
                    user,
                    &Attributes::Resource {
                        verb: verb.into(),
                        group: "certificates.k8s.io".into(),
                        resource: "signers".into(),
                        subresource: String::new(),
                        namespace: String::new(),
                        name: n.to_string(),
                    },
                )
            });
            if !allowed {
                return Err(ApiError::forbidden(format!(
                    "certificatesigningrequests.certificates.k8s.io \"{name}\" is forbidden: user not permitted to {verb} requests with signerName \"{signer}\""
                )));
            }
        }
        return csr::prepare_update(old, &body, sub);
    }
    if std::ptr::eq(r, &SECRETS) {
        normalize_secret(&mut body);
    }
    if r.has_status {
        if sub == "status" {
            let mut new = old.clone();
            new["status"] = body["status"].clone();
            new["metadata"]["resourceVersion"] = body["metadata"]["resourceVersion"].clone();
            return Ok(new);
        }
        // Main-resource writes cannot change status.
        match old.get("status") {
            Some(s) => body["status"] = s.clone(),
            None => {
                if let Some(m) = body.as_object_mut() {
                    m.remove("status");
                }
            }
        }
    }
    Ok(body)
}
