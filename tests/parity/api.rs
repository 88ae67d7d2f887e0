//! The API objects init creates: `kubeadm init --dry-run` (its fake client prints each object it
//! would create) against `kubestrap init --dry-run` (JSON), as facts keyed
//! `api <Kind> <namespace>/<name> <field>`. ConfigMap values that are YAML documents are
//! compared parsed; Secret values decoded; the token's expiration as a TTL.

use crate::facts::{Facts, flatten};
use crate::{bins, common};
use base64::Engine;
use serde_json::Value;
use std::path::Path;

/// The objects `kubeadm init --dry-run` would create, run like the on-disk phases (kubeadm.rs).
pub fn kubeadm(config: &Path, dir: &Path) -> Vec<Value> {
    let script = format!(
        "set -e; mkdir -p /etc/kubernetes; mount -t tmpfs none /etc/kubernetes; mount -t tmpfs none /var/lib\n\
         '{}' init --dry-run --config '{}' --ignore-preflight-errors=all\n",
        bins::bin("kubeadm").display(),
        config.display()
    );
    let file = dir.join("kubeadm-dry-run.sh");
    std::fs::write(&file, script).expect("write script");
    let (code, out, err) = common::sh(&format!("unshare --net --mount --propagation private sh '{}'", file.display()));
    assert_eq!(code, 0, "kubeadm init --dry-run failed:\n{out}\n{err}");
    created(&out)
}

/// The YAML after each `Would perform action CREATE ... Attached object:`, up to the next log
/// line (they all start with `[`).
pub fn created(out: &str) -> Vec<Value> {
    let lines: Vec<&str> = out.lines().collect();
    let mut objects = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let create = lines[i].starts_with("[dryrun] Would perform action CREATE");
        i += 1;
        if !create {
            continue;
        }
        while i < lines.len() && lines[i] != "[dryrun] Attached object:" {
            i += 1;
        }
        let start = i + 1;
        i = start;
        while i < lines.len() && !lines[i].starts_with('[') {
            i += 1;
        }
        let yaml = lines[start.min(i)..i].join("\n");
        objects.push(serde_yaml::from_str(&yaml).unwrap_or_else(|e| panic!("{e}:\n{yaml}")));
    }
    objects
}

/// The objects `kubestrap init --dry-run` would create.
pub fn kubestrap(config: &str) -> Vec<Value> {
    let run = common::kubestrap(&["init", "--dry-run", "--config", config, "--ignore-preflight-errors=all"]).ok();
    let plan: Value = serde_json::from_str(&run.stdout()).expect("dry-run JSON");
    let objects = plan["objects"].as_array().expect("objects").iter();
    objects.filter(|o| o["verb"] == "create").map(|o| o["object"].clone()).collect()
}

/// The facts of a list of objects; `started` is when the run began (for the token's TTL).
pub fn facts(objects: &[Value], started: i64) -> Facts {
    let mut facts = Facts::new();
    for o in objects {
        let (kind, meta) = (o["kind"].as_str().unwrap_or("?"), &o["metadata"]);
        let ns = meta["namespace"].as_str().unwrap_or("");
        let prefix = format!("api {kind} {ns}/{}", meta["name"].as_str().unwrap_or("?"));
        let mut o = o.clone();
        if let Some(data) = o.get_mut("data").and_then(Value::as_object_mut) {
            for (k, v) in data.iter_mut() {
                *v = data_value(kind, k, v.as_str().unwrap_or_default(), started);
            }
        }
        let mut sub = Facts::new();
        flatten(&o, "", started, &mut sub);
        facts.extend(sub.into_iter().map(|(k, v)| (format!("{prefix} {k}"), v)));
    }
    facts
}

/// A data value as something comparable: Secret values decoded (bar the token secret) (a token's expiration as its TTL
/// in minutes), YAML documents parsed, anything else as it is.
fn data_value(kind: &str, key: &str, v: &str, started: i64) -> Value {
    if kind == "Secret" && key == "token-secret" {
        // kubestrap's dry run redacts it; the report must not show it either.
        return "(a token secret)".into();
    }
    if kind == "Secret" {
        let text = base64::engine::general_purpose::STANDARD.decode(v).expect("base64");
        let text = String::from_utf8(text).expect("UTF-8 secret");
        if key == "expiration" {
            let at = time::OffsetDateTime::parse(&text, &time::format_description::well_known::Rfc3339);
            return format!("{} min after start", (at.expect("RFC 3339").unix_timestamp() - started + 30) / 60).into();
        }
        return text.into();
    }
    match serde_yaml::from_str::<Value>(v) {
        Ok(doc) if doc.is_object() => doc,
        _ => v.into(),
    }
}
