//! What we generate, checked by independent validators: the static Pod manifests and every API
//! object against `kubernetes-validate --strict`, and a real etcd with our flags and certs (one
//! member, and three joined by our learner add and promote).
//! One test binary, one module per former test file.

#[path = "../common/mod.rs"]
mod common;

mod etcd_join;
mod etcd_real;
mod etcd_reset;
mod manifests_validate;
mod objects_validate;
