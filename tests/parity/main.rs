//! Parity with the real kubeadm v1.37.2: kubeadm's on-disk init phases (certs, kubeconfig, etcd,
//! control-plane, kubelet-start; in a namespace of their own, with no network) and
//! `kubestrap init --on-disk-only` on the same config, then what each wrote compared fact by fact
//! (facts.rs). Any difference not on the allow-list (allow.rs) fails, with a readable report.

#[path = "../common/mod.rs"]
mod common;

mod allow;
mod api;
mod certs;
mod corefile;
use common::real_bins as bins;
mod diff;
mod facts;
mod images;
mod kubeadm;
mod patches;
mod pem;

use common::needs::{Need, need};
use common::{Scratch, fixture};
use std::path::Path;

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() as i64
}

/// What a test here that runs kubeadm needs: the real kubeadm of each version of the matrix
/// (scripts/real-k8s), and root (it runs in namespaces of its own, chrooted into the node root).
fn kubeadm_need() -> Need {
    let kubeadms = bins::VERSIONS.iter().map(|v| Need::real_bin(&bins::dir_of(v).join("kubeadm")));
    Need::all(kubeadms.chain([Need::root()]))
}

/// Runs both on `config` and compares their nodes.
fn parity(name: &str, config: &str) {
    need!(crate::kubeadm_need());
    let s = Scratch::new(config);
    let started = now();
    let root = kubeadm::init_on_disk(Path::new(&s.config()), s.dir.path());
    let theirs = facts::node(&root, started);
    // Not a vacuous comparison: kubeadm wrote the kubelet's files and the manifests.
    for f in [
        "var/lib/kubelet/kubeadm-flags.env",
        "var/lib/kubelet/config.yaml",
        "etc/kubernetes/manifests/kube-apiserver.yaml",
    ] {
        assert!(theirs.contains_key(&format!("{f} <mode>")), "kubeadm wrote no {f}");
    }
    for d in facts::CA_DIRS.iter().filter(|d| Path::new("/").join(d).is_dir()) {
        std::fs::create_dir_all(s.root().join(d)).expect("mkdir CA dir");
    }
    let started = now();
    s.init(&["--ignore-preflight-errors=all"]).ok();
    let ours = facts::node(&s.root(), started);
    let (n, disk) = diff::compare(name, &theirs, &ours);

    let started = now();
    let objects = api::kubeadm(Path::new(&s.config()), s.dir.path());
    assert!(objects.len() > 20, "kubeadm's dry run created only {} objects", objects.len());
    let theirs = api::facts(&objects, started);
    let started = now();
    let ours = api::facts(&api::kubestrap(&s.config()), started);
    let (m, objects) = diff::compare(&format!("{name} API objects"), &theirs, &ours);
    eprintln!("{disk}\n{objects}");
    assert!(n + m == 0, "{disk}\n{objects}");
}

#[test]
fn sample() {
    parity("sample", fixture!("parity/sample.yaml"));
}

#[test]
fn rsa() {
    parity("rsa", fixture!("parity/rsa.yaml"));
}

#[test]
fn external_etcd() {
    parity("external-etcd", fixture!("parity/external-etcd.yaml"));
}

#[test]
fn dual_stack() {
    parity("dual-stack", fixture!("parity/dual-stack.yaml"));
}

#[test]
fn control_plane_endpoint() {
    parity("endpoint", fixture!("parity/endpoint.yaml"));
}

/// A golden config (its ClusterConfiguration last) with a fixed token (a random one cannot
/// compare) and the key algorithm spelled out, as kubestrap's default differs (ECDSA-P256;
/// docs/differences.md).
fn golden(name: &str, config: &str) {
    let token = "kind: InitConfiguration\nbootstrapTokens:\n- token: abcdef.0123456789abcdef\n";
    let config = config.replacen("kind: InitConfiguration\n", token, 1);
    assert!(config.contains("bootstrapTokens"), "{name} has no InitConfiguration");
    parity(name, &format!("{config}encryptionAlgorithm: ECDSA-P256\n"));
}

/// The golden configs (tests/cli_config/golden.rs) against the real kubeadm too: extraArgs
/// order, extraVolumes, extraEnvs, an image repository, stacked etcd's extraArgs.
#[test]
fn golden_stacked() {
    golden("golden-stacked", fixture!("golden-stacked/kubeadm.yaml"));
}

/// IPv6 external etcd on the previous minor (v1.36.3).
#[test]
fn golden_external_etcd_ipv6() {
    golden("golden-external-etcd-ipv6", fixture!("golden-external-etcd-ipv6/kubeadm.yaml"));
}

/// The sample (stacked etcd) on the previous minor: kubeadm 1.37.2's v1.36.3 cluster (its
/// images, etcd pin, flags and kubelet files) is kubestrap's.
#[test]
fn sample_previous_minor() {
    let config = fixture!("parity/sample.yaml").replace("kubernetesVersion: v1.37.2", "kubernetesVersion: v1.36.3");
    assert!(config.contains("v1.36.3"));
    parity("sample-v1.36", &config);
}

/// A rich manifest: a repeated flag, defaults overridden, volumes read-only and not, envs with
/// valueFrom, on every component; kubelet extra args.
#[test]
fn rich() {
    parity("rich", fixture!("parity/rich.yaml"));
}
