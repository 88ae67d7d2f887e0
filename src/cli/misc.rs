//! The small commands: `preflight`, `phases`, `version`.

use argh::FromArgs;
use std::path::PathBuf;

/// Check that this machine can become a node (kubeadm's preflight checks).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "preflight")]
pub struct Preflight {
    #[argh(option)]
    /// control-plane, worker, or control-plane-join (kubeadm join --control-plane)
    pub role: String,
    #[argh(option)]
    /// kubeadm v1beta4 config file (control-plane: Init/ClusterConfiguration)
    pub config: Option<PathBuf>,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// node root for node-state paths (default /)
    pub root: PathBuf,
    #[argh(option)]
    /// checks whose errors become warnings (comma-separated names, or "all"; repeatable)
    pub ignore_preflight_errors: Vec<String>,
    #[argh(option, default = "String::from(\"text\")")]
    /// text (kubeadm's lines) or json (the full table)
    pub output: String,
    #[argh(option)]
    /// worker: the CRI socket (default containerd's)
    pub cri_socket: Option<String>,
    #[argh(option)]
    /// worker: the node name (default the hostname)
    pub node_name: Option<String>,
    #[argh(option)]
    /// worker: the API server endpoint it will join (HOST:PORT)
    pub discovery_endpoint: Option<String>,
}

/// List the init and join phases.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "phases")]
pub struct Phases {}

/// Print the version.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "version")]
pub struct Version {}
