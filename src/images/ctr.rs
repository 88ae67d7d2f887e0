//! containerd's own client, `ctr`, run as a child: the one way in to containerd's content,
//! image and snapshot stores. The CRI has no import call (only registry pulls), and containerd's
//! import API is a dozen gRPC services with leases; `ctr` is built from the same containerd
//! module as the runtime, so it always speaks that version's API, and kubestrap stays free of
//! a protobuf/gRPC stack.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::ImageError;

/// The namespace the CRI (and so the kubelet) keeps its images in.
pub(crate) const K8S_NAMESPACE: &str = "k8s.io";
/// The label the CRI puts on the images it pulls; imports carry it too, so preloaded images are
/// the runtime's like pulled ones.
const MANAGED_LABEL: &str = "io.cri-containerd.image=managed";

pub(crate) struct Ctr {
    pub(crate) binary: PathBuf,
    /// containerd's gRPC socket (a path, no `unix://`).
    pub(crate) address: PathBuf,
}

impl Ctr {
    fn run(&self, args: &[&str]) -> Result<Output, ImageError> {
        let mut c = Command::new(&self.binary);
        c.arg("--address").arg(&self.address).args(["--namespace", K8S_NAMESPACE]).args(args);
        c.output().map_err(|e| ImageError::Runtime(format!("running {}: {e}", self.binary.display())))
    }

    fn failed(&self, what: &str, out: &Output) -> String {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no error output");
        format!("{} {what}: {} ({last})", self.binary.display(), out.status)
    }

    /// The names of the images in the namespace.
    pub(crate) fn list(&self) -> Result<Vec<String>, ImageError> {
        let out = self.run(&["images", "list", "--quiet"])?;
        if !out.status.success() {
            return Err(ImageError::Runtime(self.failed("images list", &out)));
        }
        Ok(String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).filter(|l| !l.is_empty()).collect())
    }

    /// Imports and unpacks one archive for this machine's platform; `--sync-fs` so that a power
    /// cut after the import cannot leave an image the store lists but whose layers were lost.
    pub(crate) fn import(&self, archive: &Path) -> Result<(), ImageError> {
        let file = archive.to_string_lossy();
        let out = self.run(&["images", "import", "--label", MANAGED_LABEL, "--sync-fs", &file])?;
        if out.status.success() {
            return Ok(());
        }
        // Digests or sizes that do not match are the archive's fault, not the runtime's.
        let why = self.failed("images import", &out);
        if why.contains("digest") || why.contains("unexpected EOF") || why.contains("invalid tar") {
            return Err(ImageError::Archive { path: archive.to_path_buf(), why });
        }
        Err(ImageError::Runtime(why))
    }
}
