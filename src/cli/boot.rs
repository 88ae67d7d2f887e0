//! `kubestrap boot` (the systemd units' command) and `kubestrap status` (its report).

use argh::FromArgs;
use std::path::PathBuf;

/// The systemd entry point: read user-data, then init or join (one stage per unit).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "boot")]
pub struct Boot {
    #[argh(option, default = "String::from(\"pre-kubelet\")")]
    /// pre-kubelet (kubestrap.service) or post-kubelet (kubestrap-post.service)
    pub stage: String,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// node root (default /)
    pub root: PathBuf,
    #[argh(option)]
    /// how long to wait for a datasource to appear (Go duration; default 5m)
    pub datasource_timeout: Option<String>,
    #[argh(option)]
    /// preload the image archives in this directory (repeatable; default /usr/share/kubestrap/images)
    pub image_dir: Vec<PathBuf>,
    #[argh(option)]
    /// booted on an image of a newer Kubernetes: how long a worker waits for the control plane to run that minor, a control plane for its API server to answer (Go duration; default 20m)
    pub upgrade_wait: Option<String>,
}

/// Print the last boot run in words; exit non-zero if it failed.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "status")]
pub struct Status {
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// node root (default /)
    pub root: PathBuf,
    #[argh(switch)]
    /// this boot's stages, phases, image imports and component waits on the boot clock, sorted by start
    pub timeline: bool,
}
