//! Watch streams: newline-delimited `{"type","object"}` events in a chunked
//! response, ended after `timeoutSeconds` like the real server does.

use crate::http::Chunked;
use crate::resources::Resource;
use crate::select::Selector;
use crate::server::Shared;
use crate::status::ApiError;
use crate::store::Store;
use serde_json::{Value, json};
use std::io::{self, Write};
use std::time::{Duration, Instant};

pub struct WatchRequest {
    pub resource: &'static Resource,
    /// Empty: all namespaces (or a cluster-scoped resource).
    pub namespace: String,
    pub selector: Selector,
    /// `resourceVersion=N`: replay changes after N instead of starting with
    /// the current objects as ADDED.
    pub since: Option<u64>,
    pub timeout: Duration,
}

impl WatchRequest {
    fn matches(&self, resource: &Resource, namespace: &str, object: &Value) -> bool {
        std::ptr::eq(resource, self.resource)
            && (self.namespace.is_empty() || self.namespace == namespace)
            && self.selector.matches(object)
    }

    /// Events after `after`, and the resourceVersion they bring us up to.
    fn collect(&self, store: &Store, after: u64) -> Result<(Vec<Value>, u64), ApiError> {
        let events = store
            .events_since(after)?
            .filter(|e| self.matches(e.resource, &e.namespace, &e.object))
            .map(|e| json!({"type": e.kind, "object": e.object}))
            .collect();
        Ok((events, store.resource_version()))
    }
}

fn line(event: &Value) -> Vec<u8> {
    let mut bytes = event.to_string().into_bytes();
    bytes.push(b'\n');
    bytes
}

pub fn stream<W: Write>(shared: &Shared, w: &mut W, req: WatchRequest) -> io::Result<()> {
    let deadline = Instant::now() + req.timeout;
    let (initial, mut last) = {
        let store = shared.lock();
        match req.since {
            None => {
                let objects: Vec<Value> = store
                    .list(req.resource, &req.namespace)
                    .filter(|o| req.selector.matches(o))
                    .map(|o| json!({"type": "ADDED", "object": o}))
                    .collect();
                (objects, store.resource_version())
            }
            Some(rv) => match req.collect(&store, rv) {
                Ok((events, last)) => (events, last),
                Err(e) => (vec![json!({"type": "ERROR", "object": e.to_status()})], u64::MAX),
            },
        }
    };
    let mut out = Chunked::start(w, "application/json")?;
    for e in &initial {
        out.send(&line(e))?;
    }
    while last != u64::MAX {
        let batch = {
            let mut store = shared.lock();
            loop {
                let (events, now_rv) = match req.collect(&store, last) {
                    Ok(x) => x,
                    Err(e) => (vec![json!({"type": "ERROR", "object": e.to_status()})], u64::MAX),
                };
                last = now_rv;
                let remaining = deadline.saturating_duration_since(Instant::now());
                if !events.is_empty() || remaining.is_zero() || shared.is_stopping() {
                    break events;
                }
                // Wake at least every second to notice a stop request.
                store = shared.wait_change(store, remaining.min(Duration::from_secs(1)));
            }
        };
        if batch.is_empty() {
            break;
        }
        for e in &batch {
            out.send(&line(e))?;
        }
    }
    out.finish()
}
