//! What an image archive holds, read without importing it: the names `ctr images import` will
//! store, so that an image already in the runtime is skipped and a corrupt archive is refused,
//! naming the file, before the runtime sees it. OCI archives name images in index.json
//! (`io.containerd.image.name`, or a full reference as `org.opencontainers.image.ref.name`);
//! `docker save` archives in manifest.json's `RepoTags`, which containerd normalises.

use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::Path;

use serde::Deserialize;

use super::ImageError;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// index.json and manifest.json are small; anything bigger is not one.
const MAX_INDEX: u64 = 4 << 20;

#[derive(Deserialize)]
struct Index {
    #[serde(default)]
    manifests: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct Descriptor {
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DockerManifest {
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
}

/// The image names in the archive at `path` (plain or gzip-compressed tar).
pub fn names(path: &Path) -> Result<Vec<String>, ImageError> {
    let f = File::open(path)
        .map_err(|e| ImageError::Archive { path: path.to_path_buf(), why: format!("cannot open it: {e}") })?;
    names_in(f, path)
}

/// [`names`] on any bytes; errors name `path`.
pub fn names_in<R: Read + Seek>(mut f: R, path: &Path) -> Result<Vec<String>, ImageError> {
    let bad = |why: String| ImageError::Archive { path: path.to_path_buf(), why };
    let mut magic = [0u8; 4];
    let n = f.read(&mut magic).map_err(|e| bad(format!("cannot read it: {e}")))?;
    f.rewind().map_err(|e| bad(format!("cannot read it: {e}")))?;
    let found = if magic[..n.min(4)] == ZSTD_MAGIC {
        return Err(bad("it is zstd-compressed, which kubestrap does not read: store it as .tar or .tar.gz".into()));
    } else if magic[..n.min(2)] == GZIP_MAGIC {
        scan(tar::Archive::new(flate2::read::GzDecoder::new(BufReader::new(f))).entries(), &bad)?
    } else {
        // Plain tar: skip over the layers by seeking, not reading.
        scan(tar::Archive::new(f).entries_with_seek(), &bad)?
    };
    let (index, manifest) = found;
    let mut names = Vec::new();
    if let Some(text) = index {
        let idx: Index =
            serde_json::from_slice(&text).map_err(|e| bad(format!("index.json is not an OCI image index: {e}")))?;
        for m in idx.manifests {
            let a = &m.annotations;
            match a.get("io.containerd.image.name").or(a.get("org.opencontainers.image.ref.name")) {
                Some(n) if n.contains(['/', ':', '@']) => names.push(n.clone()),
                Some(tag) => {
                    return Err(bad(format!(
                        "index.json names an image only by its tag {tag:?}; give it a full reference \
                         (annotation io.containerd.image.name, e.g. registry.k8s.io/pause:3.10.2)"
                    )));
                }
                None => {}
            }
        }
    } else if let Some(text) = manifest {
        let ms: Vec<DockerManifest> = serde_json::from_slice(&text)
            .map_err(|e| bad(format!("manifest.json is not a docker save manifest: {e}")))?;
        names.extend(ms.into_iter().flat_map(|m| m.repo_tags.unwrap_or_default()).map(|t| normalize(&t)));
    } else {
        return Err(bad("neither index.json (OCI) nor manifest.json (docker save) is in it".into()));
    }
    if names.is_empty() {
        return Err(bad("it names no image (no io.containerd.image.name annotation, no RepoTags)".into()));
    }
    names.sort();
    names.dedup();
    Ok(names)
}

type Found = (Option<Vec<u8>>, Option<Vec<u8>>);

/// Reads the tar to its end (a truncated archive fails here), keeping index.json and manifest.json.
fn scan<R: Read>(
    entries: std::io::Result<tar::Entries<'_, R>>,
    bad: &dyn Fn(String) -> ImageError,
) -> Result<Found, ImageError> {
    let broken = |e: std::io::Error| bad(format!("not a readable tar archive: {e}"));
    let (mut index, mut manifest) = (None, None);
    for entry in entries.map_err(broken)? {
        let mut entry = entry.map_err(broken)?;
        let name = entry.path().map_err(broken)?.to_string_lossy().trim_start_matches("./").to_string();
        let slot = match name.as_str() {
            "index.json" => &mut index,
            "manifest.json" => &mut manifest,
            _ => continue,
        };
        if entry.size() > MAX_INDEX {
            return Err(bad(format!("{name} is {} bytes, too big for an image index", entry.size())));
        }
        let mut text = Vec::new();
        entry.read_to_end(&mut text).map_err(broken)?;
        *slot = Some(text);
    }
    Ok((index, manifest))
}

/// A docker reference as containerd stores it: `busybox:1` → `docker.io/library/busybox:1`.
pub(crate) fn normalize(r: &str) -> String {
    let first = r.split('/').next().unwrap_or_default();
    let has_domain = r.contains('/') && (first.contains(['.', ':']) || first == "localhost");
    let full = if has_domain {
        r.to_string()
    } else if r.contains('/') {
        format!("docker.io/{r}")
    } else {
        format!("docker.io/library/{r}")
    };
    let last = full.rsplit('/').next().unwrap_or_default();
    if last.contains([':', '@']) { full } else { format!("{full}:latest") }
}
