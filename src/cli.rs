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
    Boot(Boot),
    Status(Status),
    Init(Init),
    Join(Join),
    Token(Token),
    Preflight(Preflight),
    Phases(Phases),
    Certs(Certs),
    Version(Version),
}

/// Initialize a control-plane node: the twelve init phases, preflight to show-join-command (`kubestrap phases` lists them).
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
    #[argh(switch)]
    /// run only the phases that write files before the kubelet runs (preflight .. kubelet-start)
    pub on_disk_only: bool,
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

/// List the init and join phases.
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

/// Parses a command line (`argv[0]` is the program name) into [`Cli`]: kubeadm's `--flag=value`
/// spelling becomes `--flag value`, and argh's errors become usage errors (exit 2) in which any
/// bootstrap token is hidden. Also how user-data's `kubeadm init|join ...` lines are read.
pub fn parse_args(argv: &[String]) -> Result<Cli, crate::error::Error> {
    let Some((program, rest)) = argv.split_first() else {
        return Err(crate::error::Error::usage("empty command line"));
    };
    let mut args: Vec<&str> = Vec::with_capacity(rest.len() + 4);
    let mut positional_only = false;
    for a in rest {
        match a.split_once('=') {
            Some((flag, value)) if !positional_only && flag.starts_with("--") && flag.len() > 2 => {
                args.push(flag);
                args.push(value);
            }
            _ => {
                positional_only |= a == "--";
                args.push(a);
            }
        }
    }
    <Cli as FromArgs>::from_args(&[program.as_str()], &args)
        .map_err(|e| crate::error::Error::usage(crate::token::replace_tokens(e.output.trim_end(), "<token hidden>")))
}

/// Join this machine to a cluster as a worker node: preflight, discovery, kubelet-start (TLS bootstrap).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "join")]
pub struct Join {
    #[argh(positional)]
    /// optional `phase NAME` (run only that phase, see `kubestrap phases`), then the API server endpoint HOST:PORT
    pub words: Vec<String>,
    #[argh(option)]
    /// comma-separated join phases to skip
    pub skip_phases: Option<String>,
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
    /// sha256:<hex> pin of the cluster CA's public key (repeatable; any may match)
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
    /// kubeadm v1beta4 JoinConfiguration file
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
    /// preflight checks whose errors become warnings (comma-separated names, or "all")
    pub ignore_preflight_errors: Option<String>,
}

/// Manage bootstrap tokens.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "token")]
pub struct Token {
    #[argh(subcommand)]
    pub command: TokenCommand,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum TokenCommand {
    Generate(TokenGenerate),
    Create(TokenCreate),
    List(TokenList),
    Delete(TokenDelete),
}

/// Print a new random token (nothing is sent to the cluster).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "generate")]
pub struct TokenGenerate {}

/// Create a bootstrap token on the cluster and print it.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "create")]
pub struct TokenCreate {
    #[argh(positional)]
    /// the token to create (default: a new random one)
    pub token: Option<String>,
    #[argh(option, default = "String::from(\"24h\")")]
    /// lifetime (Go duration; 0 = never expires)
    pub ttl: String,
    #[argh(option)]
    /// a human-readable description
    pub description: Option<String>,
    #[argh(option)]
    /// comma-separated usages (default signing,authentication)
    pub usages: Option<String>,
    #[argh(option)]
    /// comma-separated extra groups (default system:bootstrappers:kubeadm:default-node-token)
    pub groups: Option<String>,
    #[argh(switch)]
    /// print the full join command instead of just the token
    pub print_join_command: bool,
    #[argh(option)]
    /// admin kubeconfig (default <root>/etc/kubernetes/admin.conf)
    pub kubeconfig: Option<PathBuf>,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// node root for the default kubeconfig
    pub root: PathBuf,
}

/// List bootstrap tokens (id, TTL, expiry, usages, groups; never the secret).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "list")]
pub struct TokenList {
    #[argh(option)]
    /// admin kubeconfig (default <root>/etc/kubernetes/admin.conf)
    pub kubeconfig: Option<PathBuf>,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// node root for the default kubeconfig
    pub root: PathBuf,
}

/// Delete bootstrap tokens by id or full token.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "delete")]
pub struct TokenDelete {
    #[argh(positional)]
    /// token ids or tokens
    pub tokens: Vec<String>,
    #[argh(option)]
    /// admin kubeconfig (default <root>/etc/kubernetes/admin.conf)
    pub kubeconfig: Option<PathBuf>,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// node root for the default kubeconfig
    pub root: PathBuf,
}

/// The systemd entry point: read user-data, then init or join (one stage per unit).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "boot")]
pub struct Boot {
    #[argh(option, default = "String::from(\"pre-kubelet\")")]
    /// pre-kubelet (kubestrap.service) or post-kubelet (kubestrap-post.service)
    pub stage: String,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// node root (default /)
    pub root: PathBuf,
    #[argh(option)]
    /// how long to wait for a datasource to appear (Go duration; default 5m)
    pub datasource_timeout: Option<String>,
}

/// Print the last boot run in words; exit non-zero if it failed.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "status")]
pub struct Status {
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// node root (default /)
    pub root: PathBuf,
}
