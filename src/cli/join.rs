//! `kubestrap join`.

use argh::FromArgs;
use std::path::PathBuf;

/// Join this machine to a cluster as a worker node: preflight, discovery, kubelet-start (TLS bootstrap).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "join")]
pub struct Join {
    #[argh(positional)]
    /// optional `phase NAME` (run only that phase, see `kubestrap phases`), then the API server endpoint HOST:PORT
    pub words: Vec<String>,
    #[argh(option)]
    /// join phases to skip (comma-separated, repeatable)
    pub skip_phases: Vec<String>,
    #[argh(option)]
    /// bootstrap token for both discovery and TLS bootstrap
    pub token: Option<String>,
    #[argh(option)]
    /// bootstrap token for discovery only
    pub discovery_token: Option<String>,
    #[argh(option)]
    /// bootstrap token for the TLS bootstrap only
    pub tls_bootstrap_token: Option<String>,
    #[argh(option)]
    /// sha256:<hex> pin of the cluster CA's public key (comma-separated, repeatable; any may match)
    pub discovery_token_ca_cert_hash: Vec<String>,
    #[argh(switch)]
    /// trust the cluster CA without a pin (unsafe)
    pub discovery_token_unsafe_skip_ca_verification: bool,
    #[argh(option)]
    /// kubeconfig to discover the cluster from: a path or an https:// URL
    pub discovery_file: Option<String>,
    #[argh(option)]
    /// keep retrying discovery this long (Go duration; default 5m, or timeouts.discovery)
    pub discovery_timeout: Option<String>,
    #[argh(option)]
    /// kubeadm JoinConfiguration file
    pub config: Option<PathBuf>,
    #[argh(option)]
    /// node name (default: the hostname)
    pub node_name: Option<String>,
    #[argh(option)]
    /// CRI socket (default containerd's)
    pub cri_socket: Option<String>,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// write all node state under this directory (default /)
    pub root: PathBuf,
    #[argh(option)]
    /// preflight checks whose errors become warnings (comma-separated names, or "all"; repeatable)
    pub ignore_preflight_errors: Vec<String>,
    #[argh(switch)]
    /// change nothing, wait for nothing, contact nobody: print what join would write and send, as JSON
    pub dry_run: bool,
    #[argh(option)]
    /// control-plane join only: the API server's advertise address (kept; needs --control-plane)
    pub apiserver_advertise_address: Option<String>,
    #[argh(option)]
    /// control-plane join only: the API server's port (kept; needs --control-plane)
    pub apiserver_bind_port: Option<i32>,
    #[argh(switch)]
    /// join as a control-plane node (a new API server; the shared CAs from kubeadm-certs or disk)
    pub control_plane: bool,
    #[argh(option)]
    /// with --control-plane: the key that decrypts the kubeadm-certs Secret (from `init --upload-certs`)
    pub certificate_key: Option<String>,
    #[argh(option)]
    /// a directory of kubeadm patches named "target[suffix][+patchtype].extension" (e.g. "kube-apiserver0+merge.yaml")
    pub patches: Option<String>,
}
