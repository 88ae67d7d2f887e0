//! The host around kubestrap: datasource detection (seed dirs, credentials, a local IMDS, real
//! seed images and loop mounts) and preflight against this real machine.
//! One test binary, one module per former test file.

#[path = "../common/mod.rs"]
mod common;

mod datasource;
mod preflight_real;
mod units_verify;
mod vm_budget;
