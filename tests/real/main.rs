//! kubestrap against the real Kubernetes v1.37.2 (API server, controller-manager, scheduler,
//! etcd, kubelet on containerd v2, kubectl), built from their Go modules by scripts/real-k8s and
//! run on loopback (and v1.36.3's, for nodes of the previous minor: upgrade.rs). Every success
//! path here ends in state the real components accept.

#[path = "../common/mod.rs"]
mod common;

use common::real_bins as bins;

mod availability;
mod boot;
mod boot_ha;
mod capi;
mod capi_patches;
mod cluster;
mod dry_run;
mod e2e;
mod front;
mod ha;
mod ha_checks;
mod host;
mod ignition;
mod join_parity;
mod join_refusals;
mod join_waits;
mod kills;
mod local_api;
mod net;
mod node;
mod patches;
mod peers;
mod proc;
mod providers;
mod renewal;
mod rotation;
mod static_pods;
mod storm;
mod tokenless;
mod upgrade;
mod workers;

// The parity facts and allow-list, shared with tests/parity (join parity runs here, on a real
// cluster).
#[path = "../parity/allow.rs"]
mod allow;
#[path = "../parity/diff.rs"]
mod diff;
#[path = "../parity/facts.rs"]
mod facts;
#[path = "../parity/pem.rs"]
mod pem;
