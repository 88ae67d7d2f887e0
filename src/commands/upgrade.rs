//! `kubestrap upgrade apply`, `plan`, `node` and `diff`: the flags and any UpgradeConfiguration into
//! [`crate::upgrade::NodeArgs`], this machine as the host, the wall clock for the backup's stamp.

use crate::cli::{self, UpgradeCommand};
use crate::error::{Error, Result};
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

/// `phase NAME [SUB]` first if present (kubeadm's phase subcommands), then the rest: the phase
/// as the skip list that leaves only it (a parent, or `parent all`, keeps its sub-phases).
fn phase_words<F>(
    words: &[String],
    list: &'static [crate::phases::Phase<F>],
    workflow: &str,
) -> Result<(Option<Vec<String>>, Vec<String>)> {
    let (name, rest) = crate::phases::phase_words(words, list, workflow)?;
    let Some(name) = name else { return Ok((None, rest.to_vec())) };
    let keep: Vec<&str> = crate::phases::lookup_all(list, workflow, &name)?.iter().map(|p| p.name).collect();
    let skip = list.iter().map(|p| p.name).filter(|n| !keep.contains(n)).map(str::to_string).collect();
    Ok((Some(skip), rest.to_vec()))
}

fn apply(a: cli::UpgradeApply) -> Result<()> {
    let config = a.config.as_deref().map(crate::upgrade::read_config).transpose()?;
    let (only, rest) = phase_words(&a.words, crate::upgrade::APPLY_PHASES, "upgrade apply")?;
    let version = match &rest[..] {
        [] => None,
        [v] => Some(v.clone()),
        _ => return Err(Error::bad_flag(format!("upgrade apply takes one version but was given {rest:?}"))),
    };
    let flags = crate::upgrade::ApplyFlags {
        root: a.root,
        version,
        yes: a.yes,
        force: a.force,
        dry_run: a.dry_run,
        kubeconfig: a.kubeconfig,
        patches: a.patches,
        ignore_preflight: cli::split_all(&a.ignore_preflight_errors),
        skip_phases: only.unwrap_or_else(|| cli::split_all(&a.skip_phases)),
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
    let (only, rest) = phase_words(&n.words, crate::upgrade::NODE_PHASES, "upgrade node")?;
    if !rest.is_empty() {
        return Err(Error::bad_flag(format!("upgrade node takes no arguments but was given {rest:?}")));
    }
    let flags = NodeFlags {
        root: n.root,
        dry_run: n.dry_run,
        kubeconfig: n.kubeconfig,
        patches: n.patches,
        ignore_preflight: cli::split_all(&n.ignore_preflight_errors),
        skip_phases: only.unwrap_or_else(|| cli::split_all(&n.skip_phases)),
        certificate_renewal: n.certificate_renewal,
        etcd_upgrade: n.etcd_upgrade,
    };
    let args = NodeArgs::resolve(flags, config.as_ref())?;
    let fs = if args.dry_run { NodeFs::dry_run(&args.root) } else { NodeFs::new(&args.root) };
    let _lock = fs.lock()?;
    crate::upgrade::run_node(&args, &fs, &crate::host::LinuxHost, time::OffsetDateTime::now_utc())
}

#[cfg(test)]
mod phase_tests {
    use super::*;

    fn w(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_phase_subcommand_is_the_skip_list_that_leaves_only_it() {
        let apply = crate::upgrade::APPLY_PHASES;
        let (skip, rest) = phase_words(&w(&["phase", "control-plane", "v1.37.2"]), apply, "upgrade apply").unwrap();
        let skip = skip.unwrap();
        assert_eq!(rest, ["v1.37.2"]);
        assert!(!skip.contains(&"control-plane".to_string()) && skip.contains(&"preflight".to_string()));
        assert_eq!(skip.len(), apply.len() - 1);
        // kubeadm's spellings of a sub-phase and of a parent's `all`.
        let (skip, _) = phase_words(&w(&["phase", "addon", "coredns"]), apply, "upgrade apply").unwrap();
        assert!(!skip.unwrap().contains(&"addon/coredns".to_string()));
        let (skip, rest) = phase_words(&w(&["phase", "upload-config", "all", "v1.37.2"]), apply, "x").unwrap();
        let skip = skip.unwrap();
        assert_eq!(rest, ["v1.37.2"]);
        assert!(!skip.iter().any(|s| s.starts_with("upload-config/")), "{skip:?}");
        assert_eq!(skip.len(), apply.len() - 2);
        assert!(phase_words(&w(&["phase", "nope"]), apply, "upgrade apply").is_err());
        assert!(phase_words(&w(&["phase"]), apply, "upgrade apply").is_err());
        assert_eq!(phase_words(&w(&["v1.37.2"]), apply, "x").unwrap(), (None, w(&["v1.37.2"])));
        let node = crate::upgrade::NODE_PHASES;
        let (skip, rest) = phase_words(&w(&["phase", "kubelet-config"]), node, "upgrade node").unwrap();
        assert!(rest.is_empty());
        assert_eq!(skip.unwrap().len(), node.len() - 1);
    }
}
