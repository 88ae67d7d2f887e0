//! What cloud-init would have done around `kubeadm init|join`, as typed data the boot stages run:
//! `bootcmd`, `write_files`, the `runcmd` entries before the kubeadm step, and those after it
//! (the rest of its `&&` chain first, such as Cluster API's success sentinel). Only the part
//! after the kubeadm step is kept in the plan file: the post-kubelet stage runs it.

use serde::{Deserialize, Serialize};

use super::write_files::WriteFile;

/// One command to run, and where it came from (`runcmd[2]`) for logs and errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    pub origin: String,
    pub action: Action,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    /// A line for `/bin/sh -c`.
    Shell(String),
    /// `echo TEXT > PATH` (`>>` appends): written by kubestrap itself, so it lands under the
    /// node root like every other file (Cluster API's bootstrap-success sentinel is one).
    Echo { path: String, text: String, append: bool },
    /// `mkdir -p DIR...`, also done by kubestrap itself.
    Mkdir(Vec<String>),
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Shell(line) => f.write_str(line),
            Action::Echo { path, text, append } => {
                write!(f, "echo {} {} {path}", text.trim_end_matches('\n'), if *append { ">>" } else { ">" })
            }
            Action::Mkdir(dirs) => write!(f, "mkdir -p {}", dirs.join(" ")),
        }
    }
}

/// The cloud-config around the kubeadm step, in the order cloud-init runs it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Script {
    /// Run first (cloud-init runs bootcmd early, before write_files).
    #[serde(skip)]
    pub bootcmd: Vec<Command>,
    /// Written before any runcmd entry. Not kept in the plan file: they may hold keys, and only
    /// the pre-kubelet stage writes them.
    #[serde(skip)]
    pub files: Vec<WriteFile>,
    /// runcmd up to the kubeadm step (and the `&&` chain before it).
    #[serde(skip)]
    pub before: Vec<Command>,
    /// The kubeadm step as written (token hidden), for the log.
    pub kubeadm: String,
    /// After the kubeadm step succeeded: the rest of its chain, then the later runcmd entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<Command>,
}
