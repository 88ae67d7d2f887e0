//! `kubestrap config images list` against the real kubeadm's `config images list`: the same
//! images in the same order, in each output format, from flags and from a config file. kubeadm
//! runs with no network at all (its default version is an online lookup; every case here names one).

use std::process::Command;

use crate::bins;
use crate::common::kubestrap;
use crate::common::needs::need;

fn kubeadm(args: &[&str]) -> String {
    let out = Command::new("unshare")
        .arg("-n")
        .arg(bins::bin("kubeadm"))
        .args(["config", "images", "list"])
        .args(args)
        .output()
        .expect("run kubeadm");
    assert!(out.status.success(), "kubeadm {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn config_images_list_prints_what_kubeadm_prints() {
    need!(crate::kubeadm_need());
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("cluster.yaml");
    std::fs::write(
        &cfg,
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.36.1\n\
         imageRepository: example.com/k8s\ndns:\n  disabled: true\netcd:\n  local:\n    imageTag: 3.6.9-0\n",
    )
    .expect("write config");
    let cfg = cfg.to_string_lossy().into_owned();
    let cases: Vec<Vec<&str>> = vec![
        vec!["--kubernetes-version", "v1.37.2"],
        vec!["--kubernetes-version", "v1.36.3", "--image-repository", "mirror.example/k8s"],
        vec!["--kubernetes-version", "v1.37.2", "-o", "json"],
        vec!["--kubernetes-version", "v1.37.2", "-o", "yaml"],
        vec!["--config", &cfg],
        // With --config the flags are ignored, as kubeadm ignores them.
        vec!["--config", &cfg, "--kubernetes-version", "v1.37.2"],
    ];
    for args in cases {
        let mut ours = vec!["config", "images", "list"];
        ours.extend(&args);
        let run = kubestrap(&ours);
        assert!(run.out.status.success(), "kubestrap {args:?}: {}", run.stderr());
        let theirs = kubeadm(&args);
        assert!(theirs.lines().count() >= 6, "{theirs}");
        assert_eq!(run.stdout(), theirs, "config images list {args:?}");
    }
}
