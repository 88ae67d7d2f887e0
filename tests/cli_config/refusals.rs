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

/// kubeadm applies `patches.directory`; kubestrap does not yet, so it refuses the config rather
/// than build a node without the operator's patches (it used to accept and ignore it).
#[test]
fn patches_directory_is_refused_not_ignored_by_init_and_join() {
    let bad = BASE_CONFIG.replace(
        "kind: InitConfiguration\n",
        "kind: InitConfiguration\npatches:\n  directory: /etc/kubernetes/patches\n",
    );
    assert_ne!(bad, BASE_CONFIG, "the fixture has an InitConfiguration to patch");
    let s = Scratch::new(&bad);
    lived_in(&s);
    let before = tree(&s.root());
    let r = s.init(&[]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(
        r.stderr().contains("patches.directory") && r.stderr().contains("/etc/kubernetes/patches"),
        "{}",
        r.stderr()
    );
    assert_eq!(tree(&s.root()), before, "a refused init wrote under the root");

    let cfg = s.dir.path().join("join.yaml");
    std::fs::write(
        &cfg,
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\npatches:\n  directory: /p\ndiscovery:\n  \
         bootstrapToken:\n    apiServerEndpoint: 127.0.0.1:1\n    token: abcdef.0123456789abcdef\n    \
         unsafeSkipCAVerification: true\n",
    )
    .unwrap();
    let r = kubestrap(&["join", "--config", cfg.to_str().unwrap(), "--root", &s.root_str()]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("patches.directory"), "{}", r.stderr());
    assert_eq!(tree(&s.root()), before, "a refused join wrote under the root");

    // An empty directory is kubeadm's "no patches": accepted.
    let empty =
        BASE_CONFIG.replace("kind: InitConfiguration\n", "kind: InitConfiguration\npatches:\n  directory: \"\"\n");
    let r = kubestrap::config::parse_documents("f.yaml", &empty);
    assert!(r.is_ok(), "{:?}", r.err());
}
