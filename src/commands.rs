//! One function per CLI command: turns parsed arguments into library calls and output.

use std::io::Write;
use std::path::Path;

use log::{info, warn};
use serde_json::json;

use crate::cli::{self, Command, InitSub};
use crate::config;
use crate::error::{Context, Error, Result};
use crate::fsutil::NodeFs;
use crate::phases::{self, INIT_PHASES, InitContext};

pub fn run(cli: cli::Cli) -> Result<()> {
    match cli.command {
        Command::Init(i) => match i.phase {
            Some(InitSub::Phase(p)) => {
                let phase = phases::find(&p.name).ok_or_else(|| {
                    Error::usage(format!("unknown phase {:?}; `kubestrap phases` lists them", p.name))
                })?;
                init(p.config.as_deref(), &p.root, p.dry_run, |ctx| phases::run_one(ctx, phase))
            }
            None => {
                let mut skip = cli::split_list(i.skip_phases.as_deref());
                phases::check_skip(&skip)?;
                init(i.config.as_deref(), &i.root, i.dry_run, |ctx| {
                    skip.extend(ctx.cfg.init.skip_phases.iter().cloned());
                    phases::run_init(ctx, &skip)
                })
            }
        },
        Command::Phases(_) => {
            let mut out = std::io::stdout().lock();
            for p in INIT_PHASES {
                writeln!(out, "init  {:<14} {}", p.name, p.description).ctx("writing to stdout")?;
            }
            Ok(())
        }
        Command::Certs(c) => match c.command {
            cli::CertsCommand::CaHash(h) => {
                let path = match h.file {
                    Some(f) => f,
                    None => NodeFs::new(&h.root).real(&format!("{}/ca.crt", crate::constants::DEFAULT_CERTS_DIR)),
                };
                let pem = std::fs::read(&path).map_err(|e| Error::usage(format!("reading {}: {e}", path.display())))?;
                let hash = crate::pki::ca_hash(&pem).map_err(|m| Error::state(format!("{} {m}", path.display())))?;
                println!("{hash}");
                Ok(())
            }
        },
        Command::Version(_) => {
            println!(
                "kubestrap {} (Kubernetes {} by default)",
                env!("CARGO_PKG_VERSION"),
                crate::constants::DEFAULT_KUBERNETES_VERSION
            );
            Ok(())
        }
    }
}

fn init(
    config_path: Option<&Path>,
    root: &Path,
    dry_run: bool,
    body: impl FnOnce(&InitContext) -> Result<()>,
) -> Result<()> {
    let start = time::OffsetDateTime::now_utc();
    let cfg = config::load_init(config_path, &crate::host::facts())?;
    for w in &cfg.warnings {
        warn!("[config] {w}");
    }
    info!("[init] Using Kubernetes version: {}", cfg.version);
    let fs = if dry_run { NodeFs::dry_run(root) } else { NodeFs::new(root) };
    let ctx = InitContext { cfg: &cfg, env: phases::host_env(&fs), fs: &fs, start };
    body(&ctx)?;
    if dry_run {
        let plan = json!({ "dryRun": true, "root": root.display().to_string(), "files": fs.planned() });
        // Invariant: the plan holds only strings and numbers.
        println!("{}", serde_json::to_string_pretty(&plan).unwrap_or_default());
    } else {
        info!("[init] On-disk control plane ready under {}", root.display());
    }
    Ok(())
}
