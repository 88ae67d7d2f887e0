//! The PKI and kubeconfigs on disk: the certificate table against the real `openssl`, state
//! that already exists (reuse, regeneration, refusal), and kubeconfigs read back by `kubectl`.
//! One test binary, one module per former test file.

#[path = "../common/mod.rs"]
mod common;

mod certs_cli;
mod kubeconfig_kubectl;
mod pki_openssl;
mod pki_state;
