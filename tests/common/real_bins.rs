//! Where scripts/real-k8s put the real components: the Kubernetes components of each version of
//! the matrix in their own bin dir, and etcd, containerd v2, runc, CNI, CoreDNS and pause (shared
//! by every version) in v1.37.2's.

use std::path::PathBuf;

pub const K8S_VERSION: &str = "v1.37.2";

/// Every real component of every version of the matrix: what tests/real runs.
pub fn need_all() -> super::needs::Need {
    let bins = VERSIONS.iter().flat_map(|v| K8S_COMPONENTS.iter().map(move |c| dir_of(v).join(c)));
    let shared = ["etcd", "containerd", "runc"].map(|b| dir().join(b));
    super::needs::Need::all(bins.chain(shared).map(|p| super::needs::Need::real_bin(&p)))
}

/// The versions scripts/real-k8s builds (its `K8S_MATRIX`), newest first.
pub const VERSIONS: [&str; 2] = ["v1.37.2", "v1.36.3"];

/// The binaries built per version; every other one is shared and lives in [`dir`].
pub const K8S_COMPONENTS: [&str; 7] =
    ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubeadm", "kubectl"];

/// The cache's bin directory of v1.37.2 (and the shared components), as `scripts/real-k8s
/// --print` gives it.
pub fn dir() -> PathBuf {
    dir_of(K8S_VERSION)
}

/// The bin directory of `version`, as `scripts/real-k8s --print VERSION` gives it.
pub fn dir_of(version: &str) -> PathBuf {
    let cache = match std::env::var_os("KUBESTRAP_CACHE") {
        Some(c) => PathBuf::from(c),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/kubestrap"),
    };
    cache.join("k8s").join(version).join("bin")
}

/// One real binary of v1.37.2 (or a shared one); a missing one fails the test with what to run
/// (a test skips first with `need!(Need::real_bin(..))`, or its binary with [`need_all`]).
pub fn bin(name: &str) -> PathBuf {
    bin_of(K8S_VERSION, name)
}

/// One real binary of `version` (a Kubernetes component from that version's dir, anything else
/// from the shared one); a version outside the matrix or a missing binary fails the test with
/// what to run.
pub fn bin_of(version: &str, name: &str) -> PathBuf {
    assert!(VERSIONS.contains(&version), "Kubernetes {version} is not in the real-component matrix {VERSIONS:?}");
    let d = if K8S_COMPONENTS.contains(&name) { dir_of(version) } else { dir() };
    let p = d.join(name);
    super::needs::require(super::needs::Need::real_bin(&p));
    p
}

/// The matrix version a Kubernetes version runs as: the built one of its minor (v1.37.0 runs
/// v1.37.2's binaries); a minor outside the matrix fails the test.
pub fn version_for(version: &str) -> &'static str {
    let minor = |v: &str| v.trim_start_matches('v').split('.').take(2).collect::<Vec<_>>().join(".");
    VERSIONS
        .iter()
        .find(|v| minor(v) == minor(version))
        .unwrap_or_else(|| panic!("no real Kubernetes of {version}'s minor in the matrix {VERSIONS:?}"))
}

/// The binary a static Pod's container runs: a Kubernetes component at its image's tag's version
/// (`registry.k8s.io/kube-apiserver:v1.36.3` runs v1.36.3's), anything else (etcd's `3.7.0-0`)
/// the shared one.
pub fn bin_for_image(image: &str, name: &str) -> PathBuf {
    let tag = image.rsplit_once(':').map(|(_, t)| t).filter(|t| !t.contains('/')).unwrap_or("");
    match tag.starts_with('v') && K8S_COMPONENTS.contains(&name) {
        true => bin_of(version_for(tag), name),
        false => bin(name),
    }
}
