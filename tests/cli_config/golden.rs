//! Golden files for the manifests and kubeconfigs, made with a fixed CA fixture so that
//! everything but the freshly generated client keys is byte-stable.
//! The configs are tests/fixtures/golden-<scenario>/kubeadm.yaml.
//! `UPDATE_GOLDEN=1 cargo test --test cli_config golden::` rewrites them; review the diff before
//! committing.

use crate::common::*;

use std::fs;
use std::path::Path;

const FILES: &[&str] = &[
    "manifests/etcd.yaml",
    "manifests/kube-apiserver.yaml",
    "manifests/kube-controller-manager.yaml",
    "manifests/kube-scheduler.yaml",
    "admin.conf",
    "super-admin.conf",
    "kubelet.conf",
    "controller-manager.conf",
    "scheduler.conf",
];

/// Client keys and certs are fresh each run; everything else must match byte for byte.
fn mask(text: &str) -> String {
    text.lines()
        .map(|l| match l.split_once(": ") {
            Some((k, _)) if k.trim_start() == "client-certificate-data" || k.trim_start() == "client-key-data" => {
                format!("{k}: <masked>")
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn check_scenario(name: &str, config: &str) {
    let s = Scratch::new(config);
    let pki = s.pki("");
    fs::create_dir_all(&pki).unwrap();
    let fixtures = fixture_path("ca");
    for f in ["ca.crt", "ca.key"] {
        fs::copy(fixtures.join(f), pki.join(f)).unwrap();
    }
    s.init(&[]).ok();
    let golden_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut diffs = Vec::new();
    for f in FILES {
        let produced = s.path(&format!("/etc/kubernetes/{f}"));
        let golden = golden_dir.join(f);
        let got =
            if produced.exists() { mask(&fs::read_to_string(&produced).unwrap()) } else { "<absent>\n".to_string() };
        if update {
            fs::create_dir_all(golden.parent().unwrap()).unwrap();
            fs::write(&golden, &got).unwrap();
            continue;
        }
        let want = fs::read_to_string(&golden)
            .unwrap_or_else(|_| panic!("missing golden {}; run with UPDATE_GOLDEN=1", golden.display()));
        if want != got {
            diffs.push(format!("{name}/{f} differs from {}:\n--- want\n{want}\n--- got\n{got}", golden.display()));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

#[test]
fn stacked_etcd_with_extras_matches_golden() {
    check_scenario("stacked", fixture!("golden-stacked/kubeadm.yaml"));
}

#[test]
fn external_etcd_ipv6_matches_golden() {
    check_scenario("external-etcd-ipv6", fixture!("golden-external-etcd-ipv6/kubeadm.yaml"));
}
