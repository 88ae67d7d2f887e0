//! Every input is validated before the first write (#22): a refused init or join leaves the
//! node root byte-identical, as kubeadm refuses a bad configuration before any phase runs.

use crate::common::*;

/// A root that already holds something (a node image's files), so "unchanged" means more than
/// "still empty".
fn lived_in(s: &Scratch) {
    write_file(&s.root().join("etc/hostname"), "node-1\n");
    write_file(&s.root().join("etc/kubernetes/manifests/.keep"), "");
    write_file(&s.root().join("var/lib/kubelet/config.yaml"), "# from the image\n");
}

#[test]
fn a_refused_init_leaves_the_root_byte_identical() {
    let bad =
        BASE_CONFIG.replace("  advertiseAddress: 10.0.0.10\n", "  advertiseAddress: 10.0.0.10\n  bindPort: seventy\n");
    assert_ne!(bad, BASE_CONFIG, "the fixture has a localAPIEndpoint to break");
    let s = Scratch::new(&bad);
    lived_in(&s);
    let before = tree(&s.root());
    let r = s.init(&[]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("bindPort"), "{}", r.stderr());
    assert_eq!(tree(&s.root()), before, "a refused init wrote under the root");
}

#[test]
fn a_join_refused_for_a_missing_ca_pin_leaves_the_root_byte_identical() {
    let s = Scratch::new("");
    lived_in(&s);
    let before = tree(&s.root());
    let root = s.root_str();
    // No pin and no skip: kubeadm refuses this when it validates the configuration.
    let r = kubestrap(&["join", "127.0.0.1:1", "--token", TOKEN, "--root", &root]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("--discovery-token-ca-cert-hash"), "{}", r.stderr());
    assert_eq!(tree(&s.root()), before, "a refused join wrote under the root (join-in-progress?)");
    assert!(!s.root().join("var/lib/kubestrap/join-in-progress").exists());
}

#[test]
fn a_join_config_refused_by_field_leaves_the_root_byte_identical() {
    let s = Scratch::new("");
    lived_in(&s);
    let cfg = s.dir.path().join("join.yaml");
    std::fs::write(
        &cfg,
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    \
         apiServerEndpoint: 127.0.0.1:1\n    token: not-a-token\n    unsafeSkipCAVerification: true\n",
    )
    .unwrap();
    let before = tree(&s.root());
    let r = kubestrap(&["join", "--config", cfg.to_str().unwrap(), "--root", &s.root_str()]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert_eq!(tree(&s.root()), before, "a refused join wrote under the root");
}

/// The root's tree without kubestrap's own run lock (taken before any phase runs).
fn node_files(s: &Scratch) -> Vec<(std::path::PathBuf, u32, Option<Vec<u8>>)> {
    tree(&s.root()).into_iter().filter(|(p, _, _)| !p.starts_with(s.root().join("var/lib/kubestrap"))).collect()
}

/// A patch directory that cannot be read, or a patch that cannot apply, fails init before its
/// first write (kubeadm finds them only in the phase that applies them), naming the directory
/// or file; `--patches` next to `--config` is refused as kubeadm refuses it.
#[test]
fn bad_patches_fail_init_before_anything_is_written() {
    let with_dir = |dir: &str| {
        BASE_CONFIG
            .replace("kind: InitConfiguration\n", &format!("kind: InitConfiguration\npatches:\n  directory: {dir}\n"))
    };
    let s = Scratch::new(&with_dir("/etc/kubernetes/patches"));
    lived_in(&s);
    let before = node_files(&s);
    let r = s.init(&[]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("could not list patch files for path \"/etc/kubernetes/patches\""), "{}", r.stderr());
    assert_eq!(node_files(&s), before, "a failed init wrote a node file");

    // A JSON patch whose test fails, for the scheduler (the last static Pod kubeadm writes).
    let dir = s.root().join("etc/kubernetes/patches");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("kube-scheduler+json.yaml"), "- {op: test, path: /kind, value: Deployment}\n").unwrap();
    let before = node_files(&s);
    let r = s.init(&[]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("/etc/kubernetes/patches/kube-scheduler+json.yaml"), "{}", r.stderr());
    assert_eq!(node_files(&s), before, "a failed init wrote a node file");

    let r = s.init(&["--patches", "/etc/kubernetes/patches"]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("can not mix '--config' with arguments [patches]"), "{}", r.stderr());

    // An empty directory is kubeadm's "no patches": accepted.
    let empty =
        BASE_CONFIG.replace("kind: InitConfiguration\n", "kind: InitConfiguration\npatches:\n  directory: \"\"\n");
    let r = kubestrap::config::parse_documents("f.yaml", &empty);
    assert!(r.is_ok(), "{:?}", r.err());
}
