//! Whole nodes against the API test double: `init` then `join`, `boot` from user-data, SIGKILL
//! at random points, and the discovery/CSR code against independent Python implementations.
//! One test binary, one module per former test file.

#[path = "../common/mod.rs"]
mod common;

mod boot;
mod cluster_e2e;
mod crash_safety;
mod join_phases;
mod jws_interop;
mod upload_certs;
mod userdata_kubeadm;
mod userdata_patches;
