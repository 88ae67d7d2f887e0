//! The node a run bootstraps, decided once where the run starts and shared by init's and join's
//! contexts: whether this machine is the node is asked here and nowhere else.

use std::path::Path;

use crate::clock::Clock;
use crate::fsutil::NodeFs;
use crate::host::{Host, LinuxHost};
use crate::status::Reporter;

#[derive(Clone, Copy)]
pub struct Node<'a> {
    /// The node's files (under `--root`; a dry run stages them only).
    pub fs: &'a NodeFs,
    /// The machine preflight asks about.
    pub host: &'a dyn Host,
    /// The root is `/`: this machine is the node, so preflight checks it and the kubelet is its.
    pub live: bool,
    pub clock: &'a dyn Clock,
    /// Progress for the boot status file and console; `None` on the command line.
    pub report: Option<&'a Reporter<'a>>,
}

impl<'a> Node<'a> {
    pub fn new(fs: &'a NodeFs, clock: &'a dyn Clock, report: Option<&'a Reporter<'a>>) -> Node<'a> {
        Node { fs, host: &LinuxHost, live: is_live(fs.root()), clock, report }
    }

    /// A real run on this machine (not a dry run): one that may restart the kubelet.
    pub(crate) fn acts(&self) -> bool {
        self.live && !self.fs.is_dry_run()
    }
}

/// Is a node root this machine's own root?
pub(crate) fn is_live(root: &Path) -> bool {
    root == Path::new("/")
}
