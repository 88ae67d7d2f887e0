//! `kubestrap reset [phase NAME]`: the flags into [`crate::reset::ResetArgs`], this machine and
//! the real etcd as the environment, stdin for the confirmation.

use std::path::Path;

use crate::cli::{self, ResetSub};
use crate::error::Result;
use crate::paths::DEFAULT_CERTS_DIR;
use crate::reset::{self, RealEtcd, ResetArgs, ResetEnv};

pub(super) fn run(r: cli::Reset) -> Result<()> {
    // `reset --root X phase NAME` and `reset phase NAME --root X` mean the same: a flag given
    // on either side of `phase` counts (a phase's default never overrides the parent's value).
    let args = match r.phase {
        Some(ResetSub::Phase(p)) => ResetArgs {
            root: if p.root == Path::new("/") { r.root } else { p.root },
            force: p.force || r.force,
            dry_run: p.dry_run || r.dry_run,
            skip_phases: Vec::new(),
            cri_socket: p.cri_socket.or(r.cri_socket),
            cert_dir: if p.cert_dir == DEFAULT_CERTS_DIR { r.cert_dir } else { p.cert_dir },
            cleanup_tmp_dir: p.cleanup_tmp_dir || r.cleanup_tmp_dir,
            kubeconfig: p.kubeconfig.or(r.kubeconfig),
            only: Some(p.name),
        },
        None => ResetArgs {
            root: r.root,
            force: r.force,
            dry_run: r.dry_run,
            skip_phases: cli::split_all(&r.skip_phases),
            cri_socket: r.cri_socket,
            cert_dir: r.cert_dir,
            cleanup_tmp_dir: r.cleanup_tmp_dir,
            kubeconfig: r.kubeconfig,
            only: None,
        },
    };
    if let Some(k) = &args.kubeconfig {
        // kubeadm reads the cluster's kubeadm-config through it; reset reads the node's own files.
        log::warn!(
            "--kubeconfig {k}: kubestrap reset finds etcd from this node's own manifest and reads nothing through a kubeconfig; the flag is ignored"
        );
    }
    let live = crate::node::is_live(&args.root);
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut out = std::io::stdout();
    let host = crate::host::LinuxHost;
    reset::run(
        &args,
        &mut ResetEnv {
            host: &host,
            live,
            etcd: &RealEtcd,
            clock: &crate::clock::SystemClock,
            input: &mut input,
            out: &mut out,
        },
    )
}
