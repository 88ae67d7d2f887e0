//! The node's filesystem, rooted at `--root`. Callers always name real host paths
//! ("/etc/kubernetes/pki/ca.crt"); this module maps them under the root.
//!
//! Writes are atomic and batched: `write` puts the bytes in a temp file next to the target;
//! `commit` makes all temp files durable with one syncfs, renames them over their targets in
//! write order, and syncs again so the renames are durable. A crash leaves each target either
//! old or new, never torn; leftover temp files are never read and are removed by the next run.
//! One sync per batch instead of two fsyncs per file keeps init fast at first boot.
//! In dry-run mode nothing touches the disk: writes land in an in-memory plan that later reads
//! see, so every phase can still run.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use ring::digest::{SHA256, digest};
use serde::Serialize;

use crate::paths::{self, Dir, File as NodeFile};

/// A filesystem call that failed: what was being done, to which path (on this machine's disk),
/// and the OS error.
#[derive(Debug, thiserror::Error)]
#[error("{op} {}: {source}", .path.display())]
pub struct FsError {
    /// "reading", "writing", "renaming into", ...: the verb of the message.
    pub op: &'static str,
    pub path: PathBuf,
    pub source: std::io::Error,
}

type Result<T, E = FsError> = std::result::Result<T, E>;

/// `map_err(at("reading", path))`: an I/O error of `op` on `path`.
fn at(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> FsError {
    let path = path.to_path_buf();
    move |source| FsError { op, path, source }
}

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

/// A write made but not yet committed: `tmp` holds the bytes destined for `target`.
struct Staged {
    tmp: PathBuf,
    target: PathBuf,
}

pub struct NodeFs {
    root: PathBuf,
    plan: Option<RefCell<BTreeMap<String, PlannedFile>>>,
    /// Uncommitted writes, in order, and what reads must see meanwhile.
    staged: RefCell<Vec<Staged>>,
    overlay: RefCell<BTreeMap<String, Vec<u8>>>,
    /// Dry run: every planned write, link and directory as (path, mode), in order.
    log: RefCell<Vec<(String, String)>>,
}

impl NodeFs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        NodeFs {
            root: root.into(),
            plan: None,
            staged: Default::default(),
            overlay: Default::default(),
            log: Default::default(),
        }
    }

    pub fn dry_run(root: impl Into<PathBuf>) -> Self {
        NodeFs {
            root: root.into(),
            plan: Some(RefCell::new(BTreeMap::new())),
            staged: Default::default(),
            overlay: Default::default(),
            log: Default::default(),
        }
    }

    pub(crate) fn is_dry_run(&self) -> bool {
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
    pub fn read(&self, host_path: impl AsRef<str>) -> Result<Option<Vec<u8>>> {
        let host_path = host_path.as_ref();
        if let Some(data) = self.overlay.borrow().get(host_path) {
            return Ok(Some(data.clone()));
        }
        if let Some(plan) = &self.plan
            && let Some(f) = plan.borrow().get(host_path)
        {
            return Ok(Some(f.data.clone()));
        }
        let real = self.real(host_path);
        match fs::read(&real) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(at("reading", &real)(e)),
        }
    }

    /// Reads `host_path`, following a symlink whose absolute target is a node path (the kubelet's
    /// `kubelet-client-current.pem` names `/var/lib/kubelet/pki/...`, not `<root>/var/...`).
    pub(crate) fn read_following_link(&self, host_path: &str) -> Result<Option<Vec<u8>>> {
        match fs::read_link(self.real(host_path)) {
            Ok(target) => self.read(target.to_string_lossy()),
            Err(_) => self.read(host_path),
        }
    }

    pub fn exists(&self, host_path: impl AsRef<str>) -> bool {
        let host_path = host_path.as_ref();
        if self.overlay.borrow().contains_key(host_path) {
            return true;
        }
        if let Some(plan) = &self.plan
            && plan.borrow().contains_key(host_path)
        {
            return true;
        }
        self.real(host_path).exists()
    }

    /// Stages a file with its mode (see `commit`), creating missing parent dirs with the modes
    /// `paths` gives them. Identical existing content with the same mode is left alone.
    pub fn write(&self, file: &NodeFile, data: &[u8]) -> Result<()> {
        let (host_path, mode) = (file.as_str(), file.mode);
        if let Some(plan) = &self.plan {
            let f = PlannedFile {
                path: host_path.to_string(),
                mode: format!("{mode:04o}"),
                sha256: hex(digest(&SHA256, data).as_ref()),
                size: data.len(),
                data: data.to_vec(),
            };
            self.log.borrow_mut().push((f.path.clone(), f.mode.clone()));
            plan.borrow_mut().insert(host_path.to_string(), f);
            return Ok(());
        }
        let real = self.real(host_path);
        self.make_parents(host_path)?;
        if let Ok(meta) = fs::metadata(&real)
            && meta.permissions().mode() & 0o7777 == mode
            && fs::read(&real).ok().as_deref() == Some(data)
        {
            return Ok(());
        }
        let tmp = temp_name(&real);
        write_temp(&tmp, data, mode).map_err(at("writing", &real))?;
        self.staged.borrow_mut().push(Staged { tmp, target: real });
        self.overlay.borrow_mut().insert(host_path.to_string(), data.to_vec());
        Ok(())
    }

    /// Writes a file now, atomically (temp + rename) but without waiting for the disk: for a
    /// report whose loss in a power cut costs nothing. The next commit's syncfs, which flushes
    /// the whole filesystem, makes it durable too. Not in dry-run mode.
    pub(crate) fn write_unsynced(&self, file: &NodeFile, data: &[u8]) -> Result<()> {
        if self.is_dry_run() {
            return Ok(());
        }
        self.make_parents(file.as_str())?;
        replace(&self.real(file.as_str()), data, file.mode, false)
    }

    /// Stages a symlink `link` → `target` (target is written as given: a host path).
    pub fn symlink(&self, link: &NodeFile, target: &str) -> Result<()> {
        let host_link = link.as_str();
        if let Some(plan) = &self.plan {
            let f = PlannedFile {
                path: host_link.to_string(),
                mode: "symlink".into(),
                sha256: hex(digest(&SHA256, target.as_bytes()).as_ref()),
                size: target.len(),
                data: target.as_bytes().to_vec(),
            };
            self.log.borrow_mut().push((f.path.clone(), format!("{:04o}", link.mode)));
            plan.borrow_mut().insert(host_link.to_string(), f);
            return Ok(());
        }
        let real = self.real(host_link);
        self.make_parents(host_link)?;
        if fs::read_link(&real).ok().as_deref() == Some(Path::new(target)) {
            return Ok(());
        }
        let tmp = temp_name(&real);
        let _ = fs::remove_file(&tmp);
        std::os::unix::fs::symlink(target, &tmp).map_err(at("linking", &real))?;
        self.staged.borrow_mut().push(Staged { tmp, target: real });
        Ok(())
    }

    /// Removes a file now, durably; absent is fine. A no-op in dry-run mode.
    pub fn remove(&self, host_path: impl AsRef<str>) -> Result<()> {
        let host_path = host_path.as_ref();
        self.overlay.borrow_mut().remove(host_path);
        if self.is_dry_run() {
            return Ok(());
        }
        let real = self.real(host_path);
        match fs::remove_file(&real) {
            Ok(()) => sync_filesystems(&[real.parent().unwrap_or(Path::new("/"))]),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(at("removing", &real)(e)),
        }
    }

    /// Makes every staged write durable and visible, in order. A no-op when nothing is staged.
    pub fn commit(&self) -> Result<()> {
        let staged = std::mem::take(&mut *self.staged.borrow_mut());
        self.overlay.borrow_mut().clear();
        if staged.is_empty() {
            return Ok(());
        }
        let dirs: Vec<&Path> = staged.iter().filter_map(|s| s.target.parent()).collect();
        let t = std::time::Instant::now();
        let result = sync_filesystems(&dirs).and_then(|()| {
            for s in &staged {
                fs::rename(&s.tmp, &s.target).map_err(at("renaming into", &s.target))?;
            }
            sync_filesystems(&dirs)
        });
        // First-boot time goes here on slow disks: say how much.
        log::debug!("[fs] committed {} file(s) in {:.1?}", staged.len(), t.elapsed());
        if result.is_err() {
            for s in &staged {
                let _ = fs::remove_file(&s.tmp);
            }
        }
        result
    }

    /// Drops staged writes (after a failed phase): their temp files are removed.
    pub(crate) fn discard(&self) {
        for s in std::mem::take(&mut *self.staged.borrow_mut()) {
            let _ = fs::remove_file(&s.tmp);
        }
        self.overlay.borrow_mut().clear();
    }

    /// Creates a directory with its mode (parents with theirs). A no-op in dry-run mode.
    pub fn mkdir(&self, dir: &Dir) -> Result<()> {
        if self.is_dry_run() {
            self.log.borrow_mut().push((dir.path.clone(), format!("{:04o}", dir.mode)));
            return Ok(());
        }
        self.make_parents(&dir.path)?;
        create_dir(&self.real(&dir.path), dir.mode)
    }

    /// Creates the missing ancestors of a host path, each with the mode `paths` gives it.
    fn make_parents(&self, host_path: &str) -> Result<()> {
        let Some(parent) = Path::new(host_path).parent() else { return Ok(()) };
        if !self.root.is_dir() {
            fs::create_dir_all(&self.root).map_err(at("creating the node root", &self.root))?;
        }
        let mut host = PathBuf::from("/");
        for c in parent.components() {
            if let Component::Normal(part) = c {
                host.push(part);
                let real = self.real(&host.to_string_lossy());
                if !real.is_dir() {
                    create_dir(&real, paths::dir_mode(&host.to_string_lossy()))?;
                }
            }
        }
        Ok(())
    }

    /// Removes temp files that a killed run left in any directory kubestrap writes to (they are
    /// never trusted); `certs_dir` is the configured certificatesDir.
    pub(crate) fn remove_stale_temps(&self, certs_dir: &str) {
        let etcd = format!("{certs_dir}/etcd");
        let mut dirs = vec![certs_dir, etcd.as_str()];
        dirs.extend_from_slice(paths::WRITTEN_DIRS);
        self.remove_stale_temps_in(&dirs);
    }

    fn remove_stale_temps_in(&self, host_dirs: &[&str]) {
        if self.is_dry_run() {
            return;
        }
        for d in host_dirs {
            let Ok(entries) = fs::read_dir(self.real(d)) else { continue };
            for e in entries.flatten() {
                if is_temp_name(&e.file_name().to_string_lossy()) {
                    log::info!("[init] Removing {} left by an interrupted run", e.path().display());
                    let _ = fs::remove_file(e.path());
                }
            }
        }
    }

    /// The dry-run writes, links (with the link's own mode) and directories as (path, mode), in
    /// the order they were made; a path written twice appears twice.
    pub(crate) fn dry_run_log(&self) -> Vec<(String, String)> {
        self.log.borrow().clone()
    }

    /// The dry-run plan, sorted by path.
    pub fn planned(&self) -> Vec<PlannedFile> {
        self.plan.as_ref().map(|p| p.borrow().values().cloned().collect()).unwrap_or_default()
    }
}

/// Held for the whole run so two kubestrap runs on one root never interleave their writes.
/// Released by the kernel when the process exits, even on SIGKILL.
pub struct RunLock {
    _file: File,
}

impl NodeFs {
    /// Takes the root's run lock; if another run holds it, says so and waits for it.
    pub fn lock(&self) -> Result<Option<RunLock>> {
        if self.is_dry_run() {
            return Ok(None);
        }
        let path = self.real(paths::RUN_LOCK.as_str());
        self.make_parents(paths::RUN_LOCK.as_str())?;
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(paths::RUN_LOCK.mode)
            .open(&path)
            .map_err(at("opening", &path))?;
        use rustix::fs::{FlockOperation, flock};
        if flock(&f, FlockOperation::NonBlockingLockExclusive).is_err() {
            log::info!("[lock] another kubestrap run holds {}; waiting for it to finish", path.display());
            flock(&f, FlockOperation::LockExclusive).map_err(|e| at("locking", &path)(e.into()))?;
            log::info!("[lock] the other run finished; continuing from what it left");
        }
        Ok(Some(RunLock { _file: f }))
    }
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Creates one directory with `mode`; an existing one keeps its mode (as Go's MkdirAll).
fn create_dir(dir: &Path, mode: u32) -> Result<()> {
    match fs::create_dir(dir) {
        Ok(()) => fs::set_permissions(dir, fs::Permissions::from_mode(mode)).map_err(at("setting mode of", dir)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(at("creating directory", dir)(e)),
    }
}

impl Drop for NodeFs {
    fn drop(&mut self) {
        self.discard();
    }
}

fn temp_name(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    dir.join(format!(".{name}.kubestrap-tmp.{}", std::process::id()))
}

fn write_temp(tmp: &Path, data: &[u8], mode: u32) -> std::io::Result<()> {
    let _ = fs::remove_file(tmp);
    let mut f = OpenOptions::new().write(true).create_new(true).mode(mode).open(tmp)?;
    // The umask may have narrowed the mode at create time.
    f.set_permissions(fs::Permissions::from_mode(mode))?;
    f.write_all(data)
}

/// One syncfs per filesystem that holds any of `dirs`: flushes file data and directory entries.
fn sync_filesystems(dirs: &[&Path]) -> Result<()> {
    let mut seen = Vec::new();
    for d in dirs {
        let f = File::open(d).map_err(at("opening", d))?;
        let dev = f.metadata().map_err(at("stat", d))?.dev();
        if !seen.contains(&dev) {
            seen.push(dev);
            rustix::fs::syncfs(&f).map_err(|e| at("syncing the filesystem of", d)(e.into()))?;
        }
    }
    Ok(())
}

/// Writes one file atomically and durably right away (temp, fsync, rename, fsync the dir).
pub(crate) fn atomic_write(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    replace(path, data, mode, true)
}

/// Temp file, rename over `path`; with `durable`, the file and its directory are fsynced too.
fn replace(path: &Path, data: &[u8], mode: u32, durable: bool) -> Result<()> {
    let tmp = temp_name(path);
    let dir = path.parent().unwrap_or(Path::new("/"));
    let result = (|| -> std::io::Result<()> {
        write_temp(&tmp, data, mode)?;
        if durable {
            File::open(&tmp)?.sync_all()?;
        }
        fs::rename(&tmp, path)?;
        if durable {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(at("writing", path))
}

/// Is this a temp file left by an interrupted atomic write?
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.contains(".kubestrap-tmp.")
}

#[cfg(test)]
mod tests;
