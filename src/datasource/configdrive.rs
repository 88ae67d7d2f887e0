//! OpenStack config drive: a filesystem labelled `config-2` (ISO 9660 or vfat) with
//! `openstack/latest/user_data` and `openstack/latest/meta_data.json` (`uuid` → instance-id,
//! `hostname` → local-hostname). network_data.json and vendor data are ignored with a notice.

use super::block;
use super::{Datasource, Env, Gathered, MetaData, SourceError};

pub(crate) const CONFIG_DRIVE_LABELS: [&str; 2] = ["config-2", "CONFIG-2"];

/// Reads the config drive's files from a mounted (or test) directory.
pub(crate) fn read_drive(dir: &std::path::Path) -> Result<Gathered, SourceError> {
    let latest = dir.join("openstack/latest");
    let meta_path = latest.join("meta_data.json");
    let meta_bytes = super::read_capped(&meta_path)?.ok_or_else(|| SourceError::Missing { path: meta_path.clone() })?;
    let v: serde_json::Value = serde_json::from_slice(&meta_bytes)
        .map_err(|e| SourceError::NotJson { path: meta_path.clone(), detail: e.to_string() })?;
    let field = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
    let meta = MetaData { instance_id: field("uuid"), local_hostname: field("hostname"), tree: v.clone() };
    let user_data = super::read_capped(&latest.join("user_data"))?;
    let mut notices = Vec::new();
    for ignored in ["network_data.json", "vendor_data.json", "vendor_data2.json"] {
        if latest.join(ignored).exists() {
            notices.push(format!("configdrive: {ignored} ignored: kubestrap does not apply it"));
        }
    }
    Ok(Gathered { source: "configdrive".into(), user_data, meta, notices, ..Default::default() })
}

pub(crate) struct ConfigDrive {
    env: Env,
}

impl ConfigDrive {
    pub fn new(env: &Env) -> Self {
        ConfigDrive { env: env.clone() }
    }
}

impl Datasource for ConfigDrive {
    fn name(&self) -> &'static str {
        "configdrive"
    }
    fn probe(&self) -> Result<Option<Gathered>, SourceError> {
        let Some(found) = block::find_by_label(&self.env, &CONFIG_DRIVE_LABELS) else {
            return Ok(None);
        };
        let m = block::mount_ro(&found.device, found.fstype.mount_name(), &self.env.mount_dir, "config-2")?;
        let g = read_drive(m.path()).map_err(|e| SourceError::OnDevice {
            device: found.device.clone(),
            label: found.label.clone(),
            source: Box::new(e),
        });
        drop(m);
        g.map(Some)
    }
    fn absent(&self) -> String {
        "no filesystem labelled config-2".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_openstack_latest() {
        let d = tempfile::tempdir().unwrap();
        let latest = d.path().join("openstack/latest");
        std::fs::create_dir_all(&latest).unwrap();
        assert_eq!(
            read_drive(d.path()).unwrap_err().to_string(),
            format!("{} is missing", latest.join("meta_data.json").display())
        );
        std::fs::write(latest.join("meta_data.json"), r#"{"uuid":"u-1","hostname":"cp-0.novalocal","name":"cp-0"}"#)
            .unwrap();
        std::fs::write(latest.join("user_data"), "#cloud-config\n").unwrap();
        std::fs::write(latest.join("network_data.json"), "{}").unwrap();
        let g = read_drive(d.path()).unwrap();
        assert_eq!(g.meta.instance_id.as_deref(), Some("u-1"));
        assert_eq!(g.meta.local_hostname.as_deref(), Some("cp-0.novalocal"));
        assert_eq!(g.meta.tree["name"], "cp-0");
        assert_eq!(g.user_data.as_deref(), Some(&b"#cloud-config\n"[..]));
        assert!(g.notices[0].contains("network_data.json ignored"));
    }
}
