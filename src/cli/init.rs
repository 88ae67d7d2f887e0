//! `kubestrap init` and `init phase NAME`.

use argh::FromArgs;
use std::path::PathBuf;

/// Initialize a control-plane node: the init phases, preflight to show-join-command (`kubestrap phases` lists them).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "init")]
pub struct Init {
    #[argh(option)]
    /// kubeadm config file (InitConfiguration, ClusterConfiguration, component configs)
    pub config: Option<PathBuf>,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// write all node state under this directory (default /)
    pub root: PathBuf,
    #[argh(switch)]
    /// change nothing, wait for nothing: print every file and API object init would write, as JSON
    pub dry_run: bool,
    #[argh(option)]
    /// phases to skip (comma-separated, repeatable)
    pub skip_phases: Vec<String>,
    #[argh(switch)]
    /// run only the phases that write files before the kubelet runs (preflight .. kubelet-start)
    pub on_disk_only: bool,
    #[argh(option)]
    /// preflight checks whose errors become warnings (comma-separated names, or "all"; repeatable)
    pub ignore_preflight_errors: Vec<String>,
    #[argh(option)]
    /// the IP address the API server advertises (default: the default-route interface's)
    pub apiserver_advertise_address: Option<String>,
    #[argh(option)]
    /// the port the API server binds to (default 6443)
    pub apiserver_bind_port: Option<i32>,
    #[argh(option)]
    /// extra SANs (IPs or DNS names) for the API server certificate (comma-separated, repeatable)
    pub apiserver_cert_extra_sans: Vec<String>,
    #[argh(option)]
    /// where to save and read the certificates (default /etc/kubernetes/pki)
    pub cert_dir: Option<String>,
    #[argh(option)]
    /// the 64-hex-character key that encrypts the uploaded certificates (default: generated and printed)
    pub certificate_key: Option<String>,
    #[argh(option)]
    /// a stable IP address or DNS name (and port) for the control plane
    pub control_plane_endpoint: Option<String>,
    #[argh(option)]
    /// the CRI socket (default containerd's)
    pub cri_socket: Option<String>,
    #[argh(option)]
    /// kubeadm feature gates: Name=true|false,...
    pub feature_gates: Option<String>,
    #[argh(option)]
    /// the registry to pull control-plane images from (default registry.k8s.io)
    pub image_repository: Option<String>,
    #[argh(option)]
    /// the Kubernetes version of the control plane
    pub kubernetes_version: Option<String>,
    #[argh(option)]
    /// the node name (default: the hostname)
    pub node_name: Option<String>,
    #[argh(option)]
    /// a directory of kubeadm patches named "target[suffix][+patchtype].extension" (e.g. "kube-apiserver0+merge.yaml")
    pub patches: Option<String>,
    #[argh(option)]
    /// the pod network CIDR(s); the controller-manager allocates node CIDRs from it
    pub pod_network_cidr: Option<String>,
    #[argh(option)]
    /// the service CIDR(s) (default 10.96.0.0/12)
    pub service_cidr: Option<String>,
    #[argh(option)]
    /// the services DNS domain (default cluster.local)
    pub service_dns_domain: Option<String>,
    #[argh(switch)]
    /// do not print the certificate key
    pub skip_certificate_key_print: bool,
    #[argh(switch)]
    /// print the join command with the token withheld
    pub skip_token_print: bool,
    #[argh(option)]
    /// the bootstrap token to create ([a-z0-9]{6}.[a-z0-9]{16}; default: generated)
    pub token: Option<String>,
    #[argh(option)]
    /// the bootstrap token's lifetime (Go duration, default 24h0m0s; 0 = never expires)
    pub token_ttl: Option<String>,
    #[argh(switch)]
    /// upload the shared CAs and keys, encrypted, to the kubeadm-certs Secret (for control-plane joins)
    pub upload_certs: bool,
    #[argh(subcommand)]
    pub phase: Option<InitSub>,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum InitSub {
    Phase(InitPhase),
}

/// Run one init phase.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "phase")]
pub struct InitPhase {
    #[argh(positional)]
    /// the phase name (see `kubestrap phases`)
    pub name: String,
    #[argh(positional)]
    /// a sub-phase, spelled as kubeadm does: `init phase addon kube-proxy`
    pub sub: Option<String>,
    #[argh(option)]
    /// kubeadm v1beta4 config file
    pub config: Option<PathBuf>,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// write all node state under this directory (default /)
    pub root: PathBuf,
    #[argh(switch)]
    /// change nothing, wait for nothing: print the plan as JSON
    pub dry_run: bool,
    #[argh(option)]
    /// preflight checks whose errors become warnings (comma-separated names, or "all"; repeatable)
    pub ignore_preflight_errors: Vec<String>,
    #[argh(switch)]
    /// upload the shared CAs and keys, encrypted, to the kubeadm-certs Secret (for control-plane joins)
    pub upload_certs: bool,
    #[argh(option)]
    /// the 64-hex-character key that encrypts the uploaded certificates (default: generated and printed)
    pub certificate_key: Option<String>,
    #[argh(switch)]
    /// do not print the certificate key
    pub skip_certificate_key_print: bool,
}
