//! User input → one validated, defaulted node configuration. Pure: host facts (hostname, default
//! address) come in as a value, so this module tests without a machine.

pub mod defaults;
pub mod features;
pub mod flags;
pub mod load;
mod resolve;
pub mod types;
pub mod upgrade;
pub mod v1beta3;
pub mod values;

use std::fmt;

pub use load::{
    Documents, Reads, cluster_from_configmap, from_yaml_slice, parse_documents, parse_documents_for, parse_stored,
    prefix_cri_socket,
};
pub(crate) use resolve::etcd_version_for;
pub use resolve::{Endpoint, HostFacts, InitConfig, KeyAlgorithm, disable_skipped_addons, resolve_init};

/// A config problem: which file, which document, which field, what is wrong with the value.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    pub source: String,
    pub document: String,
    pub path: String,
    pub message: String,
}

impl ConfigError {
    pub fn file(source: &str, message: String) -> Self {
        ConfigError { source: source.into(), document: String::new(), path: String::new(), message }
    }
    pub fn doc(source: &str, document: &str, path: &str, message: String) -> Self {
        ConfigError { source: source.into(), document: document.into(), path: path.into(), message }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        if !self.document.is_empty() {
            write!(f, ": {}", self.document)?;
        }
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Why an init config file could not be loaded: unreadable, or not a valid config.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("reading config {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error(transparent)]
    Invalid(#[from] ConfigError),
}

/// Reads and resolves an init config file (or the built-in defaults when `path` is None).
pub fn load_init(path: Option<&std::path::Path>, host: &HostFacts) -> Result<InitConfig, LoadError> {
    let docs = match path {
        Some(p) => {
            let source = p.display().to_string();
            let bytes = std::fs::read(p).map_err(|e| LoadError::Read { path: source.clone(), source: e })?;
            let text = String::from_utf8(bytes).map_err(|e| {
                ConfigError::file(&source, format!("is not UTF-8 text (byte {})", e.utf8_error().valid_up_to()))
            })?;
            let docs = parse_documents_for(&source, &text, Reads::Init)?;
            docs.require_init(&source)?;
            docs
        }
        None => Documents::default(),
    };
    let source = path.map(|p| p.display().to_string()).unwrap_or_else(|| "defaults".into());
    Ok(resolve_init(&source, docs, host)?)
}
