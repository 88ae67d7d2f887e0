//! The failure file through a real `run_with`: a stage that fails leaves it (scrubbed), the next
//! one that succeeds removes it.

use std::time::Duration;

use super::*;
use crate::userdata::{BootPlan, NodePlan};

fn args(root: &Path, stage: Stage) -> BootArgs {
    BootArgs {
        stage,
        root: root.into(),
        datasource_timeout: Duration::from_secs(1),
        env: crate::datasource::Env {
            root: root.into(),
            cmdline: String::new(),
            credentials_dir: None,
            imds_base: None,
            mount_dir: root.join("mnt"),
        },
        image_dirs: Vec::new(),
        upgrade_wait: Duration::from_secs(1),
    }
}

#[test]
fn a_failed_stage_leaves_the_failure_file_and_a_successful_one_removes_it() {
    let d = tempfile::tempdir().unwrap();
    let fs = NodeFs::new(d.path());
    let key = "ab".repeat(32);
    crate::logging::remember(&format!(
        "[runcmd] kubeadm join 10.0.0.1:6443 --token abcdef.0123456789abcdef --certificate-key {key}"
    ));
    // A post-kubelet stage without the pre-kubelet plan fails with exit 2.
    let e = run_with(args(d.path(), Stage::PostKubelet), &script::NotUnderRoot { root: d.path().into() }).unwrap_err();
    assert_eq!(e.kind.exit_code(), 2);
    let path = d.path().join("run/cluster-api/bootstrap-failure.json");
    let text = std::fs::read_to_string(&path).expect("the failure file");
    assert!(!text.contains("0123456789abcdef") && !text.contains(&key), "a secret in the failure file: {text}");
    let f = failure::read(&fs).expect("parses");
    assert_eq!((f.reason.as_str(), f.stage.as_str(), f.exit_code), ("NodeStateInvalid", "post-kubelet", 2));
    assert_eq!(f.attempt, 1);
    assert!(f.message.contains("plan.yaml is missing"), "{}", f.message);
    assert!(f.log_tail.iter().any(|l| l.contains("--token <redacted>")), "{:?}", f.log_tail);
    assert!(time::OffsetDateTime::parse(&f.time, &time::format_description::well_known::Rfc3339).is_ok());
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o644, "readable by whoever probes the node; it holds no secret");

    // A worker's plan: its post-kubelet stage has nothing to do and succeeds.
    let plan = BootPlan { node: NodePlan::Join { join: Default::default() }, script: None };
    fs.write(&PLAN_FILE, plan.to_yaml().unwrap().as_bytes()).unwrap();
    fs.commit().unwrap();
    run_with(args(d.path(), Stage::PostKubelet), &script::NotUnderRoot { root: d.path().into() }).unwrap();
    assert!(!path.exists(), "a successful stage removes the failure file");
    assert!(failure::read(&fs).is_none());
}
