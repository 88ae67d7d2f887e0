//! `kubestrap reset [phase NAME]`: the flags into [`crate::reset::ResetArgs`], this machine and
//! the real etcd as the environment, stdin for the confirmation.

use crate::cli::{self, ResetSub};
use crate::error::Result;
use crate::reset::{self, RealEtcd, ResetArgs, ResetEnv};

pub(super) fn run(r: cli::Reset) -> Result<()> {
    let args = match r.phase {
        Some(ResetSub::Phase(p)) => ResetArgs {
            root: p.root,
            force: p.force,
            dry_run: p.dry_run,
            skip_phases: Vec::new(),
            cri_socket: p.cri_socket,
            cert_dir: p.cert_dir,
            cleanup_tmp_dir: p.cleanup_tmp_dir,
            kubeconfig: p.kubeconfig,
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
    let live = crate::node::is_live(&args.root);
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut out = std::io::stdout();
    let host = crate::host::LinuxHost;
    reset::run(&args, &mut ResetEnv { host: &host, live, etcd: &RealEtcd, input: &mut input, out: &mut out })
}
