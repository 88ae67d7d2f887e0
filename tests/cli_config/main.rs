//! The configuration front end through the CLI: bad and malformed configs (exit 2, a message
//! naming the problem, nothing written) and the golden manifests and kubeconfigs.
//! One test binary, one module per former test file.

#[path = "../common/mod.rs"]
mod common;

mod config_137;
mod config_errors;
mod config_kubeadm_defaults;
mod config_print;
mod config_v1beta3;
mod dry_run;
mod flags;
mod golden;
mod join_dry_run_golden;
mod kubeadm_cmdlines;
mod kubeadm_corpus;
mod layers;
mod malformed;
mod nulls_and_reads;
mod refusals;
mod reset;
mod upgrade_node;
