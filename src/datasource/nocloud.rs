//! NoCloud: `user-data` and `meta-data` (instance-id, local-hostname) from the seed directory
//! `/var/lib/cloud/seed/nocloud/` (`nocloud-seed`) or from a filesystem labelled `cidata`/`CIDATA`
//! (`nocloud`: ISO 9660 read in place, or vfat (or an ISO the in-place reader cannot make out)
//! mounted read-only just long enough to read it). `network-config`
//! and `vendor-data` are ignored with a notice: kubestrap does not configure the network.

use std::path::{Path, PathBuf};

use super::block;
use super::{Datasource, Env, Gathered, MetaData, NOCLOUD_SEED_DIR, SourceError};

/// Seed labels NoCloud accepts.
pub(crate) const CIDATA_LABELS: [&str; 2] = ["cidata", "CIDATA"];

/// Where a seed's files are: a directory, or the root of an ISO 9660 seed read in place.
enum Seed<'a> {
    Dir(&'a Path),
    Iso { dev: &'a Path, root: super::iso9660::Root },
}

impl Seed<'_> {
    /// How errors name the file: its path, or `DEVICE:/name` on an unmounted seed.
    fn origin(&self, name: &str) -> PathBuf {
        match self {
            Seed::Dir(d) => d.join(name),
            Seed::Iso { dev, .. } => PathBuf::from(format!("{}:/{name}", dev.display())),
        }
    }

    fn read(&self, name: &str) -> Result<Option<Vec<u8>>, SourceError> {
        let Seed::Iso { root, .. } = self else { return super::read_capped(&self.origin(name)) };
        root.read(name, super::MAX_READ_BYTES).map_err(|source| match source.kind() {
            std::io::ErrorKind::FileTooLarge => {
                SourceError::TooLarge { path: self.origin(name), limit: super::MAX_READ_BYTES }
            }
            _ => SourceError::Read { path: self.origin(name), source },
        })
    }

    fn exists(&self, name: &str) -> bool {
        match self {
            Seed::Dir(d) => d.join(name).exists(),
            Seed::Iso { root, .. } => root.entries.contains_key(name),
        }
    }
}

/// Reads a NoCloud seed from a directory; None when it has neither user-data nor meta-data.
pub(crate) fn read_seed(dir: &Path, source: &str) -> Result<Option<Gathered>, SourceError> {
    read_from(&Seed::Dir(dir), source)
}

fn read_from(seed: &Seed, source: &str) -> Result<Option<Gathered>, SourceError> {
    let user_data = seed.read("user-data")?;
    let meta_bytes = seed.read("meta-data")?;
    if user_data.is_none() && meta_bytes.is_none() {
        return Ok(None);
    }
    let meta = match meta_bytes {
        Some(b) => super::parse_nocloud_meta(&seed.origin("meta-data").display().to_string(), &b)?,
        None => MetaData::default(),
    };
    let mut notices = Vec::new();
    for ignored in ["network-config", "vendor-data"] {
        if seed.exists(ignored) {
            notices.push(format!("{source}: {ignored} ignored: kubestrap does not apply it"));
        }
    }
    if user_data.is_none() {
        notices.push(format!("{source}: no user-data file in the seed"));
    }
    Ok(Some(Gathered { source: source.into(), user_data, meta, notices, ..Default::default() }))
}

/// An ISO 9660 seed read in place, without mounting it; `None` when the reader cannot make it
/// out or finds neither seed file by name (then it is mounted, and the kernel's isofs decides).
fn read_unmounted(dev: &Path, source: &str) -> Result<Option<Gathered>, SourceError> {
    let root = match super::iso9660::Root::open(dev) {
        Ok(Some(root)) => root,
        Ok(None) => return Ok(None),
        Err(e) => {
            log::debug!("{source}: reading {} in place: {e}; mounting it", dev.display());
            return Ok(None);
        }
    };
    read_from(&Seed::Iso { dev, root }, source)
}

/// `nocloud-seed`: the seed directory baked into the image.
pub(crate) struct SeedDir {
    dir: PathBuf,
}

impl SeedDir {
    pub fn new(env: &Env) -> Self {
        SeedDir { dir: env.path(NOCLOUD_SEED_DIR) }
    }
}

impl Datasource for SeedDir {
    fn name(&self) -> &'static str {
        "nocloud-seed"
    }
    fn probe(&self) -> Result<Option<Gathered>, SourceError> {
        read_seed(&self.dir, self.name())
    }
    fn absent(&self) -> String {
        format!("no user-data or meta-data in {}", self.dir.display())
    }
}

/// `nocloud`: the cidata filesystem.
pub struct Cidata {
    env: Env,
}

impl Cidata {
    pub fn new(env: &Env) -> Self {
        Cidata { env: env.clone() }
    }
}

impl Datasource for Cidata {
    fn name(&self) -> &'static str {
        "nocloud"
    }
    fn probe(&self) -> Result<Option<Gathered>, SourceError> {
        let Some(found) = block::find_by_label(&self.env, &CIDATA_LABELS) else {
            return Ok(None);
        };
        let unmounted = match found.fstype {
            block::FsType::Iso9660 => read_unmounted(&found.device, self.name())?,
            block::FsType::Vfat => None,
        };
        let g = match unmounted {
            Some(g) => Some(g),
            None => {
                let m = block::mount_ro(&found.device, found.fstype.mount_name(), &self.env.mount_dir, "cidata")?;
                read_seed(m.path(), self.name())?
            }
        };
        match g {
            Some(mut g) => {
                g.notices.push(format!("nocloud: read {} (label {:?})", found.device.display(), found.label));
                Ok(Some(g))
            }
            None => Err(SourceError::EmptySeed { device: found.device, label: found.label }),
        }
    }
    fn absent(&self) -> String {
        "cidata not present (no filesystem labelled cidata/CIDATA in /dev/disk/by-label or /sys/class/block)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::test_needs::{Need, need};

    #[test]
    fn seed_dir_reads_user_and_meta_data_and_notes_ignored_files() {
        let d = tempfile::tempdir().unwrap();
        let s = SeedDir { dir: d.path().join("seed") };
        assert_eq!(s.probe().unwrap(), None);
        assert!(s.absent().contains("seed"));
        std::fs::create_dir(d.path().join("seed")).unwrap();
        assert_eq!(s.probe().unwrap(), None, "an empty seed dir is not a seed");
        std::fs::write(d.path().join("seed/user-data"), "#cloud-config\n").unwrap();
        std::fs::write(d.path().join("seed/meta-data"), "instance-id: iid-1\nlocal-hostname: w1\n").unwrap();
        std::fs::write(d.path().join("seed/network-config"), "version: 2\n").unwrap();
        let g = s.probe().unwrap().unwrap();
        assert_eq!(g.source, "nocloud-seed");
        assert_eq!(g.meta.instance_id.as_deref(), Some("iid-1"));
        assert_eq!(g.meta.local_hostname.as_deref(), Some("w1"));
        assert!(g.notices.iter().any(|n| n.contains("network-config ignored")), "{:?}", g.notices);
    }

    /// An ISO seed read in place: its files, and a user-data over the cap refused naming it.
    #[test]
    fn iso_seed_read_in_place_and_an_oversized_file_refused() {
        need!(Need::tool("xorriso"));
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("meta-data"), "instance-id: iid-1\nlocal-hostname: iso-1\n").unwrap();
        std::fs::write(src.join("vendor-data"), "#cloud-config\n").unwrap();
        let iso = d.path().join("seed.iso");
        let xorriso = |user_data: &[u8]| {
            std::fs::write(src.join("user-data"), user_data).unwrap();
            super::super::mkisofs(&src, &iso);
        };
        xorriso(b"#cloud-config\n");
        let g = read_unmounted(&iso, "nocloud").unwrap().expect("the seed");
        assert_eq!(g.user_data.as_deref(), Some(&b"#cloud-config\n"[..]));
        assert_eq!(g.meta.local_hostname.as_deref(), Some("iso-1"));
        assert!(g.notices.iter().any(|n| n.contains("vendor-data ignored")), "{:?}", g.notices);

        xorriso(&vec![b'#'; super::super::MAX_READ_BYTES as usize + 1]);
        let e = read_unmounted(&iso, "nocloud").unwrap_err().to_string();
        assert!(e.contains(&format!("{}:/user-data", iso.display())), "{e}");
        assert!(matches!(read_unmounted(&iso, "nocloud"), Err(SourceError::TooLarge { .. })));
    }

    #[test]
    fn seed_dir_with_bad_meta_data_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("meta-data"), "[1, 2]").unwrap();
        let e = read_seed(d.path(), "nocloud-seed").unwrap_err().to_string();
        assert_eq!(e, format!("{}: meta-data is not a YAML mapping", d.path().join("meta-data").display()));
    }

    #[test]
    fn cidata_absent_without_labelled_device() {
        let d = tempfile::tempdir().unwrap();
        let env = Env {
            root: d.path().into(),
            cmdline: String::new(),
            credentials_dir: None,
            imds_base: None,
            mount_dir: d.path().join("mnt"),
        };
        std::fs::create_dir_all(d.path().join("sys/class/block/vdb")).unwrap();
        std::fs::create_dir_all(d.path().join("dev")).unwrap();
        std::fs::write(d.path().join("dev/vdb"), vec![0u8; 4096]).unwrap();
        let c = Cidata::new(&env);
        assert_eq!(c.probe().unwrap(), None);
        assert!(c.absent().contains("cidata not present"));
    }
}
