//! Every timeout and retry figure, in one place, named after kubeadm's equivalent where there is
//! one (kubeadm's `constants.go`). Config (`timeouts:` in v1beta4) and flags override the defaults.

use std::time::Duration;

use crate::retry::Backoff;

/// kubeadm's DiscoveryTimeout: how long join keeps trying to find and trust the cluster.
pub(crate) const DISCOVERY: Duration = Duration::from_secs(5 * 60);
/// At boot, workers often start before the control plane: wait this long instead.
pub(crate) const BOOT_DISCOVERY: Duration = Duration::from_secs(15 * 60);
/// At first boot, a node told to init asks the controlPlaneEndpoint once whether a cluster
/// already answers there (never two clusters); no answer within this means none.
pub(crate) const EXISTING_CLUSTER_PROBE: Duration = Duration::from_secs(5);
/// kubeadm's TLSBootstrapTimeout: waiting for the node's client certificate.
pub(crate) const TLS_BOOTSTRAP: Duration = Duration::from_secs(5 * 60);
/// kubeadm's KubernetesAPICallTimeout: one logical API write, retries included.
pub(crate) const KUBERNETES_API_CALL: Duration = Duration::from_secs(60);
/// kubeadm's ControlPlaneComponentHealthCheckTimeout (also sets the startup probes).
pub(crate) const CONTROL_PLANE_COMPONENT_HEALTH_CHECK: Duration = Duration::from_secs(240);
/// kubeadm's KubeletHealthCheckTimeout: waiting for the kubelet's healthz.
pub(crate) const KUBELET_HEALTH_CHECK: Duration = Duration::from_secs(240);
/// Polling the kubelet and the control-plane components while waiting for them: every 50 ms
/// for the first 5 s, so a component that comes up at first boot is seen within a poll, then
/// doubling to kubeadm's 500 ms (these are local endpoints: a refused attempt costs nothing).
pub(crate) const CONTROL_PLANE_CHECK_RETRY: Backoff =
    Backoff { initial: Duration::from_millis(50), max: Duration::from_millis(500), hold: 100 };
/// One HTTP request (kubeadm's discovery client uses 10 s).
pub const REQUEST: Duration = Duration::from_secs(10);
/// One CSR watch window; the watch is re-opened (after a GET) until the TLS bootstrap deadline.
pub(crate) const CSR_WATCH_WINDOW: Duration = Duration::from_secs(60);
/// How long `boot` waits for a datasource to appear (the `--datasource-timeout` default).
pub(crate) const DATASOURCE: Duration = Duration::from_secs(5 * 60);
/// Each CRI call of reset (ListPodSandbox, StopPodSandbox, RemovePodSandbox): stopping a pod
/// waits for its containers' grace period, so longer than a probe.
pub(crate) const CRI_RESET_CALL: Duration = Duration::from_secs(60);
/// preflight's Hostname lookup (a warning): kubeadm waits for the resolver, which retries an
/// unreachable nameserver for 10 s; a first boot does not wait past this for a warning.
pub(crate) const HOSTNAME_LOOKUP: Duration = Duration::from_secs(2);
/// The CRI Version call: a runtime that accepts but never answers is reported, not waited on.
pub(crate) const CRI_PROBE: Duration = Duration::from_secs(2);
/// One image pull in preflight's ImagePull (kubeadm has no bound; a registry that stalls should
/// not hang a first boot for ever).
pub(crate) const IMAGE_PULL: Duration = Duration::from_secs(300);

/// API calls and waits for the control plane: start fast, back off to kubeadm's 5 s poll.
pub(crate) const API_BACKOFF: Backoff =
    Backoff { initial: Duration::from_millis(200), max: Duration::from_secs(5), hold: 0 };
/// Discovery: kubeadm's DiscoveryRetryInterval is 5 s; we start at 200 ms and back off to it, so
/// a node asks a control plane that is down at most 5 times in its first 1.5 s, then once per
/// 5 s (±25%). An exchange the network broke is repeated at once the first time (`Broken`).
pub(crate) const DISCOVERY_BACKOFF: Backoff =
    Backoff { initial: Duration::from_millis(200), max: Duration::from_secs(5), hold: 0 };
/// After a broken CSR watch, before the next GET.
pub(crate) const CSR_REWATCH_BACKOFF: Backoff =
    Backoff { initial: Duration::from_millis(500), max: Duration::from_millis(500), hold: 0 };
/// Datasource probing: media and metadata services appear within seconds of boot.
pub(crate) const DATASOURCE_BACKOFF: Backoff =
    Backoff { initial: Duration::from_millis(500), max: Duration::from_millis(500), hold: 0 };
/// One IMDS request: a metadata service answers in milliseconds or is not there.
pub(crate) const DATASOURCE_HTTP: Duration = Duration::from_secs(2);

/// kubeadm's EtcdAPICallTimeout (v1beta4 `timeouts.etcdAPICall`): one logical etcd call (member
/// list, learner add, promote), retries included.
pub(crate) const ETCD_API_CALL: Duration = Duration::from_secs(2 * 60);
/// kubeadm's EtcdAPICallRetryInterval: the pause between etcd attempts (with our ±25% jitter, so
/// concurrent joins do not collide in lockstep).
pub(crate) const ETCD_API_CALL_RETRY: Backoff =
    Backoff { initial: Duration::from_millis(500), max: Duration::from_millis(500), hold: 0 };
/// kubeadm's etcdTimeout: one etcd request (its gRPC context; here connect + answer).
pub(crate) const ETCD_REQUEST: Duration = Duration::from_secs(2);
/// kubeadm's WaitForClusterAvailable(8, 5s): up to 8 rounds of Status on every endpoint, 5 s
/// apart, so 35 s from the first round to the last ("This can take up to 40s").
pub(crate) const ETCD_WAIT_AVAILABLE: Duration = Duration::from_secs(7 * 5);
pub(crate) const ETCD_WAIT_AVAILABLE_RETRY: Backoff =
    Backoff { initial: Duration::from_secs(5), max: Duration::from_secs(5), hold: 0 };
/// kubeadm's KubernetesAPICallRetryInterval: polling the API for the etcd Pods' annotations.
pub(crate) const KUBERNETES_API_CALL_RETRY: Backoff =
    Backoff { initial: Duration::from_millis(500), max: Duration::from_millis(500), hold: 0 };
