//! Config references: 2.x `ignition.config.append`/`replace`, 3.x `merge`/`replace`. Each
//! referenced config (a `data:` URL, hash checked) becomes a [`Layer`]: a replace stands for
//! the config that names it, an append/merge comes after it, so its files and units are added
//! after (and a later file at the same path wins when written).

use serde_json::Value;

use super::detect::{self, Spec};
use super::resource;
use crate::config::ConfigError;

/// How deep references may nest: Ignition itself allows a chain, but a loop of data: URLs
/// cannot exist and real configs use one level (CAPA's stub).
const MAX_DEPTH: usize = 4;
/// How many configs in all: with each reference inflating to at most 1 MiB, this bounds what a
/// small user-data can make kubestrap hold.
const MAX_LAYERS: usize = 16;

/// One config whose storage and units are read, in merge order.
#[derive(Debug, Clone)]
pub(super) struct Layer {
    /// Where it came from, prefixed to error paths ("" for the user-data itself).
    pub at: String,
    pub spec: Spec,
    pub config: Value,
}

impl Layer {
    /// A field path inside this layer, for errors and notices.
    pub fn path(&self, field: &str) -> String {
        path(&self.at, field)
    }
}

/// `field` inside the config found at `at`.
fn path(at: &str, field: &str) -> String {
    if at.is_empty() { field.to_string() } else { format!("{at} > {field}") }
}

/// The user-data config and every config it references, in the order their contents apply.
pub(super) fn layers(src: &str, config: Value) -> Result<Vec<Layer>, ConfigError> {
    let mut out = Vec::new();
    walk(src, String::new(), config, 0, &mut out)?;
    Ok(out)
}

fn walk(src: &str, at: String, config: Value, depth: usize, out: &mut Vec<Layer>) -> Result<(), ConfigError> {
    let err = |field: &str, m: String| ConfigError::doc(src, "Ignition", &path(&at, field), m);
    let spec = detect::spec(src, &config).map_err(|e| err("ignition.version", e.message))?;
    let refs = config.get("ignition").and_then(|i| i.get("config")).cloned().unwrap_or(Value::Null);
    let many = if spec == Spec::V2 { "append" } else { "merge" };
    let replace = refs.get("replace").filter(|r| r.get("source").is_some_and(|s| !s.is_null()));
    let mut children = Vec::new();
    if let Some(r) = replace {
        children.push(("ignition.config.replace".to_string(), r.clone()));
    } else if let Some(list) = refs.get(many) {
        let Value::Array(list) = list else {
            return Err(err(&format!("ignition.config.{many}"), "must be a list of config references".into()));
        };
        children.extend(list.iter().enumerate().map(|(i, r)| (format!("ignition.config.{many}[{i}]"), r.clone())));
    }
    if !children.is_empty() && depth >= MAX_DEPTH {
        return Err(err("ignition.config", format!("references nest more than {MAX_DEPTH} deep")));
    }
    // A replace stands for this config: its own storage and units are not read.
    if replace.is_none() {
        out.push(Layer { at: at.clone(), spec, config });
    }
    for (field, r) in children {
        if out.len() >= MAX_LAYERS {
            return Err(err(&field, format!("is one config reference too many: kubestrap reads at most {MAX_LAYERS}")));
        }
        let bytes = resource::read(&r).map_err(|(f, m)| {
            let f = if f.is_empty() { field.clone() } else { format!("{field}.{f}") };
            err(&f, format!("{m} (the referenced config)"))
        })?;
        let child: Value = serde_json::from_slice(&bytes)
            .map_err(|e| err(&field, format!("the referenced config is not JSON: {e}")))?;
        walk(src, path(&at, &field), child, depth + 1, out)?;
    }
    Ok(())
}
