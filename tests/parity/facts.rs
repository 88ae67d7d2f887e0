//! A node's files as flat facts, `"<file> <field>" -> value`, so two nodes compare key by key:
//! modes, PEM facts (pem.rs), YAML parsed and flattened (lists of named things keyed by name,
//! command lines keyed by flag, each with an `<order>` fact), kubeadm-flags.env as a command line.

use crate::pem;
use base64::Engine;
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

pub type Facts = BTreeMap<String, String>;

/// kubeadm's optional CA bundle dirs, mounted into the API server and controller-manager when
/// they exist: kubestrap looks under its --root, so the test mirrors the host's there.
pub const CA_DIRS: &[&str] = &[
    "etc/ca-certificates",
    "etc/pki/ca-trust",
    "etc/pki/tls/certs",
    "usr/local/share/ca-certificates",
    "usr/share/ca-certificates",
];

/// The trees init writes to (var/lib for kubelet, etcd and kubestrap's own state). Their roots'
/// modes are not compared: kubeadm's are tmpfs mount points.
const TREES: &[&str] = &["etc/kubernetes", "var/lib"];

/// The facts of every file and directory under the node root's TREES; `started` is the Unix time
/// the writer was started at.
pub fn node(root: &Path, started: i64) -> Facts {
    let mut facts = Facts::new();
    for tree in TREES.iter().map(|t| root.join(t)).filter(|t| t.exists()) {
        walk(root, &tree, started, &mut facts);
    }
    facts
}

fn walk(root: &Path, dir: &Path, started: i64, facts: &mut Facts) {
    // A running node's files (etcd's WAL, the kubelet's state) may go while the walk runs.
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries {
        let path = e.expect("entry").path();
        let rel = path.strip_prefix(root).expect("under root").display().to_string();
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        let mode = format!("{:04o}", meta.permissions().mode() & 0o7777);
        if meta.is_dir() {
            facts.insert(format!("{rel}/ <mode>"), mode);
            walk(root, &path, started, facts);
            continue;
        }
        facts.insert(format!("{rel} <mode>"), mode);
        // A link's target is a fact (its file is walked on its own); sockets have no content.
        if meta.is_symlink() {
            let target = std::fs::read_link(&path).expect("read_link");
            facts.insert(format!("{rel} <link>"), target.display().to_string());
            continue;
        }
        if !meta.is_file() {
            continue;
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            // etcd's data: its bytes are not a fact.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                facts.insert(format!("{rel} <text>"), "<binary>".into());
                continue;
            }
            Err(e) => panic!("{}: {e}", path.display()),
        };
        let mut put = |k: &str, v: String| facts.insert(format!("{rel} {k}"), v);
        if text.starts_with("-----BEGIN") {
            pem::pem(&text, started).into_iter().for_each(|(k, v)| _ = put(&k, v));
        } else if rel.ends_with(".env") {
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let (name, value) = line.split_once('=').expect("NAME=value");
                let args = shlex::split(value).expect("shell words").into_iter().map(Value::String).collect();
                let mut sub = Facts::new();
                flatten(&Value::Array(args), name, started, &mut sub);
                sub.into_iter().for_each(|(k, v)| _ = put(&k, v));
            }
        } else if rel.ends_with(".yaml") || rel.ends_with(".conf") {
            let value: Value = serde_yaml::from_str(&text).expect("parse YAML");
            let mut sub = Facts::new();
            flatten(&value, "", started, &mut sub);
            sub.into_iter().for_each(|(k, v)| _ = put(&k, v));
        } else {
            put("<text>", text);
        }
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() { key.to_string() } else { format!("{prefix}.{key}") }
}

/// Flattens `v` into `out` under `prefix`.
pub fn flatten(v: &Value, prefix: &str, started: i64, out: &mut Facts) {
    match v {
        Value::Object(m) if m.is_empty() => _ = out.insert(prefix.into(), "{}".into()),
        Value::Object(m) => {
            for (k, v) in m {
                match v.as_str() {
                    // Kubeconfig credentials: the certificate's facts or the key's type.
                    Some(b64) if k.ends_with("-data") => {
                        let pem = base64::engine::general_purpose::STANDARD.decode(b64).expect("base64");
                        let pem = String::from_utf8(pem).expect("PEM text");
                        for (f, v) in pem::pem(&pem, started) {
                            out.insert(format!("{} {f}", join(prefix, k)), v);
                        }
                    }
                    _ => flatten(v, &join(prefix, k), started, out),
                }
            }
        }
        Value::Array(a) if !a.is_empty() && a.iter().all(|e| e.get("name").is_some_and(Value::is_string)) => {
            let names: Vec<&str> = a.iter().map(|e| e["name"].as_str().unwrap()).collect();
            out.insert(format!("{prefix} <order>"), names.join(" "));
            for (name, e) in names.iter().zip(a) {
                flatten(e, &format!("{prefix}[{name}]"), started, out);
            }
        }
        Value::Array(a) if is_command(prefix, a) => command(a, prefix, out),
        Value::Array(a) if a.iter().all(|e| !e.is_object() && !e.is_array()) => {
            out.insert(prefix.into(), v.to_string());
        }
        Value::Array(a) => {
            for (i, e) in a.iter().enumerate() {
                flatten(e, &format!("{prefix}[{i}]"), started, out);
            }
        }
        scalar => _ = out.insert(prefix.into(), scalar.to_string()),
    }
}

fn is_command(prefix: &str, a: &[Value]) -> bool {
    let last = prefix.rsplit('.').next().unwrap_or_default();
    matches!(last, "command" | "args" | "KUBELET_KUBEADM_ARGS") && a.iter().all(Value::is_string)
}

/// A command line: `<prefix>[i]` for words that are not flags, `<prefix> --flag` for each flag's
/// value, and `<prefix> <order>` for the order of the flags.
fn command(a: &[Value], prefix: &str, out: &mut Facts) {
    let mut order = Vec::new();
    for (i, word) in a.iter().map(|w| w.as_str().unwrap()).enumerate() {
        let Some(flag) = word.strip_prefix("--") else {
            out.insert(format!("{prefix}[{i}]"), word.into());
            continue;
        };
        let (name, value) = flag.split_once('=').unwrap_or((flag, "<no value>"));
        let mut key = format!("{prefix} --{name}");
        while out.contains_key(&key) {
            key.push_str(" (again)");
        }
        out.insert(key, value.into());
        order.push(format!("--{name}"));
    }
    out.insert(format!("{prefix} <order>"), order.join(" "));
}
