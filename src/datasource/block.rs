//! Block devices for the disk datasources: find a filesystem by label and mount it read-only.
//!
//! Labels are found without blkid: first `/dev/disk/by-label/<label>` (udev), then by scanning
//! `/sys/class/block` and reading each device's label from its superblock ourselves — the
//! ISO 9660 primary volume descriptor (volume identifier at 0x8028) or the FAT boot sector's
//! volume label (0x2B for FAT12/16, 0x47 for FAT32). Only ISO 9660 and vfat count, as in
//! cloud-init; the FAT label in the root directory entry (which blkid prefers) is not read, and
//! mkfs.fat writes both.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};

use super::{Env, SourceError};

/// A filesystem type a seed disk may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsType {
    Iso9660,
    Vfat,
}

impl FsType {
    pub(crate) fn mount_name(self) -> &'static str {
        match self {
            FsType::Iso9660 => "iso9660",
            FsType::Vfat => "vfat",
        }
    }
}

const ISO_PVD: u64 = 0x8000;
const PROBE_BYTES: usize = 0x8000 + 2048;

/// Reads the filesystem type and label of a device (or image file); None when it is neither
/// ISO 9660 nor FAT.
pub fn read_label(dev: &Path) -> std::io::Result<Option<(FsType, String)>> {
    let f = File::open(dev)?;
    let mut buf = vec![0u8; PROBE_BYTES];
    let mut got = 0;
    while got < buf.len() {
        let n = f.read_at(&mut buf[got..], got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    buf.truncate(got);
    Ok(label_from_bytes(&buf))
}

/// The pure part of [`read_label`].
pub(crate) fn label_from_bytes(b: &[u8]) -> Option<(FsType, String)> {
    let pvd = ISO_PVD as usize;
    if b.len() >= pvd + 0x48 && b[pvd] == 1 && &b[pvd + 1..pvd + 6] == b"CD001" {
        return Some((FsType::Iso9660, text(&b[pvd + 0x28..pvd + 0x48])));
    }
    if b.len() >= 512 && b[510] == 0x55 && b[511] == 0xAA {
        // FAT32 has its extended BPB further in; both carry the type string after the label.
        if b[0x52..0x57] == *b"FAT32" && b[0x42] == 0x29 {
            return Some((FsType::Vfat, fat_label(&b[0x47..0x52])));
        }
        if b[0x36..0x39] == *b"FAT" && b[0x26] == 0x29 {
            return Some((FsType::Vfat, fat_label(&b[0x2B..0x36])));
        }
    }
    None
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).trim_end_matches([' ', '\0']).to_string()
}

fn fat_label(b: &[u8]) -> String {
    let l = text(b);
    if l == "NO NAME" { String::new() } else { l }
}

/// A device carrying one of `labels` (compared without regard to case).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub device: PathBuf,
    pub fstype: FsType,
    pub label: String,
}

/// Looks for a filesystem labelled one of `labels`: by-label links first, then a scan of
/// `/sys/class/block`. Devices that cannot be read are skipped (a CD drive without media).
pub fn find_by_label(env: &Env, labels: &[&str]) -> Option<Found> {
    let matches = |l: &str| labels.iter().any(|want| want.eq_ignore_ascii_case(l));
    let by_label = env.path("/dev/disk/by-label");
    for l in labels {
        let link = by_label.join(l);
        if let Ok(Some((fstype, label))) = read_label(&link)
            && matches(&label)
        {
            let device = std::fs::canonicalize(&link).unwrap_or(link);
            return Some(Found { device, fstype, label });
        }
    }
    let mut names: Vec<String> = std::fs::read_dir(env.path("/sys/class/block"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in names {
        let device = env.path("/dev").join(&name);
        if let Ok(Some((fstype, label))) = read_label(&device)
            && matches(&label)
        {
            return Some(Found { device, fstype, label });
        }
    }
    None
}

/// A read-only mount, unmounted (and its directory removed) when dropped.
#[derive(Debug)]
pub struct Mounted {
    dir: PathBuf,
}

impl Mounted {
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Err(e) = nix::mount::umount2(&self.dir, MntFlags::empty()) {
            log::warn!("unmounting {}: {e}; detaching it", self.dir.display());
            let _ = nix::mount::umount2(&self.dir, MntFlags::MNT_DETACH);
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Mounts `device` read-only (nosuid, nodev, noexec) with mount(2) on a fresh directory under
/// `mount_dir`.
pub fn mount_ro(device: &Path, fstype: &str, mount_dir: &Path, tag: &str) -> Result<Mounted, SourceError> {
    let dir = mount_dir.join(format!("{tag}.{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|source| SourceError::MountPoint { dir: dir.clone(), source })?;
    let flags = MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    let t = std::time::Instant::now();
    if let Err(errno) = nix::mount::mount(Some(device), &dir, Some(fstype), flags, None::<&str>) {
        let _ = std::fs::remove_dir(&dir);
        return Err(SourceError::Mount { device: device.to_path_buf(), fstype: fstype.to_string(), dir, errno });
    }
    log::debug!("mounted {} ({fstype}) in {:.1?}", device.display(), t.elapsed());
    Ok(Mounted { dir })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_label_from_pvd() {
        let mut b = vec![0u8; PROBE_BYTES];
        b[0x8000] = 1;
        b[0x8001..0x8006].copy_from_slice(b"CD001");
        b[0x8028..0x8048].copy_from_slice(format!("{:<32}", "cidata").as_bytes());
        assert_eq!(label_from_bytes(&b), Some((FsType::Iso9660, "cidata".into())));
        b[0x8001] = b'X';
        assert_eq!(label_from_bytes(&b), None);
    }

    #[test]
    fn fat_labels_from_boot_sector() {
        let mut b = vec![0u8; 512];
        b[510] = 0x55;
        b[511] = 0xAA;
        b[0x26] = 0x29;
        b[0x2B..0x36].copy_from_slice(b"CIDATA     ");
        b[0x36..0x3E].copy_from_slice(b"FAT12   ");
        assert_eq!(label_from_bytes(&b), Some((FsType::Vfat, "CIDATA".into())));
        let mut c = vec![0u8; 512];
        c[510] = 0x55;
        c[511] = 0xAA;
        c[0x42] = 0x29;
        c[0x47..0x52].copy_from_slice(b"config-2   ");
        c[0x52..0x5A].copy_from_slice(b"FAT32   ");
        assert_eq!(label_from_bytes(&c), Some((FsType::Vfat, "config-2".into())));
        c[0x47..0x52].copy_from_slice(b"NO NAME    ");
        assert_eq!(label_from_bytes(&c), Some((FsType::Vfat, String::new())));
        assert_eq!(label_from_bytes(&[0u8; 100]), None);
    }
}
