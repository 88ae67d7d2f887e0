//! kubestrap's reading of Corefiles for the CoreDNS upgrade preflight against corefile-migration
//! itself (the version kubeadm 1.37 pins, built by scripts/real-k8s as `corefileoracle`): for each
//! fixture Corefile and each pair of CoreDNS versions, the same servers, plugins and options, the
//! same Unsupported notices in the same order, the same errors. From a CoreDNS older than the
//! table kubestrap keeps, kubestrap refuses where the tool walks older tables (docs/differences.md).

use std::path::PathBuf;
use std::process::Command;

use kubestrap::upgrade::corefile::{Corefile, migratable, unsupported};
use serde_json::{Value, json};

use crate::bins;
use crate::common::needs::{Need, need};

const PAIRS: [(&str, &str); 9] = [
    ("1.14.2", "1.14.6"),
    ("1.14.0", "1.14.6"),
    ("1.14.4", "1.14.6"),
    ("1.14.6", "1.14.6"),
    ("1.13.2", "1.14.6"),
    ("1.14.6", "1.14.2"),
    ("1.14.5", "1.14.6"),
    ("", "1.14.6"),
    ("1.12.0", "1.14.6"),
];

fn ours(text: &str) -> Value {
    let cf = Corefile::parse(text);
    json!(
        cf.servers
            .iter()
            .map(|s| json!({
                "keys": s.keys,
                "plugins": s.plugins.iter().map(|p| json!({
                    "name": p.name,
                    "args": p.args,
                    "options": p.options.iter().map(|(n, a)| json!({"name": n, "args": a})).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            }))
            .collect::<Vec<_>>()
    )
}

#[test]
fn corefiles_are_judged_as_corefile_migration_judges_them() {
    let oracle = bins::dir().join("corefileoracle");
    need!(Need::real_bin(&oracle));
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corefile");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 8, "the fixtures: {files:?}");
    let (mut compared, mut refused, mut notices) = (0, 0, 0);
    for (from, to) in PAIRS {
        let out = Command::new(&oracle).args([from, to]).args(&files).output().expect("run corefileoracle");
        assert!(out.status.success(), "corefileoracle: {}", String::from_utf8_lossy(&out.stderr));
        let lines: Vec<Value> =
            String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), files.len());
        for (file, theirs) in files.iter().zip(&lines) {
            let text = std::fs::read_to_string(file).unwrap();
            let name = file.file_name().unwrap().to_string_lossy();
            assert_eq!(ours(&text), theirs["servers"], "{name}: the Corefile as parsed");
            let u = unsupported(from, to, &text);
            let m = migratable(from, to);
            let older = |e: &String| e.starts_with("kubestrap checks Corefiles from CoreDNS 1.13.2 on");
            match (&u, theirs["unsupported_error"].as_str().unwrap()) {
                (Err(e), "") if older(e) => {
                    refused += 1;
                    assert!(m.as_ref().is_err_and(older), "{name} {from}->{to}: {m:?}");
                    continue;
                }
                (Ok(list), "") => {
                    notices += list.len();
                    assert_eq!(json!(list), theirs["unsupported"], "{name} {from}->{to}: the notices");
                }
                (Err(e), want) => assert_eq!(e, want, "{name} {from}->{to}: Unsupported's error"),
                (Ok(list), want) => panic!("{name} {from}->{to}: kubestrap found {list:?}, the tool failed: {want}"),
            }
            assert_eq!(m.err().unwrap_or_default(), theirs["migrate_error"].as_str().unwrap(), "{name} {from}->{to}");
            compared += 1;
        }
    }
    eprintln!("corefile: {compared} verdicts equal, {refused} refused as older, {notices} notices");
    assert!(compared > 50 && notices > 30 && refused > 0, "{compared} {notices} {refused}");
}
