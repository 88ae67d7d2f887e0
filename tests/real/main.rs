//! kubestrap against the real Kubernetes v1.37.2 (API server, controller-manager, scheduler,
//! etcd, kubelet on containerd v2, kubectl), built from their Go modules by scripts/real-k8s and
//! run on loopback (and v1.36.3's, for nodes of the previous minor: upgrade.rs). Every success
//! path here ends in state the real components accept.

#[path = "../common/mod.rs"]
mod common;

use common::needs::{Need, skip_binary_unless};
use common::real_bins as bins;

mod availability;
// Every test here runs a real cluster: it needs every real component (scripts/real-k8s) and
// root (network namespaces, mounts). Without them one line says so and the binary exits before
// the harness starts, so no test has to check; under KUBESTRAP_REQUIRE_ALL=1 (scripts/test)
// they run and fail at the missing piece.
// An ELF constructor is the one hook before libtest's `main`; the function only reads the
// environment and the disk and never panics (see skip_binary_unless).
#[allow(unsafe_code)]
#[used]
#[unsafe(link_section = ".init_array")]
static SKIP_WITHOUT_REAL_COMPONENTS: extern "C" fn() = {
    extern "C" fn check() {
        skip_binary_unless("tests/real", [bins::need_all(), Need::root()]);
    }
    check
};

mod boot;
mod boot_ha;
mod capi;
mod capi_patches;
mod cluster;
mod dry_run;
mod e2e;
mod faulty_net;
mod front;
mod ha;
mod ha_checks;
mod host;
mod ignition;
mod join_parity;
mod join_refusals;
mod join_waits;
mod kills;
mod lease;
mod local_api;
mod net;
mod node;
mod patches;
mod peers;
mod proc;
mod providers;
mod renewal;
mod rotation;
mod standins;
mod static_pods;
mod storm;
mod tokenless;
mod upgrade;
mod upgrade_apply;
mod upgrade_by_image;
mod upgrade_by_image_ha;
mod upgrade_diff;
mod upgrade_node;
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
