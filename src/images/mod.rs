//! Image preload: before the kubelet starts, `boot` imports the image archives baked into the
//! machine image (and any on the seed disk) into containerd's `k8s.io` namespace, where the
//! kubelet looks first, so a node comes up without a registry. Idempotent: an archive whose
//! images are all present is skipped. Also the image list kubeadm would pull
//! (`config images list`, and preflight's ImagePull check).

pub mod archive;
mod ctr;

use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::config::InitConfig;

pub(crate) use ctr::Ctr;

/// Where an image built for kubestrap keeps its archives (read-only, like the rest of /usr).
pub const DEFAULT_DIR: &str = "/usr/share/kubestrap/images";

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The archive is unreadable or names no image: the file's fault (bad input).
    #[error("image archive {}: {why}", .path.display())]
    Archive { path: PathBuf, why: String },
    /// containerd or ctr failed.
    #[error("{0}")]
    Runtime(String),
}

/// One archive's outcome, as the status file reports it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Preloaded {
    pub archive: String,
    pub images: Vec<String>,
    /// `imported`, or `present` (every image was already in the runtime: skipped).
    pub state: String,
    pub ms: u64,
}

/// The images kubeadm v1.37 pulls for this configuration, in its order (GetControlPlaneImages):
/// the control plane, kube-proxy and CoreDNS unless disabled, pause, and etcd unless external.
pub fn required(cfg: &InitConfig) -> Vec<String> {
    let mut v: Vec<String> =
        ["kube-apiserver", "kube-controller-manager", "kube-scheduler"].iter().map(|n| cfg.image(n)).collect();
    if !cfg.cluster.proxy.disabled {
        v.push(cfg.image("kube-proxy"));
    }
    if !cfg.cluster.dns.disabled {
        v.push(crate::objects::coredns::coredns_image(cfg));
    }
    v.push(crate::objects::kubelet::pause_image(cfg));
    v.extend(crate::manifests::etcd_image(cfg));
    v
}

/// The archives in `dirs` (`*.tar`, `*.tar.gz`, `*.tgz`), sorted per directory; a missing
/// directory holds none.
pub(crate) fn archives(dirs: &[PathBuf]) -> Result<Vec<PathBuf>, ImageError> {
    let mut out = Vec::new();
    for dir in dirs {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(ImageError::Runtime(format!("reading {}: {e}", dir.display()))),
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let n = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                !n.starts_with('.') && (n.ends_with(".tar") || n.ends_with(".tar.gz") || n.ends_with(".tgz"))
            })
            .collect();
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

/// Imports every archive in `dirs` whose images are not all in the runtime yet; `each` hears of
/// every archive as it is done. Reads every archive's names first, so a corrupt one fails the
/// boot before anything is imported.
pub(crate) fn preload(
    dirs: &[PathBuf],
    ctr: &Ctr,
    each: &mut dyn FnMut(&Preloaded),
) -> Result<Vec<Preloaded>, ImageError> {
    let files = archives(dirs)?;
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let named: Vec<(PathBuf, Vec<String>)> =
        files.into_iter().map(|f| archive::names(&f).map(|n| (f, n))).collect::<Result<_, _>>()?;
    let present = ctr.list()?;
    let mut done = Vec::new();
    for (file, images) in named {
        let t = Instant::now();
        let state = if images.iter().all(|i| present.contains(i)) {
            "present"
        } else {
            ctr.import(&file)?;
            "imported"
        };
        let p = Preloaded {
            archive: file.display().to_string(),
            images,
            state: state.into(),
            ms: t.elapsed().as_millis() as u64,
        };
        each(&p);
        done.push(p);
    }
    // One listing after all imports: an archive whose images containerd does not list after
    // a successful import holds none for this platform.
    if done.iter().any(|p| p.state == "imported") {
        let listed = ctr.list()?;
        if let Some((p, missing)) =
            done.iter().find_map(|p| p.images.iter().find(|i| !listed.contains(i)).map(|i| (p, i)))
        {
            return Err(ImageError::Archive {
                path: PathBuf::from(&p.archive),
                why: format!(
                    "imported, but containerd does not list {missing} (a multi-platform archive without linux/amd64?)"
                ),
            });
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests;
