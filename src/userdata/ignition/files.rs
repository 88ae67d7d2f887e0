//! `storage.files` of every layer → [`WriteFile`]s, checked while planning so a bad entry is
//! refused before a byte is written; errors name `storage.files[i].<field>`.

use serde_json::{Map, Value};

use super::detect::Spec;
use super::references::Layer;
use super::resource;
use crate::config::ConfigError;
use crate::userdata::{Notices, WriteFile};

/// Ignition's mode when none is given.
const DEFAULT_MODE: u32 = 0o644;

/// All files' contents together, decompressed: each entry is bounded by gzip's cap, this bounds
/// a config of many small gzip bombs.
const MAX_TOTAL_BYTES: usize = 32 << 20;

/// Files Cluster API renders for things kubestrap does not manage (the ssh daemon, ntpd).
const NOT_MANAGED: &[&str] = &["/etc/ssh/sshd_config", "/etc/ntp.conf"];

/// A file and where it was given, for errors about its contents later (the kubeadm config).
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub at: String,
    pub file: WriteFile,
}

/// Every layer's files, in order; sudoers files of ignored users and the files of daemons
/// kubestrap does not manage are left out with a notice.
pub(super) fn files(
    src: &str,
    layers: &[Layer],
    ignored_users: &[String],
    notices: &mut Notices,
) -> Result<Vec<Entry>, ConfigError> {
    let mut out = Vec::new();
    let mut total = 0;
    for layer in layers {
        let Some(list) = layer.config.get("storage").and_then(|s| s.get("files")) else { continue };
        let Value::Array(list) = list else {
            return Err(ConfigError::doc(src, "Ignition", &layer.path("storage.files"), "must be a list".into()));
        };
        for (i, item) in list.iter().enumerate() {
            let at = layer.path(&format!("storage.files[{i}]"));
            let written = entry(src, layer.spec, &at, item)?;
            total += written.iter().map(|f| f.content.len()).sum::<usize>();
            if total > MAX_TOTAL_BYTES {
                return Err(ConfigError::doc(
                    src,
                    "Ignition",
                    &at,
                    format!(
                        "brings the files' contents past {MAX_TOTAL_BYTES} bytes, kubestrap's limit; refusing them"
                    ),
                ));
            }
            let path = written.first().map(|f| f.path.clone()).unwrap_or_default();
            let sudoers = path.strip_prefix("/etc/sudoers.d/").is_some_and(|u| ignored_users.iter().any(|n| n == u));
            if sudoers || NOT_MANAGED.contains(&path.as_str()) {
                notices.push(format!("{src}: {at}: {path} not written: kubestrap does not manage it"));
                continue;
            }
            out.extend(written.into_iter().map(|file| Entry { at: at.clone(), file }));
        }
    }
    Ok(out)
}

/// One entry: the file (2.x: one; 3.x: the contents, then each `append` resource).
fn entry(src: &str, spec: Spec, at: &str, item: &Value) -> Result<Vec<WriteFile>, ConfigError> {
    let err = |field: &str, m: String| {
        ConfigError::doc(src, "Ignition", &if field.is_empty() { at.to_string() } else { format!("{at}.{field}") }, m)
    };
    let Value::Object(m) = item else { return Err(err("", "must be an object".into())) };
    let path = m.get("path").and_then(Value::as_str).ok_or_else(|| err("path", "is missing".into()))?.to_string();
    if !path.starts_with('/') || path.ends_with('/') || path.split('/').any(|c| c == "..") {
        return Err(err("path", format!("{path:?} must be an absolute file path without '..'")));
    }
    if spec == Spec::V2 {
        match m.get("filesystem").and_then(Value::as_str) {
            Some("root") | None => {}
            Some(other) => {
                return Err(err(
                    "filesystem",
                    format!("{other:?}: kubestrap writes files on the root filesystem only (filesystem: \"root\")"),
                ));
            }
        }
    }
    let mode =
        match m.get("mode") {
            None | Some(Value::Null) => DEFAULT_MODE,
            Some(v) => v.as_u64().and_then(|n| u32::try_from(n).ok()).filter(|n| *n <= 0o7777).ok_or_else(|| {
                err("mode", format!("{v} is not a file mode: Ignition's mode is decimal (420 = 0644)"))
            })?,
        };
    let owner =
        format!("{}:{}", id(m, "user").map_err(|e| err("user", e))?, id(m, "group").map_err(|e| err("group", e))?);
    let overwrite = m.get("overwrite").and_then(Value::as_bool);
    let base = WriteFile { path, content: Vec::new(), mode, owner, append: false };
    let read = |field: &str, v: &Value| resource::read(v).map_err(|(f, e)| err(&join(field, f), e));
    let mut out = Vec::new();
    if spec == Spec::V2 {
        let contents = m.get("contents").map(|c| read("contents", c)).transpose()?.unwrap_or_default();
        let append = match m.get("append") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(err("append", "must be true or false in spec 2.x".into())),
        };
        out.push(WriteFile { content: contents, append, ..base });
        return Ok(out);
    }
    // 3.x: contents replace the file (or an absent one starts empty when overwrite is set);
    // each append resource is added after.
    if let Some(c) = m.get("contents").filter(|c| !c.is_null()) {
        out.push(WriteFile { content: read("contents", c)?, ..base.clone() });
    } else if overwrite == Some(true) {
        out.push(base.clone());
    }
    match m.get("append") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for (i, r) in list.iter().enumerate() {
                out.push(WriteFile { content: read(&format!("append[{i}]"), r)?, append: true, ..base.clone() });
            }
        }
        Some(_) => return Err(err("append", "must be a list of resources in spec 3.x".into())),
    }
    if out.is_empty() {
        out.push(base);
    }
    Ok(out)
}

fn join(field: &str, sub: &str) -> String {
    if sub.is_empty() { field.to_string() } else { format!("{field}.{sub}") }
}

/// `user`/`group`: `{name}` or `{id}`; root when absent.
fn id(m: &Map<String, Value>, key: &str) -> Result<String, String> {
    let Some(v) = m.get(key).filter(|v| !v.is_null()) else { return Ok("root".into()) };
    if let Some(name) = v.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        if name.contains(':') {
            return Err(format!("name {name:?} holds a ':'"));
        }
        return Ok(name.to_string());
    }
    match v.get("id") {
        None | Some(Value::Null) => Ok("root".into()),
        Some(id) => id.as_u64().map(|n| n.to_string()).ok_or_else(|| format!("id {id} is not a number")),
    }
}
