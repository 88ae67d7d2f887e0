//! Names, ports, defaults and limits shared with kubeadm. Each value is what kubeadm uses unless
//! the doc line says otherwise.

/// Kubernetes version targeted when the config names none.
pub(crate) const DEFAULT_KUBERNETES_VERSION: &str = "v1.37.0";
/// Oldest and newest Kubernetes minor versions kubestrap generates for.
pub(crate) const MIN_MINOR: u32 = 36;
pub(crate) const MAX_MINOR: u32 = 37;
/// kubeadm 1.37's MinimumKubeletVersion (three minors below its own): older kubelets are refused
/// whatever the cluster's version.
pub(crate) const MIN_KUBELET_MINOR: u32 = MAX_MINOR - 3;

/// kubeadm config API group/version we read.
pub(crate) const KUBEADM_API_VERSION: &str = "kubeadm.k8s.io/v1beta4";
pub(crate) const KUBELET_API_VERSION: &str = "kubelet.config.k8s.io/v1beta1";
pub(crate) const KUBEPROXY_API_VERSION: &str = "kubeproxy.config.k8s.io/v1alpha1";

/// Node directories live in `paths` (with their modes); re-exported for the manifest builders.
pub use crate::paths::{DEFAULT_CERTS_DIR, ETCD_DATA_DIR, KUBELET_DIR, KUBERNETES_DIR, MANIFESTS_DIR};

/// Kubeconfig file names in /etc/kubernetes.
pub(crate) const ADMIN_CONF: &str = "admin.conf";
pub const SUPER_ADMIN_CONF: &str = "super-admin.conf";
pub(crate) const KUBELET_CONF: &str = "kubelet.conf";
pub(crate) const CONTROLLER_MANAGER_CONF: &str = "controller-manager.conf";
pub(crate) const SCHEDULER_CONF: &str = "scheduler.conf";

/// Ports.
pub(crate) const DEFAULT_API_PORT: u16 = 6443;
pub(crate) const KUBELET_PORT: u16 = 10250;
pub(crate) const KCM_PORT: u16 = 10257;
pub(crate) const SCHEDULER_PORT: u16 = 10259;
pub(crate) const ETCD_CLIENT_PORT: u16 = 2379;
pub(crate) const ETCD_PEER_PORT: u16 = 2380;
pub(crate) const ETCD_METRICS_PORT: u16 = 2381;

/// Networking defaults.
pub(crate) const DEFAULT_SERVICE_SUBNET: &str = "10.96.0.0/12";
pub(crate) const DEFAULT_DNS_DOMAIN: &str = "cluster.local";
pub(crate) const DEFAULT_CLUSTER_NAME: &str = "kubernetes";
pub(crate) const DEFAULT_IMAGE_REPOSITORY: &str = "registry.k8s.io";
/// containerd's socket: the runtime our images ship (kubeadm would probe for one).
pub(crate) const DEFAULT_CRI_SOCKET: &str = "unix:///var/run/containerd/containerd.sock";
/// A service subnet must hold at least this many addresses, and use at most this many bits.
pub(crate) const MIN_SERVICE_ADDRESSES: u128 = 10;
pub(crate) const MAX_SERVICE_SUBNET_BITS: u32 = 20;

/// Certificate backdating (kubeadm's CertificateBackdate).
pub(crate) const CERT_BACKDATE_SECS: i64 = 5 * 60;

/// Groups and users that certificates name.
pub(crate) const CLUSTER_ADMINS_GROUP: &str = "kubeadm:cluster-admins";
pub(crate) const MASTERS_GROUP: &str = "system:masters";
pub(crate) const NODES_GROUP: &str = "system:nodes";
pub(crate) const NODE_USER_PREFIX: &str = "system:node:";

/// Labels and taint for control-plane nodes.
pub(crate) const CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/control-plane";
pub(crate) const EXCLUDE_LB_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// The group every default bootstrap token authenticates into (kubeadm's
/// NodeBootstrapTokenAuthGroup); objects' RBAC is bound to it. Here, not in `objects`, so the
/// config layer's defaults need no `objects`.
pub const BOOTSTRAP_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";
