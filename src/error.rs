//! One error type for the crate. The kind decides the exit code; the message is a chain of
//! "verb + object" contexts ending in the cause, printed on one line.

use std::fmt;

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
}

impl Kind {
    /// Exit codes: 1 runtime failure, 2 bad input (usage, config, on-disk state), 3 preflight.
    pub fn exit_code(self) -> i32 {
        match self {
            Kind::Usage | Kind::Config | Kind::State => 2,
            Kind::Preflight => 3,
            Kind::Runtime => 1,
        }
    }
}

#[derive(Debug)]
pub struct Error {
    pub kind: Kind,
    pub message: String,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into() }
    }
    pub fn usage(m: impl Into<String>) -> Self {
        Self::new(Kind::Usage, m)
    }
    pub fn config(m: impl Into<String>) -> Self {
        Self::new(Kind::Config, m)
    }
    pub fn state(m: impl Into<String>) -> Self {
        Self::new(Kind::State, m)
    }
    pub fn runtime(m: impl Into<String>) -> Self {
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

/// Adds context to any fallible result, turning foreign errors into runtime errors.
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
        self.map_err(|e| Error::runtime(format!("{what}: {e}")))
    }
}

impl<T> Context<T> for std::result::Result<T, rcgen::Error> {
    fn ctx(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::runtime(format!("{what}: {e}")))
    }
}
