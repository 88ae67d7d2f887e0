//! kubestrap: a first-boot Kubernetes node bootstrapper that leaves a node exactly as
//! `kubeadm init`/`join` would. `main.rs` only dispatches; everything lives here so tests can
//! drive it.

pub mod argv;
pub mod boot;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod config;
pub mod constants;
pub mod cri;
pub mod csr;
pub mod datasource;
pub mod discovery;
pub mod error;
pub mod etcd;
pub mod fsutil;
pub mod host;
pub mod images;
pub mod init;
pub mod join;
pub mod kube;
pub mod kubeconfig;
pub mod logging;
pub mod manifests;
pub mod node;
pub mod objects;
pub mod paths;
pub mod phases;
pub mod pki;
pub mod preflight;
pub mod reset;
pub mod retry;
pub mod status;
pub mod systemd;
pub mod timeouts;
pub mod token;
