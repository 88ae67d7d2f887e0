//! Image archives that come with the seed rather than the machine image: an `images/` directory
//! in the baked NoCloud seed directory or on a seed disk (`cidata` or `config-2`), so one image
//! serves clusters of different versions, or an air-gapped site brings its own archives.

use std::path::PathBuf;

use super::block::{self, FsType, Mounted};
use super::configdrive::CONFIG_DRIVE_LABELS;
use super::nocloud::CIDATA_LABELS;
use super::{Env, NOCLOUD_SEED_DIR, SourceError, iso9660};

/// The directory on a NoCloud/config-drive seed disk that is preloaded too.
pub const SEED_DIR: &str = "images";

/// The seed's image directories; a seed disk stays mounted (read-only) until this is dropped.
#[derive(Debug, Default)]
pub struct SeedImages {
    pub dirs: Vec<PathBuf>,
    _mounts: Vec<Mounted>,
}

/// Finds the seed's `images/` directories. A disk is mounted only when it may hold one: an ISO
/// whose root (read in place) has no `images` directory is left alone.
pub fn find(env: &Env) -> Result<SeedImages, SourceError> {
    let mut out = SeedImages::default();
    let baked = env.path(NOCLOUD_SEED_DIR).join(SEED_DIR);
    if baked.is_dir() {
        out.dirs.push(baked);
    }
    for (labels, tag) in [(&CIDATA_LABELS, "cidata-images"), (&CONFIG_DRIVE_LABELS, "config-2-images")] {
        let Some(found) = block::find_by_label(env, labels) else { continue };
        if found.fstype == FsType::Iso9660
            && let Ok(Some(root)) = iso9660::Root::open(&found.device)
            && !root.entries.get(SEED_DIR).is_some_and(|e| e.dir)
        {
            continue;
        }
        let m = block::mount_ro(&found.device, found.fstype.mount_name(), &env.mount_dir, tag)?;
        let dir = m.path().join(SEED_DIR);
        if dir.is_dir() {
            log::info!("[images] seed disk {} (label {:?}) carries {SEED_DIR}/", found.device.display(), found.label);
            out.dirs.push(dir);
            out._mounts.push(m);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::test_needs::{Need, need};

    fn env(root: &std::path::Path) -> Env {
        Env {
            root: root.into(),
            cmdline: String::new(),
            credentials_dir: None,
            imds_base: None,
            mount_dir: root.join("mnt"),
        }
    }

    #[test]
    fn the_baked_seed_directory_images_are_found_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        assert!(find(&env(d.path())).unwrap().dirs.is_empty());
        let dir = d.path().join(NOCLOUD_SEED_DIR).join("images");
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(find(&env(d.path())).unwrap().dirs, vec![dir]);
    }

    /// A seed ISO without `images/` is not mounted (mounting would fail here: no such device).
    #[test]
    fn a_seed_iso_without_images_is_not_mounted() {
        need!(Need::tool("xorriso"));
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("user-data"), "#cloud-config\n").unwrap();
        std::fs::create_dir_all(d.path().join("dev/disk/by-label")).unwrap();
        let iso = d.path().join("dev/sr0");
        super::super::mkisofs(&src, &iso);
        std::os::unix::fs::symlink(&iso, d.path().join("dev/disk/by-label/cidata")).unwrap();
        let found = find(&env(d.path())).unwrap();
        assert!(found.dirs.is_empty());
        assert!(!d.path().join("mnt").exists(), "nothing was mounted");
        // With an images/ directory the disk is mounted, and a file that is no block device
        // cannot be: the error names the device.
        std::fs::create_dir(src.join("images")).unwrap();
        std::fs::remove_file(&iso).unwrap();
        super::super::mkisofs(&src, &iso);
        let e = find(&env(d.path())).unwrap_err().to_string();
        assert!(e.contains("sr0"), "{e}");
    }
}
