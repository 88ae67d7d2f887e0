//! kubestrap: a first-boot Kubernetes node bootstrapper that leaves a node exactly as
//! `kubeadm init`/`join` would. `main.rs` only dispatches; everything lives here so tests can
//! drive it.
//!
//! The modules come in layers, top to bottom; a module imports only from its own layer or the
//! ones below (tests/cli_config/layers.rs checks the table there against these groups).

// entry: the commands and the first-boot driver.
pub mod boot;
pub mod commands;

// workflow: the phase tables and the steps of init, join, reset and upgrade.
pub mod init;
pub mod join;
pub mod phases;
pub mod reset;
pub mod upgrade;

// run: one run's node, its status file, its error and exit code.
pub mod error;
pub mod node;
pub mod status;

// input: user-data translated into kubeadm's documents.
pub mod userdata;

// actions: what a phase does to the node (checks, images, manifests, objects, PKI, etcd, patches).
pub mod etcd;
pub mod images;
pub mod manifests;
pub mod objects;
pub mod patches;
pub mod pki;
pub mod preflight;

// kubeadm's API: its documents, defaults and validation.
pub mod config;

// protocols: where input comes from and how kubestrap talks to the outside.
pub mod argv;
pub mod cli;
pub mod cri;
pub mod csr;
pub mod datasource;
pub mod discovery;
pub mod fsutil;
pub mod host;
pub mod kube;
pub mod kubeconfig;
pub mod retry;
pub mod timeouts;

// leaves: names, paths, the clock, tokens, logging, systemd.
pub mod clock;
pub mod constants;
pub mod logging;
pub mod paths;
pub mod systemd;
pub mod tabwrite;
pub mod token;
