//! One user-data, byte for byte, for every control-plane machine, through `kubestrap boot` on
//! the real components: `initNode` inits (with the CA given as credentials, so the user-data
//! pins it beforehand) and uploads the shared certificates; another joins it as a control plane
//! with a real etcd learner. And never two clusters: a node told to init that finds a live
//! cluster at the endpoint joins it, or stops (exit 4) when the cluster is not the one its
//! user-data pins. What differs per machine comes from the machine: its name from the meta-data
//! (Jinja), its address from its default route, the test host's kubelet flags from
//! /etc/default/kubelet.

use std::path::Path;

use super::cluster::*;
use crate::common::*;

const KEY: &str = "8c2bd5ab3a26b0ea6b7bbbd5f3ac4d3e0b2b0e8c8d7b1d2b4e0a3c5f6a7b8c9d";

/// The shared user-data; `{cri_dir}` holds a link per node to its containerd.
pub(super) const SHARED: &str = "## template: jinja
#cloud-config
kubestrap:
  role: control-plane
{init_node}  token: abcdef.0123456789abcdef
  controlPlaneEndpoint: 192.0.2.10:{port}
  caCertHashes: ['{hash}']
  certificateKey: '{key}'
  kubeadm: |
    apiVersion: kubeadm.k8s.io/v1beta4
    kind: InitConfiguration
    nodeRegistration:
      criSocket: unix://{cri_dir}/{{ ds.meta_data.local_hostname }}/containerd.sock
    localAPIEndpoint: {bindPort: {port}}
    ---
    apiVersion: kubeadm.k8s.io/v1beta4
    kind: ClusterConfiguration
    kubernetesVersion: v1.37.2
    ---
    apiVersion: kubelet.config.k8s.io/v1beta1
    kind: KubeletConfiguration
    failCgroupV1: false
    cgroupDriver: cgroupfs
    evictionHard:
      memory.available: 100Mi
      nodefs.available: 1%
      nodefs.inodesFree: 1%
      imagefs.available: 1%
      imagefs.inodesFree: 1%
    imageGCHighThresholdPercent: 100
    imageGCLowThresholdPercent: 99
    ---
    apiVersion: kubeadm.k8s.io/v1beta4
    kind: JoinConfiguration
    nodeRegistration:
      criSocket: unix://{cri_dir}/{{ ds.meta_data.local_hostname }}/containerd.sock
    controlPlane: {localAPIEndpoint: {bindPort: {port}}}
";

pub(super) fn shared(port: u16, hash: &str, cri_dir: &Path, init_node: bool) -> String {
    let init_node = if init_node { "  initNode: cp-1\n" } else { "" };
    let vars: [(&str, &dyn std::fmt::Display); 5] =
        [("init_node", &init_node), ("port", &port), ("hash", &hash), ("key", &KEY), ("cri_dir", &cri_dir.display())];
    fill(SHARED, &vars)
}

/// A CA made beforehand (as an operator would, on a workstation): (crt, key, pin).
pub(super) fn ca() -> (Vec<u8>, Vec<u8>, String) {
    let t = Scratch::new("");
    kubestrap(&["init", "phase", "certs", "--root", &t.root_str()]).ok();
    let read = |f: &str| std::fs::read(t.pki(f)).unwrap();
    (read("ca.crt"), read("ca.key"), ca_hash_of_root(&t.root()))
}

/// The machine's own part: its seed (meta-data names it), and the test host's kubelet flags.
pub(super) fn machine(root: &Path, user_data: &str, name: &str, i: usize) {
    seed(root, user_data, name);
    let flags = format!("KUBELET_EXTRA_ARGS=\"--node-ip={} --cgroup-root=/kubestrap-{name}\"\n", addr(i));
    write_file(&at(root, "/etc/default/kubelet"), flags);
}

fn plan(root: &Path) -> String {
    std::fs::read_to_string(at(root, "/var/lib/kubestrap/plan.yaml")).unwrap()
}

fn status(root: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(at(root, "/run/kubestrap/status.json")).unwrap()).unwrap()
}

#[test]
fn one_user_data_for_every_control_plane_and_never_two_clusters() {
    let (crt, key, hash) = ca();
    let mut ud = String::new();
    let c = Cluster::boot_with(|lan, root, port| {
        ud = shared(port, &hash, &lan.cri_dir, true);
        machine(root, &ud, "cp-1", 0);
        lan.cri_socket("cp-1", root);
        write_file(&at(root, "/run/credentials/@system/kubestrap.ca-crt"), &crt);
        write_file(&at(root, "/run/credentials/@system/kubestrap.ca-key"), &key);
    });
    let mut c = c;
    let cp1 = c.root();
    let pre = c.first.stderr();
    assert!(pre.contains("No cluster answers at controlPlaneEndpoint"), "{pre}");
    assert!(pre.contains("Using the CA from credential kubestrap.ca-crt"), "{pre}");
    assert_eq!(std::fs::read(c.scratch.pki("ca.crt")).unwrap(), crt);
    assert_eq!(mode(&c.scratch.pki("ca.key")), 0o600);
    c.get(&["-n", "kube-system", "secret", "kubeadm-certs"]);
    for r in [&c.first, &c.init] {
        assert!(!r.stdout().contains(KEY) && !r.stderr().contains(KEY), "the key came with the user-data: not printed");
    }
    let kept = plan(&cp1);
    assert!(!kept.contains(KEY) && !kept.contains(SECRET), "scrubbed once bootstrapped:\n{kept}");
    c.wait_cluster_info_signed();

    // cp-2 boots the same bytes and joins as a control plane, with a real etcd learner.
    let w = Scratch::new("");
    machine(&w.root(), &ud, "cp-2", 1);
    c.lan.cri_socket("cp-2", &w.root());
    let runs = c.boot_node_in("cp-2", 1, w);
    for r in &runs {
        assert_eq!(r.code(), 0, "cp-2:\n{}\n{}\n{}", r.stdout(), r.stderr(), c.status());
    }
    assert_eq!(runs.len(), 2);
    c.wait_ready("cp-2");
    c.wait_probes(1);
    let cp2 = c.hosts[1].root.clone();
    let pki = |root: &Path, f: &str| std::fs::read(at(root, &format!("/etc/kubernetes/pki/{f}"))).unwrap();
    for f in ["ca.crt", "ca.key", "sa.key", "front-proxy-ca.crt", "etcd/ca.crt"] {
        assert_eq!(pki(&cp2, f), pki(&cp1, f), "cp-2: {f} comes from kubeadm-certs");
    }
    let (_, san, _) = capture(
        std::process::Command::new("openssl")
            .args(["x509", "-noout", "-ext", "subjectAltName", "-in"])
            .arg(at(&cp2, "/etc/kubernetes/pki/apiserver.crt")),
    );
    assert!(san.contains("DNS:cp-2") && san.contains(&format!("IP Address:{}", addr(1))), "{san}");
    let st = status(&cp2);
    assert_eq!((st["role"].as_str(), st["state"].as_str()), (Some("control-plane"), Some("done")), "{st}");
    let kept = plan(&cp2);
    assert!(kept.starts_with("node: !Join") && !kept.contains(KEY) && !kept.contains(SECRET), "{kept}");
    let node = c.get(&["node", "cp-2"]);
    assert_eq!(node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"], "");

    // Told to init (no initNode), cp-3 finds the live cluster its user-data pins and joins it.
    let cp3 = Scratch::new("");
    machine(&cp3.root(), &shared(c.port, &hash, &c.lan.cri_dir, false), "cp-3", 2);
    let bare = c.bare_node("cp-3", 2);
    let r = run_in(&bare, &boot_args("pre-kubelet", &cp3.root_str()));
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    assert!(
        r.stderr().contains("joining it as a control plane instead of initializing a second cluster"),
        "{}",
        r.stderr()
    );
    assert!(plan(&cp3.root()).starts_with("node: !Join"), "{}", plan(&cp3.root()));
    assert_eq!(pki(&cp3.root(), "ca.crt"), crt);

    // A cluster whose CA the user-data does not pin: exit 4 with the reason, nothing written.
    let other = "sha256:00000000000000000000000000000000000000000000000000000000000000ff";
    let foreign = Scratch::new("");
    machine(&foreign.root(), &shared(c.port, other, &c.lan.cri_dir, false), "cp-4", 3);
    let r = run_in(&c.bare_node("cp-4", 3), &boot_args("pre-kubelet", &foreign.root_str()));
    assert_eq!(r.code(), 4, "{}\n{}", r.stdout(), r.stderr());
    assert!(r.stderr().contains(&hash) && r.stderr().contains("caCertHashes does not pin"), "{}", r.stderr());
    assert!(!at(&foreign.root(), "/etc/kubernetes").exists(), "nothing written");

    // No pins, no key: nothing to join with, so it stops rather than make a second cluster.
    let bare_ud =
        format!("#cloud-config\nkubestrap:\n  role: control-plane\n  controlPlaneEndpoint: {CP_ADDR}:{}\n", c.port);
    let lone = Scratch::new("");
    machine(&lone.root(), &bare_ud, "cp-5", 4);
    let r = run_in(&c.bare_node("cp-5", 4), &boot_args("pre-kubelet", &lone.root_str()));
    assert_eq!(r.code(), 4, "{}\n{}", r.stdout(), r.stderr());
    assert!(r.stderr().contains("refusing to initialize a second one"), "{}", r.stderr());
    assert!(!at(&lone.root(), "/etc/kubernetes").exists(), "nothing written");
    assert_eq!(status(&lone.root())["state"], "failed");
}
