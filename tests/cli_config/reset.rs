//! `kubestrap reset` on a node root laid out by `kubestrap init --on-disk-only` (real
//! certificates, kubeconfigs, manifests and kubelet files): what kubeadm's reset deletes is gone,
//! what it keeps is kept, kubestrap's own state is gone; a dry run or a "no" changes nothing.
//! Under a root other than `/` the kubelet and the containers are this machine's, so they are
//! left alone (the Host-side calls are covered by the library tests with the fake machine).

use crate::common::*;

fn laid_out() -> Scratch {
    let s = Scratch::new(fixture!("base/kubeadm.yaml"));
    s.init(&[]).ok();
    write_file(&s.path("/var/lib/etcd/member/snap/db"), "etcd data");
    write_file(&s.path("/etc/cni/net.d/10-flannel.conflist"), "{}");
    write_file(&s.path("/etc/kubernetes/tmp/kubeadm-backup-etcd/x"), "x");
    write_file(&s.path("/var/lib/kubestrap/done-pre-kubelet"), "");
    write_file(&s.path("/run/kubestrap/status.json"), "{}");
    s
}

fn reset(s: &Scratch, extra: &[&str]) -> Run {
    let root = s.root_str();
    let mut args = vec!["reset", "--root", root.as_str()];
    args.extend_from_slice(extra);
    kubestrap(&args)
}

fn empty(s: &Scratch, host: &str) -> bool {
    std::fs::read_dir(s.path(host)).expect(host).next().is_none()
}

#[test]
fn reset_force_leaves_a_node_for_a_first_boot() {
    let s = laid_out();
    assert!(s.path("/etc/kubernetes/manifests/etcd.yaml").exists() && s.pki("ca.key").exists());
    // The member removal is the library tests' (fake etcd) and tests/real's: here cleanup-node
    // runs first, then remove-etcd-member finds no manifest and only empties the data dir.
    let r = reset(&s, &["--force", "--skip-phases", "remove-etcd-member"]).ok();
    let out = r.stdout();
    assert!(
        out.contains(
            "[reset] Deleting contents of directories: [/etc/kubernetes/manifests /var/lib/kubelet /etc/kubernetes/pki]"
        ),
        "{out}"
    );
    assert!(out.contains("does not perform cleanup of CNI plugin configuration"), "{out}");
    assert!(out.contains("is a first boot"), "{out}");
    for dir in ["/etc/kubernetes/manifests", "/etc/kubernetes/pki", "/var/lib/kubelet", "/var/lib/kubestrap"] {
        assert!(empty(&s, dir), "{dir} must be emptied (and kept)");
    }
    for conf in ["admin", "super-admin", "kubelet", "controller-manager", "scheduler"] {
        assert!(!s.path(&format!("/etc/kubernetes/{conf}.conf")).exists(), "{conf}.conf must be gone");
    }
    assert!(!s.path("/run/kubestrap/status.json").exists());
    assert!(s.path("/etc/cni/net.d/10-flannel.conflist").exists(), "CNI config is kept, as kubeadm");
    assert!(s.path("/etc/kubernetes/tmp/kubeadm-backup-etcd/x").exists(), "tmp is kept without --cleanup-tmp-dir");
    assert!(s.path("/var/lib/etcd/member/snap/db").exists(), "remove-etcd-member was skipped");

    let r = reset(&s, &["phase", "remove-etcd-member"]).ok();
    assert!(r.stdout().contains("No etcd manifest found"), "{}", r.stdout());
    let left: Vec<_> = std::fs::read_dir(s.path("/var/lib/etcd")).unwrap().flatten().map(|e| e.path()).collect();
    assert!(
        left.is_empty(),
        "the data dir is emptied all the same, as kubeadm: {left:?}\n{}\n{}",
        r.stdout(),
        r.stderr()
    );

    // The node is a first boot again: init lays it out anew.
    s.init(&[]).ok();
    assert!(s.pki("ca.key").exists());
}

#[test]
fn reset_dry_run_and_a_refused_question_change_nothing() {
    let s = laid_out();
    let before = snapshot(&s.root());
    let r = reset(&s, &["--dry-run"]).ok();
    assert!(
        r.stdout().contains("[reset] Would remove the etcd member on this node from the etcd cluster"),
        "{}",
        r.stdout()
    );
    assert!(r.stdout().contains("[reset] Would delete files: [/etc/kubernetes/admin.conf"), "{}", r.stdout());
    assert_eq!(snapshot(&s.root()), before, "--dry-run changed the node");
    // No --force and no "y" on stdin (it is closed): kubeadm's question, then nothing.
    let r = reset(&s, &[]);
    assert_eq!(r.code(), 1, "{}", r.stderr());
    assert!(r.stdout().contains("[reset] Are you sure you want to proceed? [y/N]: "), "{}", r.stdout());
    assert!(r.stderr().contains("didn't answer (Y|y)"), "{}", r.stderr());
    assert_eq!(snapshot(&s.root()), before, "a refused reset changed the node");
    let r = reset(&s, &["--force", "--skip-phases=cleanup"]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("unknown reset phase \"cleanup\""), "{}", r.stderr());
    assert_eq!(snapshot(&s.root()), before);
}

#[test]
fn reset_help_lists_kubeadm_flags() {
    let r = kubestrap(&["reset", "--help"]).ok();
    for flag in [
        "--force",
        "--dry-run",
        "--skip-phases",
        "--cri-socket",
        "--cert-dir",
        "--cleanup-tmp-dir",
        "--kubeconfig",
        "--root",
        "phase",
    ] {
        assert!(r.stdout().contains(flag), "{flag} not in reset --help:\n{}", r.stdout());
    }
}

/// reset's `--kubeconfig` is accepted and said to be unused (it finds etcd from the node's own
/// manifest), never dropped in silence.
#[test]
fn reset_says_its_kubeconfig_is_unused() {
    let s = Scratch::new(BASE_CONFIG);
    let root = s.root_str();
    let r =
        kubestrap(&["reset", "--force", "--dry-run", "--kubeconfig", "/etc/kubernetes/admin.conf", "--root", &root]);
    assert!(r.stderr().contains("--kubeconfig /etc/kubernetes/admin.conf: kubestrap reset"), "{}", r.stderr());
    assert!(r.stderr().contains("the flag is ignored"), "{}", r.stderr());
}
