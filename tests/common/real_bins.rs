//! Where scripts/real-k8s put the real components (Kubernetes v1.37.2, etcd, containerd v2).

use std::path::PathBuf;

pub const K8S_VERSION: &str = "v1.37.2";

/// The cache's bin directory, as `scripts/real-k8s --print` gives it.
pub fn dir() -> PathBuf {
    let cache = match std::env::var_os("KUBESTRAP_CACHE") {
        Some(c) => PathBuf::from(c),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/kubestrap"),
    };
    cache.join("k8s").join(K8S_VERSION).join("bin")
}

/// One real binary; a missing one fails the test with what to run.
pub fn bin(name: &str) -> PathBuf {
    let p = dir().join(name);
    assert!(p.is_file(), "{} is missing: run scripts/real-k8s (scripts/test does) to build it", p.display());
    p
}
