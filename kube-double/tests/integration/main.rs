//! The API test double's own behaviour: authentication and RBAC, REST semantics, the bootstrap
//! signer, CSRs, and the standalone binary. One test binary, one module per former test file.

#[path = "../common/mod.rs"]
mod common;

mod auth_rbac;
mod binary;
mod bootstrap_signer;
mod csr;
mod gc;
mod rest;
