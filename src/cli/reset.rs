//! `kubestrap reset` and `reset phase NAME`.

use argh::FromArgs;
use std::path::PathBuf;

/// Revert what init, join or boot did to this node, as `kubeadm reset` (phases: preflight, remove-etcd-member, cleanup-node); the next boot is a first boot.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "reset")]
pub struct Reset {
    #[argh(switch, short = 'f')]
    /// reset the node without asking for confirmation
    pub force: bool,
    #[argh(switch)]
    /// change nothing: say what would be done
    pub dry_run: bool,
    #[argh(option)]
    /// phases to skip (comma-separated, repeatable)
    pub skip_phases: Vec<String>,
    #[argh(option)]
    /// the CRI socket to remove the Kubernetes containers through (default containerd's)
    pub cri_socket: Option<String>,
    #[argh(option, default = "String::from(\"/etc/kubernetes/pki\")")]
    /// the certificates directory to empty (default /etc/kubernetes/pki)
    pub cert_dir: String,
    #[argh(switch)]
    /// also empty /etc/kubernetes/tmp
    pub cleanup_tmp_dir: bool,
    #[argh(option)]
    /// accepted as kubeadm's; kubestrap reads the node's own manifests, not the cluster's kubeadm-config
    pub kubeconfig: Option<String>,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// the node root to reset (default /); under another root the kubelet and containers are left alone
    pub root: PathBuf,
    #[argh(subcommand)]
    pub phase: Option<ResetSub>,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum ResetSub {
    Phase(ResetPhase),
}

/// Run one reset phase: preflight, remove-etcd-member or cleanup-node.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "phase")]
pub struct ResetPhase {
    #[argh(positional)]
    /// the phase name
    pub name: String,
    #[argh(switch, short = 'f')]
    /// reset the node without asking for confirmation
    pub force: bool,
    #[argh(switch)]
    /// change nothing: say what would be done
    pub dry_run: bool,
    #[argh(option)]
    /// the CRI socket to remove the Kubernetes containers through (default containerd's)
    pub cri_socket: Option<String>,
    #[argh(option, default = "String::from(\"/etc/kubernetes/pki\")")]
    /// the certificates directory to empty (default /etc/kubernetes/pki)
    pub cert_dir: String,
    #[argh(switch)]
    /// also empty /etc/kubernetes/tmp
    pub cleanup_tmp_dir: bool,
    #[argh(option)]
    /// accepted as kubeadm's; kubestrap reads the node's own manifests
    pub kubeconfig: Option<String>,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// the node root to reset (default /)
    pub root: PathBuf,
}
