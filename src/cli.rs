//! Command-line shapes (argh). kubeadm-like so runbooks translate.

use argh::FromArgs;
use std::path::PathBuf;

/// kubestrap: first-boot Kubernetes node bootstrapper, kubeadm-compatible.
#[derive(FromArgs, Debug)]
pub struct Cli {
    /// log more (debug level)
    #[argh(switch, short = 'v')]
    pub verbose: bool,
    #[argh(subcommand)]
    pub command: Command,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum Command {
    Init(Init),
    Preflight(Preflight),
    Phases(Phases),
    Certs(Certs),
    Version(Version),
}

/// Run the control-plane init phases (certs, kubeconfig, etcd, control-plane).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "init")]
pub struct Init {
    #[argh(option)]
    /// kubeadm v1beta4 config file (InitConfiguration, ClusterConfiguration, component configs)
    pub config: Option<PathBuf>,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// write all node state under this directory (default /)
    pub root: PathBuf,
    #[argh(switch)]
    /// write nothing; print every file that would be written (path, mode, sha256) as JSON
    pub dry_run: bool,
    #[argh(option)]
    /// comma-separated phases to skip
    pub skip_phases: Option<String>,
    #[argh(option)]
    /// preflight checks whose errors become warnings (comma-separated names, or "all")
    pub ignore_preflight_errors: Option<String>,
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
    #[argh(option)]
    /// kubeadm v1beta4 config file
    pub config: Option<PathBuf>,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// write all node state under this directory (default /)
    pub root: PathBuf,
    #[argh(switch)]
    /// write nothing; print the plan as JSON
    pub dry_run: bool,
    #[argh(option)]
    /// preflight checks whose errors become warnings (comma-separated names, or "all")
    pub ignore_preflight_errors: Option<String>,
}

/// Check that this machine can become a node (kubeadm's preflight checks).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "preflight")]
pub struct Preflight {
    #[argh(option)]
    /// control-plane or worker
    pub role: String,
    #[argh(option)]
    /// kubeadm v1beta4 config file (control-plane: Init/ClusterConfiguration)
    pub config: Option<PathBuf>,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// node root for node-state paths (default /)
    pub root: PathBuf,
    #[argh(option)]
    /// checks whose errors become warnings (comma-separated names, or "all")
    pub ignore_preflight_errors: Option<String>,
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

/// List the init phases.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "phases")]
pub struct Phases {}

/// Certificate helpers.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "certs")]
pub struct Certs {
    #[argh(subcommand)]
    pub command: CertsCommand,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum CertsCommand {
    CaHash(CaHash),
}

/// Print sha256:<hex> of a CA certificate's public key (the --discovery-token-ca-cert-hash value).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "ca-hash")]
pub struct CaHash {
    #[argh(positional)]
    /// CA certificate (default: <root>/etc/kubernetes/pki/ca.crt)
    pub file: Option<PathBuf>,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// node root used for the default file
    pub root: PathBuf,
}

/// Print the version.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "version")]
pub struct Version {}

/// Splits a comma-separated flag value, dropping empty items.
pub fn split_list(s: Option<&str>) -> Vec<String> {
    s.map(|s| s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(str::to_string).collect()).unwrap_or_default()
}
