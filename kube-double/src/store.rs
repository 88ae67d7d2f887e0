//! In-memory object storage: objects, the global resourceVersion counter, the
//! watch event history and the request log, all behind the one mutex in
//! `Shared` so every request sees a consistent snapshot.

use crate::resources::{self, NAMESPACES, Resource};
use crate::status::ApiError;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

/// How many watch events are kept for `resourceVersion=N` resumption; older
/// resumptions get 410 Gone like a compacted etcd.
const EVENT_HISTORY: usize = 10_000;

/// Test knobs that can change while the server runs.
#[derive(Debug, Clone)]
pub struct Knobs {
    pub auto_approve: bool,
    pub deny_csrs: bool,
    pub legacy_approver: bool,
    pub signer_delay: Duration,
}

/// One served request, as `Handle::request_log` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedRequest {
    pub method: String,
    /// Path without the query string.
    pub path: String,
    pub query: String,
    /// Authenticated user name; empty when authentication failed (401).
    pub user: String,
    pub status: u16,
}

#[derive(Debug, Clone)]
pub struct Event {
    pub rv: u64,
    pub resource: &'static Resource,
    pub namespace: String,
    pub kind: &'static str,
    pub object: Value,
}

type Key = (&'static str, &'static str);

pub struct Store {
    objects: HashMap<Key, BTreeMap<(String, String), Value>>,
    rv: u64,
    events: VecDeque<Event>,
    pub log: Vec<LoggedRequest>,
    pub knobs: Knobs,
    /// When the bootstrap signer first saw cluster-info needing new
    /// signatures; signing waits until `signer_delay` has passed since.
    pub signer_pending_since: Option<Instant>,
}

fn key(r: &Resource) -> Key {
    (r.group, r.plural)
}

/// A random RFC 4122 version-4 UUID, the format of `metadata.uid`.
pub fn new_uid() -> String {
    let mut b = [0u8; 16];
    random_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

pub fn random_bytes(buf: &mut [u8]) {
    use ring::rand::SecureRandom;
    // The system RNG failing means the OS is unusable; a test double can
    // fall back to time-derived bytes rather than crash a test.
    if ring::rand::SystemRandom::new().fill(buf).is_err() {
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (seed >> ((i % 16) * 8)) as u8 ^ i as u8;
        }
    }
}

/// RFC 3339 UTC with second precision, as Kubernetes writes timestamps.
pub fn now_rfc3339() -> String {
    rfc3339(time::OffsetDateTime::now_utc())
}

pub fn rfc3339(t: time::OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or("")
}

/// `obj.metadata` as a mutable map, creating it if absent or not an object.
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let Some(map) = obj.as_object_mut() else { unreachable!("made an object above") };
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    match meta.as_object_mut() {
        Some(m) => m,
        None => unreachable!("made an object above"),
    }
}

impl Store {
    pub fn new(knobs: Knobs) -> Store {
        let mut store = Store {
            objects: HashMap::new(),
            rv: 0,
            events: VecDeque::new(),
            log: Vec::new(),
            knobs,
            signer_pending_since: None,
        };
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            // Cannot fail: the store is empty and the names are valid.
            let _ = store.create(&NAMESPACES, "", json!({"metadata": {"name": ns}}));
        }
        for obj in crate::rbac::bootstrap_policy() {
            let r = resources::by_kind(
                obj["apiVersion"].as_str().unwrap_or_default(),
                obj["kind"].as_str().unwrap_or_default(),
            );
            if let Some(r) = r {
                let _ = store.create(r, "", obj);
            }
        }
        store
    }

    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    pub fn get(&self, r: &'static Resource, namespace: &str, name: &str) -> Result<&Value, ApiError> {
        self.objects
            .get(&key(r))
            .and_then(|m| m.get(&(namespace.to_string(), name.to_string())))
            .ok_or_else(|| ApiError::not_found(&r.qualified(), name))
    }

    pub fn try_get(&self, r: &'static Resource, namespace: &str, name: &str) -> Option<&Value> {
        self.get(r, namespace, name).ok()
    }

    /// All objects of a resource, in one namespace or (empty `namespace`) all.
    pub fn list<'a>(&'a self, r: &'static Resource, namespace: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.objects
            .get(&key(r))
            .into_iter()
            .flat_map(|m| m.iter())
            .filter(move |((ns, _), _)| namespace.is_empty() || ns == namespace)
            .map(|(_, v)| v)
    }

    fn bump(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn record(&mut self, r: &'static Resource, kind: &'static str, object: &Value) {
        self.events.push_back(Event {
            rv: self.rv,
            resource: r,
            namespace: meta_str(object, "namespace").to_string(),
            kind,
            object: object.clone(),
        });
        while self.events.len() > EVENT_HISTORY {
            self.events.pop_front();
        }
    }

    /// Events after `rv`, or Gone if history no longer reaches back that far.
    pub fn events_since(&self, rv: u64) -> Result<impl Iterator<Item = &Event>, ApiError> {
        if let Some(first) = self.events.front()
            && first.rv > rv + 1
            && rv < self.rv
        {
            return Err(ApiError::gone(format!("too old resource version: {rv} ({})", first.rv - 1)));
        }
        Ok(self.events.iter().filter(move |e| e.rv > rv))
    }

    /// Stores a new object. The caller has already authorised and validated
    /// it; this enforces what storage itself guarantees (name, namespace
    /// existence, uniqueness) and fills server-owned metadata.
    pub fn create(&mut self, r: &'static Resource, namespace: &str, mut obj: Value) -> Result<Value, ApiError> {
        if r.namespaced && self.try_get(&NAMESPACES, "", namespace).is_none() {
            return Err(ApiError::not_found("namespaces", namespace));
        }
        let mut name = meta_str(&obj, "name").to_string();
        if name.is_empty() {
            let generate = meta_str(&obj, "generateName").to_string();
            if generate.is_empty() {
                return Err(ApiError::invalid(
                    r.kind,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
            name = format!("{generate}{}", random_suffix());
        }
        validate_name(r, &name)?;
        if self.try_get(r, namespace, &name).is_some() {
            return Err(ApiError::already_exists(&r.qualified(), &name));
        }
        let rv = self.bump();
        if let Some(map) = obj.as_object_mut() {
            map.insert("apiVersion".into(), r.api_version().into());
            map.insert("kind".into(), r.kind.into());
        }
        let meta = metadata_mut(&mut obj);
        meta.insert("name".into(), name.clone().into());
        if r.namespaced {
            meta.insert("namespace".into(), namespace.into());
        } else {
            meta.remove("namespace");
        }
        meta.insert("uid".into(), new_uid().into());
        meta.insert("resourceVersion".into(), rv.to_string().into());
        meta.insert("creationTimestamp".into(), now_rfc3339().into());
        meta.remove("deletionTimestamp");
        self.objects.entry(key(r)).or_default().insert((namespace.to_string(), name), obj.clone());
        self.record(r, "ADDED", &obj);
        Ok(obj)
    }

    /// Replaces an existing object. `obj.metadata.resourceVersion`, when set,
    /// is an optimistic-concurrency precondition (409 Conflict on mismatch).
    pub fn replace(
        &mut self,
        r: &'static Resource,
        namespace: &str,
        name: &str,
        mut obj: Value,
    ) -> Result<Value, ApiError> {
        let old = self.get(r, namespace, name)?;
        let want_rv = meta_str(&obj, "resourceVersion");
        if !want_rv.is_empty() && want_rv != meta_str(old, "resourceVersion") {
            return Err(ApiError::conflict(&r.qualified(), name));
        }
        let uid = meta_str(old, "uid").to_string();
        let created = meta_str(old, "creationTimestamp").to_string();
        let rv = self.bump();
        if let Some(map) = obj.as_object_mut() {
            map.insert("apiVersion".into(), r.api_version().into());
            map.insert("kind".into(), r.kind.into());
        }
        let meta = metadata_mut(&mut obj);
        meta.insert("name".into(), name.into());
        if r.namespaced {
            meta.insert("namespace".into(), namespace.into());
        }
        meta.insert("uid".into(), uid.into());
        meta.insert("creationTimestamp".into(), created.into());
        meta.insert("resourceVersion".into(), rv.to_string().into());
        self.objects.entry(key(r)).or_default().insert((namespace.to_string(), name.to_string()), obj.clone());
        self.record(r, "MODIFIED", &obj);
        Ok(obj)
    }

    pub fn delete(&mut self, r: &'static Resource, namespace: &str, name: &str) -> Result<Value, ApiError> {
        let k = (namespace.to_string(), name.to_string());
        let Some(mut obj) = self.objects.get_mut(&key(r)).and_then(|m| m.remove(&k)) else {
            return Err(ApiError::not_found(&r.qualified(), name));
        };
        let rv = self.bump();
        metadata_mut(&mut obj).insert("resourceVersion".into(), rv.to_string().into());
        self.record(r, "DELETED", &obj);
        Ok(obj)
    }
}

/// Names end up in URL paths; the real server rejects these outright.
fn validate_name(r: &Resource, name: &str) -> Result<(), ApiError> {
    if name == "." || name == ".." || name.contains('/') || name.contains('%') {
        return Err(ApiError::invalid(
            r.kind,
            name,
            &format!("metadata.name: Invalid value: {name:?}: may not contain '/' or '%' or be '.' or '..'"),
        ));
    }
    if name.len() > 253 {
        return Err(ApiError::invalid(
            r.kind,
            name,
            "metadata.name: Invalid value: must be no more than 253 characters",
        ));
    }
    Ok(())
}

/// The 5-character suffix apimachinery appends for `generateName`.
fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut b = [0u8; 5];
    random_bytes(&mut b);
    b.iter().map(|x| ALPHABET[*x as usize % ALPHABET.len()] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::CONFIGMAPS;

    fn store() -> Store {
        Store::new(Knobs { auto_approve: true, deny_csrs: false, legacy_approver: false, signer_delay: Duration::ZERO })
    }

    #[test]
    fn create_replace_delete() {
        let mut s = store();
        let cm = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
        let created = s.create(&CONFIGMAPS, "default", cm.clone()).unwrap();
        assert_eq!(meta_str(&created, "namespace"), "default");
        assert_eq!(s.create(&CONFIGMAPS, "default", cm.clone()).unwrap_err().code, 409);
        assert_eq!(s.create(&CONFIGMAPS, "nope", cm.clone()).unwrap_err().code, 404);
        let mut stale = created.clone();
        stale["metadata"]["resourceVersion"] = "1".into();
        assert_eq!(s.replace(&CONFIGMAPS, "default", "a", stale).unwrap_err().code, 409);
        let updated = s.replace(&CONFIGMAPS, "default", "a", created.clone()).unwrap();
        assert_eq!(meta_str(&updated, "uid"), meta_str(&created, "uid"));
        assert_ne!(meta_str(&updated, "resourceVersion"), meta_str(&created, "resourceVersion"));
        s.delete(&CONFIGMAPS, "default", "a").unwrap();
        assert_eq!(s.delete(&CONFIGMAPS, "default", "a").unwrap_err().code, 404);
        assert_eq!(s.replace(&CONFIGMAPS, "default", "a", cm).unwrap_err().code, 404);
    }

    #[test]
    fn uid_format() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }
}
