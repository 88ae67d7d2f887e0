//! cloud-init's `write_files`: each entry decoded here (content, encoding, permissions, owner,
//! append, defer) into a [`WriteFile`] the boot stage writes under the node root before anything
//! runs. Everything is checked while planning, so a bad entry is refused before a byte is
//! written, and the error names `write_files[i].<field>`.

use std::io::Read;

use base64::Engine;
use serde_yaml::Value;

use super::Notices;
use super::decode::MAX_USER_DATA_BYTES;
use crate::config::ConfigError;

/// One file to write, as cloud-init would write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteFile {
    /// Absolute host path.
    pub path: String,
    pub content: Vec<u8>,
    /// cloud-init's default is 0644.
    pub mode: u32,
    /// `user[:group]`, names or ids; cloud-init's default is root:root.
    pub owner: String,
    /// Add to the end of an existing file instead of replacing it.
    pub append: bool,
}

/// cloud-init's permissions when none are given.
const DEFAULT_MODE: u32 = 0o644;

/// The keys cloud-init reads in a `write_files` entry.
const KEYS: &[&str] = &["path", "content", "source", "encoding", "permissions", "owner", "append", "defer"];

/// Decodes the `write_files` list; notices for what is accepted but means something else here.
pub(super) fn parse(src: &str, v: &Value, notices: &mut Notices) -> Result<Vec<WriteFile>, ConfigError> {
    let items = match v {
        Value::Null => return Ok(Vec::new()),
        Value::Sequence(items) => items,
        _ => return Err(ConfigError::doc(src, "#cloud-config", "write_files", "must be a list of files".into())),
    };
    items.iter().enumerate().map(|(i, item)| entry(src, i, item, notices)).collect()
}

fn entry(src: &str, i: usize, item: &Value, notices: &mut Notices) -> Result<WriteFile, ConfigError> {
    let at = |field: &str| format!("write_files[{i}].{field}");
    let err = |field: &str, msg: String| ConfigError::doc(src, "#cloud-config", &at(field), msg);
    let Value::Mapping(m) = item else {
        return Err(ConfigError::doc(src, "#cloud-config", &format!("write_files[{i}]"), "must be a mapping".into()));
    };
    for k in m.keys() {
        let name = k.as_str().unwrap_or("?");
        if !KEYS.contains(&name) {
            return Err(err(name, format!("is not a write_files key (cloud-init knows {})", KEYS.join(", "))));
        }
    }
    let text = |field: &str| -> Result<Option<String>, ConfigError> {
        match m.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(Value::Bool(b)) => Ok(Some(b.to_string())),
            Some(_) => Err(err(field, "must be a string".into())),
        }
    };
    let flag = |field: &str| -> Result<bool, ConfigError> {
        match m.get(field) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(err(field, "must be true or false".into())),
        }
    };
    let path = text("path")?.ok_or_else(|| err("path", "is missing".into()))?;
    if !path.starts_with('/') || path.ends_with('/') || path.split('/').any(|c| c == "..") {
        return Err(err("path", format!("{path:?} must be an absolute file path without '..'")));
    }
    if m.contains_key("source") {
        return Err(err("source", "(a URI to download) is not supported: put the bytes in content".into()));
    }
    let raw = text("content")?.unwrap_or_default();
    let content = decode(&raw, text("encoding")?.as_deref()).map_err(|m| err("encoding", m))?;
    let mode = match m.get("permissions") {
        None | Some(Value::Null) => DEFAULT_MODE,
        Some(p) => permissions(p).map_err(|m| err("permissions", m))?,
    };
    let owner = text("owner")?.unwrap_or_else(|| "root:root".into());
    if owner.trim().is_empty() || owner.split(':').count() > 2 {
        return Err(err("owner", format!("{owner:?} must be user or user:group")));
    }
    if flag("defer")? {
        notices.push(format!(
            "{src}: {}: defer: true written with the other files, before runcmd (cloud-init also writes deferred files before runcmd runs)",
            at("defer")
        ));
    }
    Ok(WriteFile { path, content, mode, owner, append: flag("append")? })
}

/// cloud-init's encodings: plain text, base64, gzip, or gzip then base64, under the spellings
/// cloud-init accepts.
fn decode(raw: &str, encoding: Option<&str>) -> Result<Vec<u8>, String> {
    let enc = encoding.unwrap_or("text").trim().to_ascii_lowercase();
    let b64 = |s: &str| {
        // cloud-init feeds the whole value to b64decode, which skips line breaks.
        let clean: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        base64::engine::general_purpose::STANDARD
            .decode(clean.as_bytes())
            .map_err(|e| format!("{enc}: the content is not base64 ({e})"))
    };
    match enc.as_str() {
        "" | "text" | "text/plain" => Ok(raw.as_bytes().to_vec()),
        "b64" | "base64" => b64(raw),
        "gz" | "gzip" => gunzip(raw.as_bytes()),
        "gz+base64" | "gzip+base64" | "gz+b64" | "gzip+b64" => gunzip(&b64(raw)?),
        other => Err(format!(
            "{other:?} is not an encoding cloud-init knows (b64, base64, gz, gzip, gz+base64, gzip+base64, gz+b64, gzip+b64, text/plain)"
        )),
    }
}

/// Bounded, like the user-data itself, so a small entry cannot inflate into a huge file.
pub(super) fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .take(MAX_USER_DATA_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("the content does not gunzip ({e})"))?;
    if out.len() > MAX_USER_DATA_BYTES {
        return Err(format!("the content decompresses to more than {MAX_USER_DATA_BYTES} bytes"));
    }
    Ok(out)
}

/// cloud-init's `decode_perms`: a string is octal ('0640', '640'), a number is taken as is (so
/// YAML 1.1's 0640 and the decimal 416 are the same mode).
fn permissions(v: &Value) -> Result<u32, String> {
    let mode = match v {
        Value::String(s) => {
            let t = s.trim();
            let t = t.strip_prefix("0o").unwrap_or(t);
            u32::from_str_radix(t, 8).map_err(|_| format!("{s:?} is not an octal mode like '0644'"))?
        }
        Value::Number(n) => {
            n.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| format!("{n} is not a file mode"))?
        }
        _ => return Err("must be an octal string like '0644'".into()),
    };
    if mode > 0o7777 {
        return Err(format!("{mode:o} (octal) is more than 7777; quote an octal mode: '0644'"));
    }
    Ok(mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(yaml: &str) -> Result<WriteFile, ConfigError> {
        let v: Value = serde_yaml::from_str(yaml).unwrap();
        parse("u", &v, &mut Notices::default()).map(|mut v| v.remove(0))
    }

    #[test]
    fn write_files_decodes_every_encoding_cloud_init_knows() {
        let gz_b64 = {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            std::io::Write::write_all(&mut e, b"zipped\n").unwrap();
            base64::engine::general_purpose::STANDARD.encode(e.finish().unwrap())
        };
        let f = one("- {path: /etc/a, content: \"hi\\n\"}").unwrap();
        assert_eq!(
            (f.content.as_slice(), f.mode, f.owner.as_str(), f.append),
            (b"hi\n".as_slice(), 0o644, "root:root", false)
        );
        for enc in ["b64", "base64", "BASE64"] {
            assert_eq!(one(&format!("- {{path: /a, encoding: {enc}, content: aGk=}}")).unwrap().content, b"hi");
        }
        for enc in ["gz+base64", "gzip+base64", "gz+b64", "gzip+b64"] {
            let f = one(&format!("- {{path: /a, encoding: {enc}, content: \"{gz_b64}\"}}")).unwrap();
            assert_eq!(f.content, b"zipped\n", "{enc}");
        }
        // A base64 block scalar spans lines.
        assert_eq!(one("- path: /a\n  encoding: b64\n  content: |\n    aG\n    k=\n").unwrap().content, b"hi");
        let e = one("- {path: /a, encoding: rot13, content: x}").unwrap_err().to_string();
        assert!(e.contains("write_files[0].encoding") && e.contains("rot13"), "{e}");
        let e = one("- {path: /a, encoding: b64, content: '!!!'}").unwrap_err().to_string();
        assert!(e.contains("not base64"), "{e}");
    }

    #[test]
    fn write_files_permissions_owner_append_as_cloud_init_reads_them() {
        assert_eq!(one("- {path: /a, permissions: '0600'}").unwrap().mode, 0o600);
        assert_eq!(one("- {path: /a, permissions: '640'}").unwrap().mode, 0o640);
        // Unquoted 0755 is octal to cloud-init's YAML 1.1; serde_yaml keeps it as the string "0755".
        assert_eq!(one("- {path: /a, permissions: 0755}").unwrap().mode, 0o755);
        assert_eq!(one("- {path: /a, permissions: 416}").unwrap().mode, 0o640);
        assert!(
            one("- {path: /a, permissions: '0999'}").unwrap_err().to_string().contains("write_files[0].permissions")
        );
        let f = one("- {path: /a, owner: 'etcd:etcd', append: true}").unwrap();
        assert_eq!((f.owner.as_str(), f.append), ("etcd:etcd", true));
        assert!(one("- {path: /a, owner: 'a:b:c'}").is_err());
        let mut n = Notices::default();
        parse("u", &serde_yaml::from_str("[{path: /a, defer: true}]").unwrap(), &mut n).unwrap();
        assert!(n[0].contains("defer"), "{n:?}");
    }

    #[test]
    fn write_files_paths_and_unknown_keys_are_refused_by_name() {
        for bad in ["etc/a", "/etc/../a", "/etc/"] {
            let e = one(&format!("- {{path: '{bad}'}}")).unwrap_err().to_string();
            assert!(e.contains("write_files[0].path"), "{e}");
        }
        assert!(one("- {content: x}").unwrap_err().to_string().contains("path: is missing"));
        let e = one("- {path: /a, mode: '0600'}").unwrap_err().to_string();
        assert!(e.contains("write_files[0].mode") && e.contains("permissions"), "{e}");
        let e = one("- {path: /a, source: {uri: 'http://x'}}").unwrap_err().to_string();
        assert!(e.contains("write_files[0].source"), "{e}");
    }
}
