//! `kubestrap token generate|create|list|delete`.

use argh::FromArgs;
use std::path::PathBuf;

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
