//! `kubestrap certs ca-hash|certificate-key|check-expiration|renew`.

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
    CheckExpiration(CheckExpiration),
    Renew(Renew),
}

/// Check certificates expiration for a Kubernetes cluster (kubeadm's table, or -o json|yaml).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "check-expiration")]
pub struct CheckExpiration {
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// node root (default /)
    pub root: PathBuf,
    #[argh(option)]
    /// the path where the certificates are (default: the configuration's certificatesDir, /etc/kubernetes/pki)
    pub cert_dir: Option<String>,
    #[argh(option)]
    /// path to a kubeadm configuration file (its ClusterConfiguration: certificatesDir, etcd)
    pub config: Option<PathBuf>,
    #[argh(option)]
    /// accepted for kubeadm compatibility; kubestrap never reads the configuration from the cluster
    pub kubeconfig: Option<PathBuf>,
    #[argh(option, short = 'o', default = "String::from(\"text\")")]
    /// output format: text, json or yaml (default text)
    pub output: String,
}

/// Renew a certificate (by kubeadm's name, e.g. apiserver, admin.conf) or all of them, unconditionally.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "renew")]
pub struct Renew {
    #[argh(positional)]
    /// the certificate to renew, or "all"
    pub name: String,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// node root (default /)
    pub root: PathBuf,
    #[argh(option)]
    /// the path where the certificates are (default: the configuration's certificatesDir, /etc/kubernetes/pki)
    pub cert_dir: Option<String>,
    #[argh(option)]
    /// path to a kubeadm configuration file (certificatesDir, encryptionAlgorithm, certificateValidityPeriod)
    pub config: Option<PathBuf>,
    #[argh(option)]
    /// accepted for kubeadm compatibility; kubestrap never reads the configuration from the cluster
    pub kubeconfig: Option<PathBuf>,
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
