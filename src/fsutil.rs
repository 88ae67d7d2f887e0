//! The node's filesystem, rooted at `--root`. Callers always name real host paths
//! ("/etc/kubernetes/pki/ca.crt"); this module maps them under the root. Writes are atomic
//! (temp file in the same dir, fsync, rename, fsync the dir). In dry-run mode nothing touches the
//! disk: writes land in an in-memory plan that later reads see, so every phase can run.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{Context, Error, Result};

/// One file in the dry-run plan.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedFile {
    pub path: String,
    pub mode: String,
    pub sha256: String,
    pub size: usize,
    #[serde(skip)]
    pub data: Vec<u8>,
}

pub struct NodeFs {
    root: PathBuf,
    plan: Option<RefCell<BTreeMap<String, PlannedFile>>>,
}

impl NodeFs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        NodeFs {
            root: root.into(),
            plan: None,
        }
    }

    pub fn dry_run(root: impl Into<PathBuf>) -> Self {
        NodeFs {
            root: root.into(),
            plan: Some(RefCell::new(BTreeMap::new())),
        }
    }

    pub fn is_dry_run(&self) -> bool {
        self.plan.is_some()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where a host path lives on this machine's disk.
    pub fn real(&self, host_path: &str) -> PathBuf {
        let mut p = self.root.clone();
        for c in Path::new(host_path).components() {
            if let Component::Normal(part) = c {
                p.push(part);
            }
        }
        p
    }

    /// Reads a file; `None` if it does not exist.
    pub fn read(&self, host_path: &str) -> Result<Option<Vec<u8>>> {
        if let Some(plan) = &self.plan {
            if let Some(f) = plan.borrow().get(host_path) {
                return Ok(Some(f.data.clone()));
            }
        }
        let real = self.real(host_path);
        match fs::read(&real) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::runtime(format!("reading {}: {e}", real.display()))),
        }
    }

    pub fn exists(&self, host_path: &str) -> bool {
        if let Some(plan) = &self.plan {
            if plan.borrow().contains_key(host_path) {
                return true;
            }
        }
        self.real(host_path).exists()
    }

    /// Writes a file atomically with `mode`, creating missing parent dirs with `dir_mode`.
    /// Identical existing content with the same mode is left alone.
    pub fn write(&self, host_path: &str, data: &[u8], mode: u32, dir_mode: u32) -> Result<()> {
        if let Some(plan) = &self.plan {
            let f = PlannedFile {
                path: host_path.to_string(),
                mode: format!("{mode:04o}"),
                sha256: hex(&Sha256::digest(data)),
                size: data.len(),
                data: data.to_vec(),
            };
            plan.borrow_mut().insert(host_path.to_string(), f);
            return Ok(());
        }
        let real = self.real(host_path);
        if let Some(parent) = real.parent() {
            mkdir_p(parent, dir_mode)?;
        }
        if let Ok(meta) = fs::metadata(&real) {
            if meta.permissions().mode() & 0o7777 == mode
                && fs::read(&real).ok().as_deref() == Some(data)
            {
                return Ok(());
            }
        }
        atomic_write(&real, data, mode)
    }

    /// Creates a directory (and parents) with `mode`. A no-op in dry-run mode.
    pub fn mkdir(&self, host_path: &str, mode: u32) -> Result<()> {
        if self.is_dry_run() {
            return Ok(());
        }
        mkdir_p(&self.real(host_path), mode)
    }

    /// The dry-run plan, sorted by path.
    pub fn planned(&self) -> Vec<PlannedFile> {
        self.plan
            .as_ref()
            .map(|p| p.borrow().values().cloned().collect())
            .unwrap_or_default()
    }
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Creates `dir` and missing parents with `mode` (existing dirs keep theirs).
pub fn mkdir_p(dir: &Path, mode: u32) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        // Parents are ordinary traversable dirs; only the leaf gets the restrictive mode.
        mkdir_p(parent, 0o755)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => fs::set_permissions(dir, fs::Permissions::from_mode(mode))
            .ctx(format_args!("setting mode of {}", dir.display())),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(Error::runtime(format!(
            "creating directory {}: {e}",
            dir.display()
        ))),
    }
}

/// Temp file in the same dir, fsync, rename over the target, fsync the dir: a reader (or the
/// next run after a power cut) sees the old file or the new one, never a torn one.
pub fn atomic_write(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.kubestrap-tmp.{}", std::process::id()));
    let what = format_args!("writing {}", path.display()).to_string();
    let _ = fs::remove_file(&tmp);
    let result = (|| -> std::io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        // The umask may have narrowed the mode at create time.
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.write_all(data)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.ctx(what)
}

/// Is this a temp file left by an interrupted atomic write?
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.contains(".kubestrap-tmp.")
}
