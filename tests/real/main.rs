//! kubestrap against the real Kubernetes v1.37.2 (API server, controller-manager, scheduler,
//! etcd, kubelet on containerd v2, kubectl), built from their Go modules by scripts/real-k8s and
//! run on loopback. Every success path here ends in state the real components accept.

#[path = "../common/mod.rs"]
mod common;

use common::real_bins as bins;

mod boot;
mod boot_ha;
mod capi;
mod cluster;
mod e2e;
mod ha;
mod host;
mod kills;
mod local_api;
mod net;
mod node;
mod proc;
mod rotation;
mod static_pods;
mod storm;
mod workers;
