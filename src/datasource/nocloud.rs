//! NoCloud: `user-data` and `meta-data` (instance-id, local-hostname) from the seed directory
//! `/var/lib/cloud/seed/nocloud/` (`nocloud-seed`) or from a filesystem labelled `cidata`/`CIDATA`
//! (`nocloud`, ISO 9660 or vfat, mounted read-only just long enough to read it). `network-config`
//! and `vendor-data` are ignored with a notice: kubestrap does not configure the network.

use std::path::{Path, PathBuf};

use super::block;
use super::{Datasource, Env, Gathered, MetaData, NOCLOUD_SEED_DIR, SourceError};

/// Seed labels NoCloud accepts.
pub const CIDATA_LABELS: [&str; 2] = ["cidata", "CIDATA"];

/// Reads a NoCloud seed from a directory; None when it has neither user-data nor meta-data.
pub fn read_seed(dir: &Path, source: &str) -> Result<Option<Gathered>, SourceError> {
    let user_data = super::read_capped(&dir.join("user-data"))?;
    let meta_bytes = super::read_capped(&dir.join("meta-data"))?;
    if user_data.is_none() && meta_bytes.is_none() {
        return Ok(None);
    }
    let meta = match meta_bytes {
        Some(b) => super::parse_nocloud_meta(&dir.join("meta-data").display().to_string(), &b)?,
        None => MetaData::default(),
    };
    let mut notices = Vec::new();
    for ignored in ["network-config", "vendor-data"] {
        if dir.join(ignored).exists() {
            notices.push(format!("{source}: {ignored} ignored: kubestrap does not apply it"));
        }
    }
    if user_data.is_none() {
        notices.push(format!("{source}: no user-data file in the seed"));
    }
    Ok(Some(Gathered { source: source.into(), user_data, meta, notices, ..Default::default() }))
}

/// `nocloud-seed`: the seed directory baked into the image.
pub struct SeedDir {
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
        let m = block::mount_ro(&found.device, found.fstype.mount_name(), &self.env.mount_dir, "cidata")?;
        let g = read_seed(m.path(), self.name())?;
        drop(m);
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
