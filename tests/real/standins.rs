//! Stand-in images for the static Pods, so that the real kubelet runs their containers and
//! their mirror Pods reach Running, as kubeadm's upgrade waits for (the harness runs the real
//! components as processes beside them). Each image holds the pause binary under the
//! component's name: it ignores the manifest's flags and sleeps; the kubelet's probes reach the
//! real component on the node's address. A node opts in with [`MARK`] in its root.

use std::path::{Path, PathBuf};

use super::bins;

/// A file in a node root naming the directory of stand-in archives its containerd imports.
pub const MARK: &str = "/var/lib/kubestrap-test/standin-images";

/// The stand-ins for kube-apiserver, kube-controller-manager and kube-scheduler at each of
/// `versions`, and etcd at `etcd_tag`, written as OCI archives into `dir`.
pub fn build(dir: &Path, versions: &[&str], etcd_tag: &str) -> PathBuf {
    std::fs::create_dir_all(dir).expect("mkdir stand-ins");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("realk8s/images/oci_archive.py");
    let pause = bins::dir().join("pause");
    let mut images: Vec<(String, &str)> = vec![(format!("registry.k8s.io/etcd:{etcd_tag}"), "etcd")];
    for v in versions {
        for c in ["kube-apiserver", "kube-controller-manager", "kube-scheduler"] {
            images.push((format!("registry.k8s.io/{c}:{v}"), c));
        }
    }
    for (name, cmd) in images {
        let out = dir.join(format!("{}.oci.tar", name.replace(['/', ':'], "_")));
        let bin = format!("/usr/local/bin/{cmd}");
        let st = std::process::Command::new("python3")
            .arg(&script)
            .args([name.as_str(), &out.display().to_string(), "--entrypoint", &bin])
            .args(["--env", "PATH=/usr/local/bin:/usr/bin:/bin"])
            .arg(format!("{}:{bin}", pause.display()))
            .status()
            .expect("python3");
        assert!(st.success(), "oci_archive.py {name}");
    }
    dir.to_path_buf()
}
