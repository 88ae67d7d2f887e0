//! Afterburn's attribute files from kubestrap's own datasource, so units written for Flatcar or
//! Fedora CoreOS (`EnvironmentFile=/run/metadata/flatcar`) find their `COREOS_EC2_HOSTNAME` and
//! friends: `/run/metadata/flatcar` holds the `COREOS_<PLATFORM>_*` names,
//! `/run/metadata/afterburn` the `AFTERBURN_<PLATFORM>_*` ones, one `KEY=VALUE` a line. Both are
//! written (maybe empty) so that a unit naming either does not fail for its absence; a file
//! already there (the real Afterburn ran first, knowing more keys) is left alone. `/run` is
//! emptied at every boot, so the first boot's contents are kept under `/var/lib/kubestrap` and
//! put back by later boots, which do not read the datasource.

use crate::datasource::vars::Vars;
use crate::error::Result;
use crate::fsutil::NodeFs;
use crate::paths::{File, METADATA_AFTERBURN, METADATA_AFTERBURN_SAVED, METADATA_FLATCAR, METADATA_FLATCAR_SAVED};

/// (file in /run, its saved copy, the name prefix it holds).
static FILES: [(File, File, &str); 2] = [
    (METADATA_FLATCAR, METADATA_FLATCAR_SAVED, "COREOS_"),
    (METADATA_AFTERBURN, METADATA_AFTERBURN_SAVED, "AFTERBURN_"),
];

/// Writes both files (and their saved copies) atomically under the node root, in one commit;
/// returns the line to log: how many variables, and which files were already there.
pub fn write_metadata_files(fs: &NodeFs, vars: &Vars) -> Result<String> {
    let all = vars.afterburn();
    let mut kept = Vec::new();
    for (file, saved, prefix) in &FILES {
        let text: String =
            all.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(k, v)| format!("{k}={v}\n")).collect();
        fs.write(saved, text.as_bytes())?;
        if fs.exists(file) {
            kept.push(file.as_str());
        } else {
            fs.write(file, text.as_bytes())?;
        }
    }
    fs.commit()?;
    let mut line = format!(
        "{} variables from the {} datasource in {} and {}",
        all.len() / 2,
        vars.source(),
        METADATA_FLATCAR.as_str(),
        METADATA_AFTERBURN.as_str()
    );
    if !kept.is_empty() {
        line.push_str(&format!(" ({} already there, left as it is)", kept.join(", ")));
    }
    Ok(line)
}

/// A later boot: puts the saved files back in `/run` where nothing else wrote them; the number
/// put back.
pub fn restore_metadata_files(fs: &NodeFs) -> Result<usize> {
    let mut n = 0;
    for (file, saved, _) in &FILES {
        if let Some(text) = fs.read(saved)?
            && !fs.exists(file)
        {
            fs.write(file, &text)?;
            n += 1;
        }
    }
    if n > 0 {
        fs.commit()?;
    }
    Ok(n)
}

/// [`restore_metadata_files`], logged. A failure costs the units that read the files, not the
/// node, so it is said and not fatal.
pub(crate) fn put_back(fs: &NodeFs) {
    match restore_metadata_files(fs) {
        Ok(0) => {}
        Ok(n) => log::info!("[metadata] Put back {n} files in /run/metadata from the first boot"),
        Err(e) => log::warn!("[metadata] putting back /run/metadata from the first boot: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::{Gathered, MetaData};

    fn ec2() -> Vars {
        let tree = serde_json::json!({"instance-id": "i-0abc", "local-hostname": "ip-10-0-0-7",
            "placement": {"availability-zone": "us-east-1a"}});
        let meta = MetaData { instance_id: Some("i-0abc".into()), local_hostname: Some("ip-10-0-0-7".into()), tree };
        Vars::new(&Gathered { source: "ec2".into(), meta, ..Default::default() })
    }

    #[test]
    fn writes_flatcar_and_afterburn_files() {
        let d = tempfile::tempdir().unwrap();
        let fs = NodeFs::new(d.path());
        let line = write_metadata_files(&fs, &ec2()).unwrap();
        assert_eq!(line, "4 variables from the ec2 datasource in /run/metadata/flatcar and /run/metadata/afterburn");
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

        // A later boot: /run is empty again, and the saved files come back.
        std::fs::remove_dir_all(d.path().join("run/metadata")).unwrap();
        assert_eq!(restore_metadata_files(&fs).unwrap(), 2);
        assert!(read("run/metadata/flatcar").starts_with("COREOS_EC2_HOSTNAME="));
        assert_eq!(restore_metadata_files(&fs).unwrap(), 0, "already there");
    }

    #[test]
    fn afterburns_own_file_is_left_alone_and_no_meta_data_writes_empty_files() {
        let d = tempfile::tempdir().unwrap();
        let fs = NodeFs::new(d.path());
        std::fs::create_dir_all(d.path().join("run/metadata")).unwrap();
        std::fs::write(d.path().join("run/metadata/flatcar"), "COREOS_EC2_INSTANCE_TYPE=t3.small\n").unwrap();
        let line = write_metadata_files(&fs, &ec2()).unwrap();
        assert!(line.ends_with("(/run/metadata/flatcar already there, left as it is)"), "{line}");
        let read = |p: &str| std::fs::read_to_string(d.path().join(p)).unwrap();
        assert_eq!(read("run/metadata/flatcar"), "COREOS_EC2_INSTANCE_TYPE=t3.small\n");
        assert!(read("run/metadata/afterburn").starts_with("AFTERBURN_AWS_"));

        let d = tempfile::tempdir().unwrap();
        let fs = NodeFs::new(d.path());
        let none = Vars::new(&Gathered { source: "credentials".into(), ..Default::default() });
        assert!(write_metadata_files(&fs, &none).unwrap().starts_with("0 variables from the credentials datasource"));
        assert_eq!(std::fs::read_to_string(d.path().join("run/metadata/flatcar")).unwrap(), "");
    }
}
