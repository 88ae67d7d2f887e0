//! Image preload: before the kubelet starts, `boot` imports the image archives baked into the
//! machine image (and any on the seed disk) into containerd's `k8s.io` namespace, where the
//! kubelet looks first, so a node comes up without a registry. Idempotent: an archive whose
//! images are all present is skipped. Also the image list kubeadm would pull
//! (`config images list`, and preflight's ImagePull check).

pub mod archive;
mod ctr;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
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
    /// `imported`, `present` (every image was already in the runtime), or `not-needed` (a
    /// worker's: control-plane images only).
    pub state: String,
    pub ms: u64,
}

/// An image reference's tag, as kubeadm's TagFromImage reads it: the digest dropped, "" without
/// a tag (`registry:5000/etcd` has none; `etcd:3.7.0-0@sha256:…` is `3.7.0-0`).
pub fn tag_of(image: &str) -> String {
    let name = image.split('@').next().unwrap_or_default();
    let last = name.rsplit('/').next().unwrap_or_default();
    last.split_once(':').map(|(_, t)| t.to_string()).unwrap_or_default()
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

/// What only a control plane runs: a worker never starts these (kubeadm join pulls nothing on a
/// worker), so it leaves their archives alone. Matched by repository name, whatever the registry.
const CONTROL_PLANE_ONLY: [&str; 4] = ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"];

/// Whether every image of an archive is one only a control plane runs.
pub(crate) fn control_plane_only(images: &[String]) -> bool {
    let repo = |r: &str| {
        let name = r.split('@').next().unwrap_or(r);
        // The tag's colon comes after the last slash (a registry's port comes before it).
        let path = match name.rfind(':') {
            Some(c) if c > name.rfind('/').unwrap_or(0) => &name[..c],
            _ => name,
        };
        path.rsplit('/').next().unwrap_or(path).to_string()
    };
    !images.is_empty() && images.iter().all(|i| CONTROL_PLANE_ONLY.contains(&repo(i).as_str()))
}

/// Imports every archive in `dirs` whose images are not all in the runtime yet (on a `worker`,
/// not those holding control-plane images only), `width` at a time (an import is CPU-bound
/// decompression and a sync; containerd takes concurrent imports, shared layers included);
/// `each` hears of every archive as it is done, in the order they end.
/// Reads every archive's names first, so a corrupt one fails the boot before anything is
/// imported; after a failed import no new one starts. The result keeps the archives' order.
pub(crate) fn preload(
    dirs: &[PathBuf],
    ctr: &Ctr,
    width: usize,
    worker: bool,
    each: &mut dyn FnMut(&Preloaded),
) -> Result<Vec<Preloaded>, ImageError> {
    let files = archives(dirs)?;
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let named: Vec<(PathBuf, Vec<String>)> =
        files.into_iter().map(|f| archive::names(&f).map(|n| (f, n))).collect::<Result<_, _>>()?;
    let present = present_images(ctr, &named)?;
    let mut done: Vec<(usize, Preloaded)> = Vec::new();
    let mut todo = Vec::new();
    for (i, (file, images)) in named.iter().enumerate() {
        let skipped = if images.iter().all(|im| present.contains(im)) {
            Some("present")
        } else if worker && control_plane_only(images) {
            Some("not-needed")
        } else {
            None
        };
        if let Some(state) = skipped {
            let p =
                Preloaded { archive: file.display().to_string(), images: images.clone(), state: state.into(), ms: 0 };
            each(&p);
            done.push((i, p));
        } else {
            todo.push(i);
        }
    }
    let failed = import_all(&named, &todo, ctr, width, &mut |i, ms| {
        let p = Preloaded {
            archive: named[i].0.display().to_string(),
            images: named[i].1.clone(),
            state: "imported".into(),
            ms,
        };
        each(&p);
        done.push((i, p));
    });
    if let Some(e) = failed {
        return Err(e);
    }
    done.sort_by_key(|(i, _)| *i);
    let done: Vec<Preloaded> = done.into_iter().map(|(_, p)| p).collect();
    // One listing after all imports: an archive whose images containerd does not list after
    // a successful import holds none for this platform.
    if done.iter().any(|p| p.state == "imported") {
        let listed = ctr.list()?;
        if let Some((p, missing)) = done
            .iter()
            .filter(|p| p.state == "imported")
            .find_map(|p| p.images.iter().find(|i| !listed.contains(i)).map(|i| (p, i)))
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

/// Which of the archives' images the runtime holds, asked over the CRI (ImageStatus, as the
/// kubelet asks; starting `ctr` costs seconds under emulation), or from `ctr images list` when
/// the CRI does not answer (a runtime still starting, or not containerd's CRI).
fn present_images(ctr: &Ctr, named: &[(PathBuf, Vec<String>)]) -> Result<Vec<String>, ImageError> {
    let mut held = Vec::new();
    for image in named.iter().flat_map(|(_, images)| images) {
        match crate::cri::image_present_over_unix_socket(&ctr.address, image, crate::timeouts::CRI_PROBE) {
            Ok(true) => held.push(image.clone()),
            Ok(false) => {}
            Err(e) => {
                log::debug!("[images] CRI ImageStatus {image}: {e}; listing with ctr");
                return ctr.list();
            }
        }
    }
    Ok(held)
}

/// Runs `ctr.import` for `named[i]`, `i` in `todo`, on up to `width` threads; `ok(i, ms)` on this
/// thread as each succeeds. The first error, after the imports already running have ended.
fn import_all(
    named: &[(PathBuf, Vec<String>)],
    todo: &[usize],
    ctr: &Ctr,
    width: usize,
    ok: &mut dyn FnMut(usize, u64),
) -> Option<ImageError> {
    if todo.is_empty() {
        return None;
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        for _ in 0..width.clamp(1, todo.len()) {
            let tx = tx.clone();
            let (next, stop) = (&next, &stop);
            s.spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let Some(&i) = todo.get(next.fetch_add(1, Ordering::SeqCst)) else { break };
                    let t = Instant::now();
                    let r = ctr.import(&named[i].0);
                    if r.is_err() {
                        stop.store(true, Ordering::SeqCst);
                    }
                    if tx.send((i, r, t.elapsed().as_millis() as u64)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut first = None;
        for (i, r, ms) in rx {
            match r {
                Ok(()) => ok(i, ms),
                Err(e) => first = first.or(Some(e)),
            }
        }
        first
    })
}

#[cfg(test)]
mod tests;
