//! Command-line shapes (argh). kubeadm-like so runbooks translate.
//!
//! This file holds the top level and the parser; each command's flags live in the file named
//! for it (`misc` holds the small ones).

mod boot;
mod certs;
mod config;
mod init;
mod join;
mod misc;
mod reset;
mod token;
mod upgrade;

use argh::FromArgs;

pub use self::boot::{Boot, Status};
pub use self::certs::{CaHash, CertificateKeyCmd, Certs, CertsCommand, CheckExpiration, Renew};
pub use self::config::{
    Config, ConfigCommand, ConfigImages, ConfigImagesCommand, ConfigImagesList, ConfigMigrate, ConfigPrint,
    ConfigPrintWhat, PrintInitDefaults, PrintJoinDefaults,
};
pub use self::init::{Init, InitPhase, InitSub};
pub use self::join::Join;
pub use self::misc::{Phases, Preflight, Version};
pub use self::reset::{Reset, ResetPhase, ResetSub};
pub use self::token::{Token, TokenCommand, TokenCreate, TokenDelete, TokenGenerate, TokenList};
pub use self::upgrade::{Upgrade, UpgradeApply, UpgradeCommand, UpgradeDiff, UpgradeNode, UpgradePlan};

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
    Reset(Reset),
    Token(Token),
    Preflight(Preflight),
    Phases(Phases),
    Certs(Certs),
    Version(Version),
    Config(Config),
    Upgrade(Upgrade),
}

/// Splits a comma-separated flag value, dropping empty items.
pub(crate) fn split_list(s: Option<&str>) -> Vec<String> {
    s.map(|s| s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(str::to_string).collect()).unwrap_or_default()
}

/// Splits every value of a repeatable, comma-separated flag (pflag's StringSlice).
pub(crate) fn split_all(values: &[String]) -> Vec<String> {
    values.iter().flat_map(|v| split_list(Some(v))).collect()
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
