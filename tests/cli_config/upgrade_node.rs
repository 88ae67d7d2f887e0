//! `kubestrap upgrade node`'s, `upgrade apply`'s, `upgrade diff`'s and `upgrade plan`'s refusals, before they talk to any cluster:
//! each exits 2, names what is wrong, and writes nothing (the upgrade itself is
//! tests/real/upgrade_node.rs's, upgrade_apply.rs's and upgrade_diff.rs's, on the real components).

use crate::common::*;

fn upgrade_node(s: &Scratch, extra: &[&str]) -> Run {
    let root = s.root_str();
    let mut args = vec!["upgrade", "node", "--root", root.as_str()];
    args.extend_from_slice(extra);
    kubestrap(&args)
}

fn refused(r: &Run, words: &[&str]) {
    assert_eq!(r.code(), 2, "want exit 2:\n{}", r.stderr());
    for w in words {
        assert!(r.stderr().contains(w), "{w:?} not in:\n{}", r.stderr());
    }
}

fn wrote_nothing(s: &Scratch) {
    assert!(!s.path("/etc/kubernetes/tmp").exists(), "a refused upgrade wrote a backup");
}

#[test]
fn upgrade_apply_is_refused_off_a_control_plane_without_a_version_or_with_a_bad_one() {
    let s = Scratch::new("");
    let root = s.root_str();
    let apply = |extra: &[&str]| {
        let mut args = vec!["upgrade", "apply", "--root", root.as_str()];
        args.extend_from_slice(extra);
        kubestrap(&args)
    };
    refused(&apply(&[]), &["missing one or more required arguments: [version]"]);
    refused(&apply(&["1.37"]), &["the version \"1.37\""]);
    refused(&apply(&["v1.37.2", "--skip-phases", "upload-confg"]), &["upload-confg"]);
    refused(&apply(&["v1.37.2"]), &["/etc/kubernetes/manifests/kube-apiserver.yaml does not exist", "control plane"]);
    wrote_nothing(&s);
}

#[test]
fn a_node_that_never_joined_is_told_to_join_first() {
    let s = Scratch::new("");
    refused(&upgrade_node(&s, &[]), &["/etc/kubernetes/kubelet.conf", "join it first"]);
    wrote_nothing(&s);
}

#[test]
fn bad_upgrade_configurations_and_flags_are_refused() {
    let s = Scratch::new("");
    let cfg = s.path("/upgrade.yaml");
    let cfg_str = cfg.display().to_string();
    for (text, words) in [
        ("apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n", &["no UpgradeConfiguration found"][..]),
        ("apiVersion: kubeadm.k8s.io/v1beta4\nkind: UpgradeConfiguration\nnode:\n  dryrun: true\n", &["dryrun"][..]),
        ("apiVersion: kubeadm.k8s.io/v1beta4\nkind: UpgradeConfiguration\nnode:\n  dryRun: maybe\n", &["dryRun"][..]),
    ] {
        write_file(&cfg, text);
        refused(&upgrade_node(&s, &["--config", &cfg_str]), &[&cfg_str]);
        refused(&upgrade_node(&s, &["--config", &cfg_str]), words);
    }
    refused(&upgrade_node(&s, &["--skip-phases", "kubelet-confg"]), &["kubelet-confg", "kubelet-config"]);
    refused(&upgrade_node(&s, &["--certificate-renewal=maybe"]), &["--certificate-renewal"]);
    wrote_nothing(&s);
}

#[test]
fn upgrade_diff_on_a_node_without_the_manifests_names_the_missing_one() {
    let s = Scratch::new("");
    let root = s.root_str();
    let r = kubestrap(&["upgrade", "diff", "v1.37.1", "--root", &root]);
    refused(&r, &["/etc/kubernetes/manifests/kube-apiserver.yaml", "does not exist", "control plane"]);
    let r = kubestrap(&["upgrade", "diff", "--context-lines", "many", "--root", &root]);
    assert_eq!(r.code(), 2, "a context that is not a number:\n{}", r.stderr());
}

#[test]
fn upgrade_plan_refuses_an_unknown_output_and_a_node_without_a_kubeconfig() {
    let s = Scratch::new("");
    let root = s.root_str();
    let r = kubestrap(&["upgrade", "plan", "v1.37.2", "-o", "wide", "--root", &root]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("--output \"wide\""), "{}", r.stderr());
    let r = kubestrap(&["upgrade", "plan", "v1.37.2", "--root", &root]);
    refused(&r, &["admin.conf", "--kubeconfig"]);
    wrote_nothing(&s);
}
