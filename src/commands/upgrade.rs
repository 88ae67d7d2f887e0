//! `kubestrap upgrade apply`, `plan`, `node` and `diff`: the flags and any UpgradeConfiguration into
//! [`crate::upgrade::NodeArgs`], this machine as the host, the wall clock for the backup's stamp.

use crate::cli::{self, UpgradeCommand};
use crate::error::Result;
use crate::fsutil::NodeFs;
use crate::upgrade::{NodeArgs, NodeFlags};

pub(super) fn run(u: cli::Upgrade) -> Result<()> {
    match u.command {
        UpgradeCommand::Apply(a) => apply(a),
        UpgradeCommand::Plan(p) => plan(p),
        UpgradeCommand::Node(n) => node(n),
        UpgradeCommand::Diff(d) => diff(d),
    }
}

fn diff(d: cli::UpgradeDiff) -> Result<()> {
    let config = d.config.as_deref().map(crate::upgrade::read_config).transpose()?;
    let args = crate::upgrade::DiffArgs {
        root: d.root,
        kubeconfig: d.kubeconfig,
        version: d.version,
        context_lines: d.context_lines,
        config,
    };
    let fs = NodeFs::dry_run(&args.root);
    crate::upgrade::run_diff(&args, &fs, &mut std::io::stdout().lock())
}

fn plan(p: cli::UpgradePlan) -> Result<()> {
    let config = p.config.as_deref().map(crate::upgrade::read_config).transpose()?;
    let fs = NodeFs::dry_run(&p.root);
    let image_version = crate::boot::image_upgrade::image_version(&fs)?.map(|v| v.to_string());
    let args = crate::upgrade::PlanArgs {
        root: p.root,
        kubeconfig: p.kubeconfig,
        version: p.version,
        config,
        output: p.output,
        allow_experimental: p.allow_experimental_upgrades,
        allow_rc: p.allow_release_candidate_upgrades,
        etcd_upgrade: p.etcd_upgrade,
        ignore_preflight: cli::split_all(&p.ignore_preflight_errors),
        print_config: p.print_config,
        image_version,
    };
    crate::upgrade::run_plan(&args, &fs, &crate::host::LinuxHost, &mut std::io::stdout().lock())
}

fn apply(a: cli::UpgradeApply) -> Result<()> {
    let config = a.config.as_deref().map(crate::upgrade::read_config).transpose()?;
    let flags = crate::upgrade::ApplyFlags {
        root: a.root,
        version: a.version,
        yes: a.yes,
        force: a.force,
        dry_run: a.dry_run,
        kubeconfig: a.kubeconfig,
        patches: a.patches,
        ignore_preflight: cli::split_all(&a.ignore_preflight_errors),
        skip_phases: cli::split_all(&a.skip_phases),
        certificate_renewal: a.certificate_renewal,
        etcd_upgrade: a.etcd_upgrade,
        allow_experimental: a.allow_experimental_upgrades,
        allow_rc: a.allow_release_candidate_upgrades,
        print_config: a.print_config,
    };
    let args = crate::upgrade::ApplyArgs::resolve(flags, config.as_ref())?;
    let fs = if args.dry_run { NodeFs::dry_run(&args.root) } else { NodeFs::new(&args.root) };
    let _lock = fs.lock()?;
    let stdin = std::io::stdin();
    crate::upgrade::run_apply(&args, &fs, &crate::host::LinuxHost, time::OffsetDateTime::now_utc(), &mut stdin.lock())
}

fn node(n: cli::UpgradeNode) -> Result<()> {
    let config = n.config.as_deref().map(crate::upgrade::read_config).transpose()?;
    let flags = NodeFlags {
        root: n.root,
        dry_run: n.dry_run,
        kubeconfig: n.kubeconfig,
        patches: n.patches,
        ignore_preflight: cli::split_all(&n.ignore_preflight_errors),
        skip_phases: cli::split_all(&n.skip_phases),
        certificate_renewal: n.certificate_renewal,
        etcd_upgrade: n.etcd_upgrade,
    };
    let args = NodeArgs::resolve(flags, config.as_ref())?;
    let fs = if args.dry_run { NodeFs::dry_run(&args.root) } else { NodeFs::new(&args.root) };
    let _lock = fs.lock()?;
    crate::upgrade::run_node(&args, &fs, &crate::host::LinuxHost, time::OffsetDateTime::now_utc())
}
