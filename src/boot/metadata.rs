//! Afterburn's attribute files from kubestrap's own datasource, so units written for Flatcar or
//! Fedora CoreOS (`EnvironmentFile=/run/metadata/flatcar`) find their `COREOS_EC2_HOSTNAME` and
//! friends: `/run/metadata/flatcar` holds the `COREOS_<PLATFORM>_*` names,
//! `/run/metadata/afterburn` the `AFTERBURN_<PLATFORM>_*` ones, one `KEY=VALUE` a line. Both are
//! written (maybe empty) so that a unit naming either does not fail for its absence.

use crate::datasource::vars::Vars;
use crate::error::Result;
use crate::fsutil::NodeFs;
use crate::paths::{METADATA_AFTERBURN, METADATA_FLATCAR};

/// Writes both files atomically under the node root, in one commit; returns how many
/// variables each holds, for the log line.
pub fn write_metadata_files(fs: &NodeFs, vars: &Vars) -> Result<usize> {
    let all = vars.afterburn();
    let lines = |prefix: &str| -> String {
        all.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(k, v)| format!("{k}={v}\n")).collect()
    };
    fs.write(&METADATA_FLATCAR, lines("COREOS_").as_bytes())?;
    fs.write(&METADATA_AFTERBURN, lines("AFTERBURN_").as_bytes())?;
    fs.commit()?;
    Ok(all.len() / 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::{Gathered, MetaData};

    #[test]
    fn writes_flatcar_and_afterburn_files() {
        let d = tempfile::tempdir().unwrap();
        let fs = NodeFs::new(d.path());
        let tree = serde_json::json!({"instance-id": "i-0abc", "local-hostname": "ip-10-0-0-7",
            "placement": {"availability-zone": "us-east-1a"}});
        let meta = MetaData { instance_id: Some("i-0abc".into()), local_hostname: Some("ip-10-0-0-7".into()), tree };
        let vars = Vars::new(&Gathered { source: "ec2".into(), meta, ..Default::default() });
        assert_eq!(write_metadata_files(&fs, &vars).unwrap(), 4);
        let read = |p: &str| std::fs::read_to_string(d.path().join(p)).unwrap();
        assert_eq!(
            read("run/metadata/flatcar"),
            "COREOS_EC2_HOSTNAME=ip-10-0-0-7\nCOREOS_EC2_INSTANCE_ID=i-0abc\nCOREOS_EC2_REGION=us-east-1\n\
             COREOS_EC2_AVAILABILITY_ZONE=us-east-1a\n"
        );
        assert_eq!(
            read("run/metadata/afterburn"),
            "AFTERBURN_AWS_HOSTNAME=ip-10-0-0-7\nAFTERBURN_AWS_INSTANCE_ID=i-0abc\nAFTERBURN_AWS_REGION=us-east-1\n\
             AFTERBURN_AWS_AVAILABILITY_ZONE=us-east-1a\n"
        );
        let mode = |p: &str| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(d.path().join(p)).unwrap().permissions().mode() & 0o777
        };
        assert_eq!(mode("run/metadata/afterburn"), 0o644);
        // A source without meta-data: both files, empty.
        let none = Vars::new(&Gathered { source: "credentials".into(), ..Default::default() });
        assert_eq!(write_metadata_files(&fs, &none).unwrap(), 0);
        assert_eq!(read("run/metadata/flatcar"), "");
    }
}
