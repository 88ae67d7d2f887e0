//! One error type for what commands return. The kind decides the exit code; the message is a
//! chain of "verb + object" contexts ending in the cause, printed on one line.
//!
//! Each layer has its own typed error that carries the context where the failure happened (the
//! file, field, URL, socket or object): [`PkiError`], [`KubeconfigError`], [`ApiError`],
//! [`CsrError`], [`SourceError`], [`FsError`], and so on. They become an [`Error`] through the
//! `From` impls below, which are the one place that decides which [`Kind`] (and so which exit
//! code) each failure gets; `?` does the conversion. A driver's own errors go through the
//! constructors named for their situation ([`Error::bad_flag`], [`Error::bad_file`], ...), which
//! decide the kind here too: no call site picks a [`Kind`]. Errors flow one way: lower layers never
//! name this module, only the drivers that run them (commands, phases, join, boot, status).

use std::fmt;

use crate::cli::UsageError;
use crate::config::flags::FlagsError;
use crate::config::values::ValueError;
use crate::config::{ConfigError, LoadError};
use crate::cri::CriError;
use crate::csr::CsrError;
use crate::datasource::SourceError;
use crate::discovery::{BadToken, DiscoveryProblem, PinError};
use crate::etcd::EtcdError;
use crate::fsutil::FsError;
use crate::host::HostError;
use crate::images::ImageError;
use crate::kube::ApiError;
use crate::kube::paths::PathError;
use crate::kubeconfig::KubeconfigError;
use crate::objects::RenderError;
use crate::objects::tokens::TokenError;
use crate::patches::PatchError;
use crate::pki::check::{CertProblem, PkiError};
use crate::pki::copycerts::CopyCertsError;
use crate::pki::keys::KeyProblem;
use crate::preflight::PreflightError;
use crate::retry::GaveUp;
use crate::token::RandomError;

/// What went wrong, coarsely: enough to choose an exit code and a hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Bad command line.
    Usage,
    /// Bad configuration or user-data.
    Config,
    /// A file on disk that we would have to trust or overwrite is not valid.
    State,
    /// A preflight error that was not ignored.
    Preflight,
    /// Anything else: I/O, crypto, the network.
    Runtime,
    /// A cluster this node must not touch answers where it would make its own (never two clusters).
    Conflict,
    /// The image's Kubernetes version may not run here (version skew, a skipped minor, a
    /// downgrade): an upgrade by image refused at boot, the node left on its old configuration.
    Skew,
}

impl Kind {
    /// Exit codes: 1 runtime failure, 2 bad input (usage, config, on-disk state), 3 preflight,
    /// 4 another cluster answers at the endpoint, 5 the image's Kubernetes version refused.
    pub fn exit_code(self) -> i32 {
        match self {
            Kind::Usage | Kind::Config | Kind::State => 2,
            Kind::Preflight => 3,
            Kind::Runtime => 1,
            Kind::Conflict => 4,
            Kind::Skew => 5,
        }
    }
}

#[derive(Debug)]
pub struct Error {
    pub kind: Kind,
    /// The whole one-line text: contexts, then the layer error's own message.
    pub message: String,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Private: a call site names its situation (the constructors below, or a layer error through
    /// `From`), and this file alone turns the situation into a kind.
    fn new(kind: Kind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into() }
    }

    /// A flag, argument or phase name on the command line is wrong, missing or unknown (also a
    /// flag's value the cluster refuses, such as a token id that exists).
    pub fn bad_flag(m: impl Into<String>) -> Self {
        Self::new(Kind::Usage, m)
    }
    /// The operator's configuration is wrong: a config file or its values, the user-data, a
    /// credential, a discovery file; also such a file that cannot be read.
    pub fn bad_config(m: impl Into<String>) -> Self {
        Self::new(Kind::Config, m)
    }
    /// A file on disk (node state: a kubeconfig, certificate, plan; or one a flag names) that we
    /// would have to trust or overwrite is missing, unreadable or invalid.
    pub fn bad_file(m: impl Into<String>) -> Self {
        Self::new(Kind::State, m)
    }
    /// A preflight check failed and was not ignored.
    pub fn preflight(m: impl Into<String>) -> Self {
        Self::new(Kind::Preflight, m)
    }
    /// Another cluster answers where this node would make its own (never two clusters).
    pub fn other_cluster(m: impl Into<String>) -> Self {
        Self::new(Kind::Conflict, m)
    }
    /// The image's Kubernetes version breaks a version rule against this node or its cluster.
    pub fn skew(m: impl Into<String>) -> Self {
        Self::new(Kind::Skew, m)
    }
    /// The cluster answered, but without what this node needs (a ConfigMap, a Secret's entry) or
    /// refusing it (a CSR left unsigned, a discovery signature that does not verify).
    pub fn cluster(m: impl Into<String>) -> Self {
        Self::new(Kind::Runtime, m)
    }
    /// Something on this machine failed: I/O, a program or script, the operator's answer to a
    /// question, the last run.
    pub fn failed(m: impl Into<String>) -> Self {
        Self::new(Kind::Runtime, m)
    }
    /// A bug: one of our own values failed to render, or an invariant did not hold.
    pub fn internal(m: impl Into<String>) -> Self {
        Self::new(Kind::Runtime, m)
    }
    /// Prefix the message with what we were doing ("writing /etc/kubernetes/pki/ca.key").
    pub fn context(mut self, ctx: impl fmt::Display) -> Self {
        self.message = format!("{ctx}: {}", self.message);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// Adds context to any fallible result, turning foreign errors into runtime errors and layer
/// errors into the kind decided below.
pub trait Context<T> {
    fn ctx(self, what: impl fmt::Display) -> Result<T>;
}

impl<T> Context<T> for std::result::Result<T, Error> {
    fn ctx(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| e.context(what))
    }
}

impl<T> Context<T> for std::io::Result<T> {
    fn ctx(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::failed(format!("{what}: {e}")))
    }
}

impl<T> Context<T> for std::result::Result<T, rcgen::Error> {
    fn ctx(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::failed(format!("{what}: {e}")))
    }
}

// ---------------------------------------------------------------------------------------------
// The kind of every layer error: the only place exit codes are decided.

/// `layer!(Type => |e| kind)`: `From<Type> for Error` with the kind computed from `&Type`, the
/// message from its Display, and [`Context`] for results carrying it.
macro_rules! layer {
    ($($ty:ty => |$e:ident| $kind:expr;)+) => {$(
        impl From<$ty> for Error {
            fn from(err: $ty) -> Self {
                let kind: Kind = {
                    let $e = &err;
                    $kind
                };
                Error::new(kind, err.to_string())
            }
        }

        impl<T> Context<T> for std::result::Result<T, $ty> {
            fn ctx(self, what: impl fmt::Display) -> Result<T> {
                self.map_err(|e| Error::from(e).context(what))
            }
        }
    )+};
}

fn kubeconfig_kind(e: &KubeconfigError) -> Kind {
    match e {
        // Our own value failed to serialise: not the operator's input.
        KubeconfigError::Render { .. } => Kind::Runtime,
        // A kubeconfig on disk (or handed to us) that we would have to trust.
        _ => Kind::State,
    }
}

fn api_kind(e: &ApiError) -> Kind {
    match e {
        ApiError::Kubeconfig(k) => kubeconfig_kind(k),
        _ => Kind::Runtime,
    }
}

layer! {
    UsageError => |_e| Kind::Usage;
    ConfigError => |_e| Kind::Config;
    LoadError => |_e| Kind::Config;
    FlagsError => |e| match e {
        FlagsError::Usage(_) => Kind::Usage,
        FlagsError::Config(_) | FlagsError::Load(_) => Kind::Config,
    };
    ValueError => |_e| Kind::Config;
    PreflightError => |_e| Kind::Preflight;

    // Certificates and keys found on disk are state; making new ones is runtime.
    CertProblem => |_e| Kind::State;
    KeyProblem => |_e| Kind::State;
    PkiError => |e| match e {
        PkiError::Cert { .. }
        | PkiError::Key { .. }
        | PkiError::Rejected { .. }
        | PkiError::MissingCa { .. }
        | PkiError::MissingKey { .. }
        | PkiError::ExternalCaLeaf { .. }
        | PkiError::PublicWithoutKey { .. }
        | PkiError::PublicMismatch { .. }
        | PkiError::Kubeconfig { .. }
        | PkiError::Usages { .. } => Kind::State,
        PkiError::UnknownCertificate { .. } => Kind::Usage,
        PkiError::Generate { .. }
        | PkiError::GeneratorPanicked
        | PkiError::Random
        | PkiError::Sign { .. }
        | PkiError::Issued(_)
        | PkiError::Fs(_) => Kind::Runtime,
    };

    // A wrong or malformed certificate key is the operator's input; randomness is the machine's.
    CopyCertsError => |e| match e {
        CopyCertsError::Random => Kind::Runtime,
        _ => Kind::Config,
    };

    KubeconfigError => |e| kubeconfig_kind(e);
    ApiError => |e| api_kind(e);
    // An object of ours without a REST path is a bug, not bad input.
    PathError => |_e| Kind::Runtime;
    RenderError => |_e| Kind::Runtime;
    // The patch directory is the operator's input, like the config that names it.
    PatchError => |_e| Kind::Config;

    CsrError => |e| match e {
        CsrError::EmptyNodeName => Kind::Config,
        _ => Kind::Runtime,
    };
    BadToken => |_e| Kind::Config;
    PinError => |e| match e {
        PinError::Malformed { .. }
        | PinError::UnsupportedFormat { .. }
        | PinError::WrongLength { .. }
        | PinError::NotHex { .. } => Kind::Config,
        // What the cluster served does not satisfy the pins.
        PinError::NotX509 { .. } | PinError::CertNotX509 { .. } | PinError::NotPinned { .. } => Kind::Runtime,
    };
    DiscoveryProblem => |_e| Kind::Runtime;
    TokenError => |e| match e {
        TokenError::BadFormat | TokenError::BadExpires { .. } | TokenError::BadTtl(_) | TokenError::TtlTooLong => {
            Kind::Config
        }
        // Formatting a time, or a token Secret read back from the cluster.
        _ => Kind::Runtime,
    };

    SourceError => |e| match e {
        SourceError::Override { .. } | SourceError::NoImdsAddress => Kind::Config,
        _ => Kind::Runtime,
    };
    HostError => |_e| Kind::Runtime;
    // The node's disk, the machine's randomness, and a wait that ran out: never the input.
    FsError => |_e| Kind::Runtime;
    RandomError => |_e| Kind::Runtime;
    GaveUp => |_e| Kind::Runtime;
    CriError => |_e| Kind::Runtime;
    ImageError => |e| match e {
        ImageError::Archive { .. } => Kind::State,
        ImageError::Runtime(_) => Kind::Runtime,
    };
    // A missing or unreadable etcd client certificate is on-disk state; the rest is runtime.
    EtcdError => |e| match e {
        EtcdError::MissingFile { .. } | EtcdError::BadCredentials { .. } => Kind::State,
        EtcdError::Api(a) => api_kind(a),
        _ => Kind::Runtime,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_errors_keep_their_text_and_get_their_kind_here() {
        let e: Error = ValueError::NotDuration { value: "1y".into() }.into();
        assert_eq!((e.kind, e.kind.exit_code()), (Kind::Config, 2));
        assert!(e.message.starts_with("\"1y\" is not a duration"), "{e}");

        let e: Error = CertProblem::Expired { not_after: "2020-01-01T00:00:00Z".into() }.at("/pki/ca.crt").into();
        assert_eq!((e.kind, e.kind.exit_code()), (Kind::State, 2));
        assert_eq!(e.message, "/pki/ca.crt expired at 2020-01-01T00:00:00Z; fix or remove it");

        let e: Error = PkiError::Random.into();
        assert_eq!((e.kind, e.kind.exit_code()), (Kind::Runtime, 1));

        let e: Error = ApiError::Kubeconfig(KubeconfigError::NoContext { name: "x".into() }).into();
        assert_eq!(e.kind, Kind::State);
        let e: Error = KubeconfigError::Render { context: "a@b".into(), detail: "?".into() }.into();
        assert_eq!(e.kind, Kind::Runtime);

        let e: Error = SourceError::NoImdsAddress.into();
        assert_eq!(e.kind, Kind::Config);
        let e: Error = SourceError::Missing { path: "/m/openstack/latest/meta_data.json".into() }.into();
        assert_eq!((e.kind, e.message.as_str()), (Kind::Runtime, "/m/openstack/latest/meta_data.json is missing"));

        let e: Error = PinError::NotHex { value: "sha256:zz".into() }.into();
        assert_eq!(e.kind, Kind::Config);
        let e: Error = PinError::NotPinned { got: vec!["sha256:00".into()] }.into();
        assert_eq!(e.kind, Kind::Runtime);
        let e: Error = TokenError::TtlTooLong.into();
        assert_eq!(e.kind, Kind::Config);
    }

    #[test]
    fn lower_layers_keep_the_exit_codes_they_had() {
        let code = |e: Error| (e.kind, e.kind.exit_code());
        assert_eq!(code(UsageError("unknown flag --x".into()).into()), (Kind::Usage, 2));
        let e = PreflightError { lines: vec!["\t[ERROR Swap]: swap is on".into()], names: vec!["Swap".into()] };
        assert_eq!(code(e.into()), (Kind::Preflight, 3));
        assert_eq!(code(ConfigError::file("u", "bad".into()).into()), (Kind::Config, 2));
        let read = LoadError::Read { path: "/c.yaml".into(), source: std::io::ErrorKind::NotFound.into() };
        let e = Error::from(read);
        assert_eq!((e.kind, e.message.as_str()), (Kind::Config, "reading config /c.yaml: entity not found"));
        let fs = FsError { op: "renaming into", path: "/etc/k".into(), source: std::io::ErrorKind::Other.into() };
        let e = Error::from(fs);
        assert_eq!((e.kind, e.message.as_str()), (Kind::Runtime, "renaming into /etc/k: other error"));
        let e: Error =
            PkiError::Fs(FsError { op: "reading", path: "/p".into(), source: std::io::ErrorKind::Other.into() }).into();
        assert_eq!((e.kind, e.message.as_str()), (Kind::Runtime, "reading /p: other error"));
        assert_eq!(code(PkiError::MissingCa { crt: "/pki/ca.crt".into() }.into()), (Kind::State, 2));
        assert_eq!(code(RandomError.into()), (Kind::Runtime, 1));
        let gave_up =
            GaveUp { what: "w".into(), waited: std::time::Duration::from_secs(3), attempts: 2, reason: "r".into() };
        let e = Error::from(EtcdError::from(gave_up));
        assert_eq!((e.kind, e.message.as_str()), (Kind::Runtime, "w: gave up after 3s (2 attempts); last reason: r"));
        let e = EtcdError::Api(ApiError::Kubeconfig(KubeconfigError::NoContext { name: "x".into() }));
        assert_eq!(code(e.into()), (Kind::State, 2));
    }

    #[test]
    fn situations_get_their_kind_here() {
        let code = |e: Error| (e.kind, e.kind.exit_code());
        assert_eq!(code(Error::bad_flag("f")), (Kind::Usage, 2));
        assert_eq!(code(Error::bad_config("c")), (Kind::Config, 2));
        assert_eq!(code(Error::bad_file("reading /etc/kubernetes/admin.conf: x")), (Kind::State, 2));
        assert_eq!(code(Error::preflight("p")), (Kind::Preflight, 3));
        assert_eq!(code(Error::other_cluster("o")), (Kind::Conflict, 4));
        for e in [Error::cluster("c"), Error::failed("f"), Error::internal("i")] {
            assert_eq!(code(e), (Kind::Runtime, 1));
        }
        assert_eq!(Error::bad_flag("the message, untouched").message, "the message, untouched");
    }

    #[test]
    fn ctx_prefixes_layer_errors() {
        let r: std::result::Result<(), KubeconfigError> = Err(KubeconfigError::Unreadable { path: "/k/key".into() });
        let e = r.ctx("connecting with /etc/kubernetes/admin.conf").unwrap_err();
        assert_eq!(e.message, "connecting with /etc/kubernetes/admin.conf: cannot read /k/key");
        assert_eq!(e.kind, Kind::State);
        let e = Error::bad_config("bad").context("reading x");
        assert_eq!((e.kind, e.to_string().as_str()), (Kind::Config, "reading x: bad"));
    }
}
