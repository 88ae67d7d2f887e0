//! `kubestrap certs ca-hash|certificate-key`.

use argh::FromArgs;
use std::path::PathBuf;

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
