//! Reading a patch directory as kubeadm 1.37 does: a walk in byte order that descends into
//! sub-directories and follows no symlink, file names `target[suffix][+type].{json,yaml}`,
//! warnings for files it ignores, an error for an unknown `+type`, each file split into YAML
//! documents, one patch each.

use std::io::Read;
use std::path::Path;

use log::info;
use serde_json::Value;

use super::{PatchError, PatchSet, PatchType, Target};

/// The largest patch file read. kubeadm reads any size; a patch is kilobytes, and a file read
/// whole at boot must not be able to take the node's memory.
pub(crate) const MAX_FILE_BYTES: u64 = 1 << 20;

/// What a file name says: ignored (with kubeadm's reason), or a target and type.
#[derive(Debug, PartialEq)]
pub(crate) enum Name {
    Ignored(String),
    Patch(Target, PatchType),
}

/// kubeadm's parseFilename: the extension must be `.json` or `.yaml` (checked on the whole
/// name), the name must start with a target; what follows the target up to a `.` or `+` only
/// orders files; `+` must be followed by a type (only the start of the rest is read, so
/// `etcd+jsonX.yaml` is a JSON patch).
pub(crate) fn parse_name(name: &str) -> Result<Name, String> {
    let ext_ok = [".json", ".yaml"].iter().any(|e| name.len() > e.len() && name.ends_with(e));
    if !ext_ok {
        return Ok(Name::Ignored("the file extension must be one of [json yaml]".into()));
    }
    let Some((target, rest)) = Target::ALL.iter().find_map(|t| name.strip_prefix(t.name()).map(|r| (*t, r))) else {
        let names: Vec<&str> = Target::ALL.iter().map(|t| t.name()).collect();
        return Ok(Name::Ignored(format!("unknown target, must be one of [{}]", names.join(" "))));
    };
    let after_suffix = rest.trim_start_matches(|c| c != '.' && c != '+' && c != '\n');
    let Some(typed) = after_suffix.strip_prefix('+') else {
        return Ok(Name::Patch(target, PatchType::Strategic));
    };
    let t = [("json", PatchType::Json), ("merge", PatchType::Merge), ("strategic", PatchType::Strategic)]
        .into_iter()
        .find(|(n, _)| typed.starts_with(n));
    match t {
        Some((_, t)) => Ok(Name::Patch(target, t)),
        None => Err("unknown or missing patch type after '+', must be one of [json merge strategic]".into()),
    }
}

/// The YAML documents of a file, as kubeadm's YAML reader splits them (a line starting with
/// `---` followed by nothing or a comment), each trimmed, blank ones skipped, as JSON.
pub(crate) fn documents(text: &str) -> Result<Vec<Value>, String> {
    let mut docs = Vec::new();
    let mut cur = String::new();
    let mut flush = |cur: &mut String| -> Result<(), String> {
        let t = cur.trim();
        if !t.is_empty() {
            let v = super::yaml11::parse(t).map_err(|e| format!("could not convert patch to JSON: {e}"))?;
            docs.push(v);
        }
        cur.clear();
        Ok(())
    };
    for line in text.split_inclusive('\n') {
        let sep = line.strip_prefix("---").map(str::trim).is_some_and(|r| r.is_empty() || r.starts_with('#'));
        if sep {
            flush(&mut cur)?;
        } else {
            cur.push_str(line);
        }
    }
    flush(&mut cur)?;
    Ok(docs)
}

/// Reads `real` (the directory under the node root; `shown` is its path on the node).
pub(crate) fn read_dir(real: &Path, shown: &str) -> Result<Vec<PatchSet>, PatchError> {
    info!("[patches] Reading patches from path {shown:?}");
    let list_err = |why: String| PatchError::Dir { dir: shown.to_string(), why };
    let meta = std::fs::symlink_metadata(real).map_err(|e| list_err(e.to_string()))?;
    if !meta.is_dir() {
        let base = Path::new(shown).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        return Err(list_err(format!("getPatchSetsFromPath {base}: not a directory")));
    }
    let mut found = Found::default();
    walk(real, real, shown, &mut found)?;
    if !found.files.is_empty() {
        info!("[patches] Found the following patch files: [{}]", found.files.join(" "));
    }
    if !found.ignored.is_empty() {
        info!("[patches] Ignored the following files: [{}]", found.ignored.join(" "));
    }
    Ok(found.sets)
}

#[derive(Default)]
struct Found {
    sets: Vec<PatchSet>,
    files: Vec<String>,
    ignored: Vec<String>,
}

fn walk(dir: &Path, root: &Path, shown: &str, found: &mut Found) -> Result<(), PatchError> {
    let list_err = |why: String| PatchError::Dir { dir: shown.to_string(), why };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| list_err(format!("{}: {e}", dir.display())))?
        .collect::<Result<_, _>>()
        .map_err(|e| list_err(e.to_string()))?;
    // Go's filepath.Walk: names in byte order.
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        let ft = e.file_type().map_err(|err| list_err(format!("{}: {err}", path.display())))?;
        if ft.is_dir() {
            walk(&path, root, shown, found)?;
            continue;
        }
        let rel = path.strip_prefix(root).unwrap_or(&path);
        let node_path = Path::new(shown).join(rel).to_string_lossy().into_owned();
        let named = parse_name(&name).map_err(|why| PatchError::File { file: node_path.clone(), why })?;
        let (target, ptype) = match named {
            Name::Ignored(why) => {
                info!("[patches] Ignoring file {name:?}: {why}");
                found.ignored.push(name);
                continue;
            }
            Name::Patch(t, p) => (t, p),
        };
        let data =
            read_bounded(&path).map_err(|err| list_err(format!("could not read the file {node_path:?}: {err}")))?;
        if data.len() as u64 > MAX_FILE_BYTES {
            let why = format!(
                "it is larger than {} MiB; a patch is a few kilobytes: split or shorten it",
                MAX_FILE_BYTES >> 20
            );
            return Err(PatchError::File { file: node_path, why });
        }
        if data.is_empty() {
            info!("[patches] Ignoring empty file: {name:?}");
            found.ignored.push(name);
            continue;
        }
        let text = String::from_utf8_lossy(&data);
        let docs = documents(&text).map_err(|why| PatchError::File { file: node_path.clone(), why })?;
        found.files.push(name);
        found.sets.push(PatchSet { target, ptype, file: node_path, docs });
    }
    Ok(())
}

/// At most `MAX_FILE_BYTES` and one more byte of the file (the one more says it is too large).
/// Opened without blocking and refused unless a regular file (through a symlink too): a FIFO or
/// a device named like a patch would hang or never end the boot.
fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let f =
        std::fs::OpenOptions::new().read(true).custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32).open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut data = Vec::new();
    f.take(MAX_FILE_BYTES + 1).read_to_end(&mut data)?;
    Ok(data)
}
