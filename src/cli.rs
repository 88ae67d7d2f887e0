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

// Parsed once per process and moved: the size difference between variants does not matter.
#[allow(clippy::large_enum_variant)]
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
    Config(Config),
}

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
    /// kubeadm patch directory: not supported (refused with advice)
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
    CertificateKey(CertificateKeyCmd),
}

/// Print a new random certificate key for --upload-certs / --certificate-key.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "certificate-key")]
pub struct CertificateKeyCmd {}

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
pub(crate) fn split_list(s: Option<&str>) -> Vec<String> {
    s.map(|s| s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(str::to_string).collect()).unwrap_or_default()
}

/// Splits every value of a repeatable, comma-separated flag (pflag's StringSlice).
pub(crate) fn split_all(values: &[String]) -> Vec<String> {
    values.iter().flat_map(|v| split_list(Some(v))).collect()
}

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
    /// kubeadm patch directory: not supported (refused with advice)
    pub patches: Option<String>,
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

/// kubeadm's `config` commands: print the default documents, migrate a v1beta3 config to v1beta4.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "config")]
pub struct Config {
    #[argh(subcommand)]
    pub command: ConfigCommand,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum ConfigCommand {
    Print(ConfigPrint),
    Migrate(ConfigMigrate),
}

/// Print default configuration documents.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "print")]
pub struct ConfigPrint {
    #[argh(subcommand)]
    pub what: ConfigPrintWhat,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum ConfigPrintWhat {
    InitDefaults(PrintInitDefaults),
    JoinDefaults(PrintJoinDefaults),
}

/// Print the default init configuration (Init and ClusterConfiguration), usable for `init --config`.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "init-defaults")]
pub struct PrintInitDefaults {
    #[argh(option)]
    /// also print these component configs (comma-separated): KubeletConfiguration, KubeProxyConfiguration
    pub component_configs: Option<String>,
}

/// Print the default join configuration, usable for `join --config`.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "join-defaults")]
pub struct PrintJoinDefaults {
    #[argh(option)]
    /// also print these component configs (comma-separated): KubeletConfiguration, KubeProxyConfiguration
    pub component_configs: Option<String>,
}

/// Read a kubeadm config (v1beta3 or v1beta4) and write its v1beta4 equivalent.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "migrate")]
pub struct ConfigMigrate {
    #[argh(option)]
    /// the config file to convert (mandatory)
    pub old_config: Option<PathBuf>,
    #[argh(option)]
    /// write the result here (atomically) instead of to stdout
    pub new_config: Option<PathBuf>,
}

/// A command line kubestrap cannot run: the parser's words, any token secret redacted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// What a command line asked for.
#[derive(Debug)]
pub enum Parsed {
    Run(Box<Cli>),
    /// `--help` or `help`: print this on stdout and exit 0.
    Help(String),
}

/// Parses a command line as kubeadm's flag library would: `--flag=value` and `--flag value` for
/// every flag, `--switch=true|false`, the last of a repeated single-valued flag winning, klog's
/// `--v=N` anywhere. `argv[0]` is the program name, as in `std::env::args()`. Errors are usage
/// errors (exit 2) with any token secret redacted; help comes back as [`Parsed::Help`].
pub fn parse(argv: &[String]) -> Result<Parsed, UsageError> {
    let program =
        argv.first().and_then(|p| std::path::Path::new(p).file_name()).and_then(|n| n.to_str()).unwrap_or("kubestrap");
    let args = argv.get(1..).unwrap_or_default();
    let words = crate::argv::rewrite(args).map_err(|m| UsageError(crate::argv::redact(&m, args)))?;
    let strs: Vec<&str> = words.iter().map(String::as_str).collect();
    match Cli::from_args(&[program], &strs) {
        Ok(cli) => Ok(Parsed::Run(Box::new(cli))),
        Err(exit) if exit.status.is_ok() => Ok(Parsed::Help(exit.output)),
        Err(exit) => Err(UsageError(crate::argv::redact(exit.output.trim(), args))),
    }
}

/// [`parse`] for callers that run what they parse (the CLI, and `kubeadm init|join ...` lines
/// found in user-data): a request for help is a usage error there.
pub(crate) fn parse_args(argv: &[String]) -> Result<Cli, UsageError> {
    match parse(argv)? {
        Parsed::Run(cli) => Ok(*cli),
        Parsed::Help(_) => Err(UsageError("--help asks for help, not for a command to run".into())),
    }
}

#[cfg(test)]
mod tests;
