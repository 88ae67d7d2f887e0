//! User-data fixtures and helpers shared by the unit tests of every concern.

use std::io::Write;

use super::{NodePlan, Planned};
use crate::config::types::JoinConfiguration;
use crate::config::{Documents, HostFacts};
use crate::datasource::Gathered;

pub const TOKEN: &str = "abcdef.0123456789abcdef";
pub(crate) const TOKEN2: &str = "zyxwvu.fedcba9876543210";
pub(crate) const HASH: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000001";
pub(crate) const HASH2: &str = "sha256:00000000000000000000000000000000000000000000000000000000000000ff";

pub(crate) fn gathered(user_data: &str) -> Gathered {
    Gathered { source: "nocloud".into(), user_data: Some(user_data.as_bytes().to_vec()), ..Default::default() }
}

pub fn host() -> HostFacts {
    HostFacts { hostname: "fallback".into(), default_address: Some("10.0.0.5".parse().unwrap()) }
}

pub(crate) fn gz(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

pub(crate) fn init_docs(p: Planned) -> Documents {
    match p.plan {
        NodePlan::Init { docs, .. } => docs,
        other => panic!("expected init, got {other:?}"),
    }
}

pub(crate) fn join_of(p: Planned) -> JoinConfiguration {
    match p.plan {
        NodePlan::Join { join } => join,
        other => panic!("expected join, got {other:?}"),
    }
}

pub(crate) fn cp_cloud_config() -> String {
    format!(
        "#cloud-config\nkubestrap:\n  role: control-plane\n  token: {TOKEN}\n  kubernetesVersion: v1.36.2\n  \
         podSubnet: 10.244.0.0/16\n  serviceSubnet: 10.96.0.0/12\n  certSANs: [api.example.com]\n  \
         advertiseAddress: 10.0.0.10\n  controlPlaneEndpoint: api.example.com:6443\n"
    )
}

pub(crate) fn worker_cloud_config() -> String {
    format!(
        "#cloud-config\nkubestrap:\n  role: worker\n  token: {TOKEN}\n  controlPlaneEndpoint: 10.0.0.10:6443\n  \
         caCertHashes: [{HASH}]\n"
    )
}

pub(crate) const KUBEADM_INIT: &str = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nlocalAPIEndpoint:\n  advertiseAddress: 10.0.0.10\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nnetworking:\n  podSubnet: 10.244.0.0/16\n---\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 50\n";

pub fn kubeadm_join() -> String {
    format!(
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    token: {TOKEN}\n    \
         apiServerEndpoint: 10.0.0.10:6443\n    caCertHashes: [{HASH}]\n"
    )
}
