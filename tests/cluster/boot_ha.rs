//! One user-data for every control-plane machine, through `kubestrap boot`: `initNode` inits
//! (with the CA given as credentials, so the user-data can pin it beforehand) and uploads the
//! shared certificates; the others join it as control planes. And never two clusters: a node
//! told to init that finds a live cluster at the endpoint joins it, or stops (exit 4) when the
//! cluster is not the one its user-data pins.

use crate::common::*;

use std::path::Path;

const KEY: &str = "8c2bd5ab3a26b0ea6b7bbbd5f3ac4d3e0b2b0e8c8d7b1d2b4e0a3c5f6a7b8c9d";

fn seed(root: &Path, user_data: &str, hostname: &str) {
    let d = root.join("var/lib/cloud/seed/nocloud");
    write_file(&d.join("user-data"), user_data);
    write_file(&d.join("meta-data"), format!("instance-id: {hostname}\nlocal-hostname: {hostname}\n"));
    write_file(&root.join("etc/kubestrap/datasource"), "kubestrap.ds=nocloud\n");
}

fn credential(root: &Path, name: &str, value: &[u8]) {
    write_file(&root.join("run/credentials/@system").join(name), value);
}

fn boot(root: &Path, stage: &str) -> Run {
    let root = root.display().to_string();
    kubestrap(&["boot", "--stage", stage, "--root", &root, "--datasource-timeout", "3s"])
}

fn plan(root: &Path) -> String {
    std::fs::read_to_string(root.join("var/lib/kubestrap/plan.yaml")).unwrap()
}

/// A CA made beforehand (as an operator would, on a workstation), and its pin.
fn ca() -> (Vec<u8>, Vec<u8>, String) {
    let t = tempfile::tempdir().unwrap();
    kubestrap(&["init", "phase", "certs", "--root", t.path().to_str().unwrap()]).ok();
    let pki = t.path().join("etc/kubernetes/pki");
    (std::fs::read(pki.join("ca.crt")).unwrap(), std::fs::read(pki.join("ca.key")).unwrap(), ca_hash_of_root(t.path()))
}

/// The shared user-data. The joining nodes run no etcd here (the learner join against real etcd
/// is tests/cluster/ha_etcd.rs), so their embedded JoinConfiguration skips etcd-join.
fn shared(port: u16, healthz: u16, hash: &str, init_node: Option<&str>) -> String {
    let init_node = init_node.map(|n| format!("  initNode: {n}\n")).unwrap_or_default();
    format!(
        "#cloud-config\nkubestrap:\n  role: control-plane\n{init_node}  token: {TOKEN}\n  \
         controlPlaneEndpoint: 127.0.0.1:{port}\n  caCertHashes: ['{hash}']\n  certificateKey: '{KEY}'\n  kubeadm: |\n    \
         apiVersion: kubeadm.k8s.io/v1beta4\n    kind: InitConfiguration\n    localAPIEndpoint: {{advertiseAddress: 127.0.0.1, bindPort: {port}}}\n    \
         ---\n    apiVersion: kubeadm.k8s.io/v1beta4\n    kind: ClusterConfiguration\n    kubernetesVersion: v1.37.0\n    \
         ---\n    apiVersion: kubelet.config.k8s.io/v1beta1\n    kind: KubeletConfiguration\n    healthzPort: {healthz}\n    \
         ---\n    apiVersion: kubeadm.k8s.io/v1beta4\n    kind: JoinConfiguration\n    skipPhases: [etcd-join]\n    \
         controlPlane: {{localAPIEndpoint: {{advertiseAddress: 127.0.0.1}}}}\n"
    )
}

struct Live {
    cp1: tempfile::TempDir,
    double: kube_double::Handle,
    port: u16,
    healthz: u16,
    hash: String,
}

/// cp-1 boots the shared user-data with the CA credentials: it inits and uploads the certs.
fn init_node() -> Live {
    let (crt, key, hash) = ca();
    let (port, healthz) = (free_port(), free_port());
    let cp1 = tempfile::tempdir().unwrap();
    seed(cp1.path(), &shared(port, healthz, &hash, Some("cp-1")), "cp-1");
    credential(cp1.path(), "kubestrap.ca-crt", &crt);
    credential(cp1.path(), "kubestrap.ca-key", &key);
    let r = boot(cp1.path(), "pre-kubelet");
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    assert!(r.stderr().contains("No cluster answers at controlPlaneEndpoint"), "{}", r.stderr());
    assert!(r.stderr().contains("Using the CA from credential kubestrap.ca-crt"), "{}", r.stderr());
    assert_eq!(std::fs::read(cp1.path().join("etc/kubernetes/pki/ca.crt")).unwrap(), crt);
    assert_eq!(mode(&cp1.path().join("etc/kubernetes/pki/ca.key")), 0o600);

    let double = start_double(&cp1.path().join("etc/kubernetes/pki"), port, healthz, |_| {});
    double.register_node(&kubestrap::host::hostname(), &[]).ok();
    let r = boot(cp1.path(), "post-kubelet");
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    assert!(double.object("/api/v1/namespaces/kube-system/secrets/kubeadm-certs").is_some(), "certs uploaded");
    assert!(!r.stdout().contains(KEY) && !r.stderr().contains(KEY), "the key came with the user-data: not printed");
    let kept = plan(cp1.path());
    assert!(!kept.contains(KEY) && !kept.contains(SECRET), "scrubbed once bootstrapped:\n{kept}");
    Live { cp1, double, port, healthz, hash }
}

#[test]
fn one_user_data_for_every_control_plane() {
    let live = init_node();
    let ud = shared(live.port, live.healthz, &live.hash, Some("cp-1"));
    for node in ["cp-2", "cp-3"] {
        let root = tempfile::tempdir().unwrap();
        seed(root.path(), &ud, node);
        let t = std::time::Instant::now();
        let r = boot(root.path(), "pre-kubelet");
        assert_eq!(r.code(), 0, "{node}:\n{}\n{}", r.stdout(), r.stderr());
        assert!(plan(root.path()).starts_with("node: !Join"), "{}", plan(root.path()));
        let pki = root.path().join("etc/kubernetes/pki");
        for shared in ["ca.crt", "ca.key", "sa.key", "front-proxy-ca.crt", "etcd/ca.crt"] {
            assert_eq!(
                std::fs::read(pki.join(shared)).unwrap(),
                std::fs::read(live.cp1.path().join("etc/kubernetes/pki").join(shared)).unwrap(),
                "{node}: {shared} comes from kubeadm-certs"
            );
        }
        let out = std::process::Command::new("openssl")
            .args(["x509", "-noout", "-ext", "subjectAltName", "-in"])
            .arg(pki.join("apiserver.crt"))
            .output()
            .unwrap();
        let apiserver = String::from_utf8_lossy(&out.stdout);
        assert!(apiserver.contains(&format!("DNS:{node}")), "{node}: {apiserver}");
        assert!(root.path().join("etc/kubernetes/manifests/kube-apiserver.yaml").exists());
        assert!(!root.path().join("etc/kubernetes/manifests/etcd.yaml").exists(), "etcd-join was skipped");

        live.double.register_node(node, &[]).unwrap();
        let r = boot(root.path(), "post-kubelet");
        assert_eq!(r.code(), 0, "{node}:\n{}\n{}", r.stdout(), r.stderr());
        println!("{node}: control-plane join through boot, both stages: {:.2?}", t.elapsed());
        let n = live.double.object(&format!("/api/v1/nodes/{node}")).unwrap();
        assert!(n["metadata"]["labels"].get("node-role.kubernetes.io/control-plane").is_some(), "{n}");
        let st: serde_json::Value =
            serde_json::from_slice(&std::fs::read(root.path().join("run/kubestrap/status.json")).unwrap()).unwrap();
        assert_eq!((st["role"].as_str(), st["state"].as_str()), (Some("control-plane"), Some("done")));
        let kept = plan(root.path());
        assert!(!kept.contains(KEY) && !kept.contains(SECRET), "scrubbed once bootstrapped:\n{kept}");
    }
}

#[test]
fn never_two_clusters() {
    let live = init_node();
    // Told to init (no initNode), it finds the live cluster its user-data pins and joins it.
    let cp4 = tempfile::tempdir().unwrap();
    seed(cp4.path(), &shared(live.port, live.healthz, &live.hash, None), "cp-4");
    let r = boot(cp4.path(), "pre-kubelet");
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    assert!(
        r.stderr().contains("joining it as a control plane instead of initializing a second cluster"),
        "{}",
        r.stderr()
    );
    assert!(plan(cp4.path()).starts_with("node: !Join"), "{}", plan(cp4.path()));
    assert_eq!(
        std::fs::read(cp4.path().join("etc/kubernetes/pki/ca.crt")).unwrap(),
        std::fs::read(live.cp1.path().join("etc/kubernetes/pki/ca.crt")).unwrap()
    );

    // A cluster whose CA the user-data does not pin: exit 4 with the reason, nothing written.
    let other = "sha256:00000000000000000000000000000000000000000000000000000000000000ff";
    let foreign = tempfile::tempdir().unwrap();
    seed(foreign.path(), &shared(live.port, live.healthz, other, None), "cp-5");
    let r = boot(foreign.path(), "pre-kubelet");
    assert_eq!(r.code(), 4, "{}\n{}", r.stdout(), r.stderr());
    assert!(r.stderr().contains(&live.hash) && r.stderr().contains("caCertHashes does not pin"), "{}", r.stderr());
    assert!(!foreign.path().join("etc/kubernetes").exists(), "nothing written");

    // No pins, no key: nothing to join with, so it stops rather than make a second cluster.
    let bare = format!(
        "#cloud-config\nkubestrap:\n  role: control-plane\n  controlPlaneEndpoint: 127.0.0.1:{}\n  advertiseAddress: 127.0.0.1\n",
        live.port
    );
    let lone = tempfile::tempdir().unwrap();
    seed(lone.path(), &bare, "cp-6");
    let r = boot(lone.path(), "pre-kubelet");
    assert_eq!(r.code(), 4, "{}\n{}", r.stdout(), r.stderr());
    assert!(r.stderr().contains("refusing to initialize a second one"), "{}", r.stderr());
    assert!(!lone.path().join("etc/kubernetes").exists(), "nothing written");
    let st: serde_json::Value =
        serde_json::from_slice(&std::fs::read(lone.path().join("run/kubestrap/status.json")).unwrap()).unwrap();
    assert_eq!(st["state"], "failed");
}
