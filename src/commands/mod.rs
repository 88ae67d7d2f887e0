//! One function per CLI command: turns parsed arguments into library calls and output.

mod certs;
#[path = "config.rs"]
mod config_command;
mod join;
mod reset;
mod token;
mod upgrade;

use std::io::Write;
use std::path::{Path, PathBuf};

use log::{info, warn};
use serde_json::json;

use crate::cli::{self, Command, InitSub};
use crate::config;
use crate::config::flags::InitFlags;
use crate::config::values::CertificateKey;
use crate::error::{Context, Error, Result};
use crate::fsutil::NodeFs;
use crate::init::{InitContext, UploadCerts};
use crate::node::Node;
use crate::phases::{self, INIT_PHASES, JOIN_PHASES};

pub fn run(cli: cli::Cli) -> Result<()> {
    match cli.command {
        Command::Init(i) => match i.phase {
            Some(InitSub::Phase(p)) => init_phase(p),
            None => init_all(&i),
        },
        Command::Preflight(p) => preflight(p),
        Command::Boot(b) => boot(b),
        Command::Status(s) => crate::boot::status(&s.root, s.timeline),
        Command::Join(j) => join::run(j),
        Command::Reset(r) => reset::run(r),
        Command::Token(t) => token::run(t),
        Command::Upgrade(u) => upgrade::run(u),
        Command::Config(c) => config_command::run(c),
        Command::Phases(_) => list_phases(),
        Command::Certs(c) => certs(c),
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

/// `init phase NAME [SUB]`.
fn init_phase(p: cli::InitPhase) -> Result<()> {
    // kubeadm spells a sub-phase as a second word; a parent runs all its sub-phases.
    let name = match &p.sub {
        Some(sub) => format!("{}/{sub}", p.name),
        None => p.name.clone(),
    };
    let selected = phases::lookup_all(INIT_PHASES, "init", &name)?;
    // Parsed once here, as join's; the phases take the key.
    let certificate_key = p
        .certificate_key
        .as_deref()
        .map(|k| CertificateKey::parse(k).map_err(|e| Error::bad_flag(format!("--certificate-key: {e}"))))
        .transpose()?;
    let run = InitRun {
        config: p.config.as_deref(),
        flags: InitFlags::default(),
        root: &p.root,
        dry_run: p.dry_run,
        ignore_preflight: cli::split_all(&p.ignore_preflight_errors),
        upload: UploadCerts { enabled: p.upload_certs, certificate_key, skip_key_print: p.skip_certificate_key_print },
        skip_phases: Vec::new(),
    };
    init(run, |ctx| selected.iter().try_for_each(|phase| phases::run_init_phase(ctx, phase)))
}

/// `init`: every phase not skipped.
fn init_all(i: &cli::Init) -> Result<()> {
    let mut skip = cli::split_all(&i.skip_phases);
    phases::check_skip(INIT_PHASES, "init", &skip)?;
    if i.on_disk_only {
        skip.extend(phases::outside(INIT_PHASES, phases::Stage::PreKubelet));
    }
    let upload = UploadCerts {
        enabled: i.upload_certs,
        // The flag sets InitConfiguration.certificateKey (InitFlags), parsed into cfg.certificate_key.
        certificate_key: None,
        skip_key_print: i.skip_certificate_key_print,
    };
    let run = InitRun {
        config: i.config.as_deref(),
        flags: InitFlags::from_cli(i),
        root: &i.root,
        dry_run: i.dry_run,
        ignore_preflight: cli::split_all(&i.ignore_preflight_errors),
        upload,
        skip_phases: cli::split_all(&i.skip_phases),
    };
    init(run, |ctx| {
        skip.extend(ctx.cfg.init.skip_phases.iter().cloned());
        phases::run_init(ctx, &skip)
    })
}

/// `phases`: both tables, one phase a line.
fn list_phases() -> Result<()> {
    let mut out = std::io::stdout().lock();
    for p in INIT_PHASES {
        writeln!(out, "init  {:<19} {}", p.name, p.about).ctx("writing to stdout")?;
    }
    for p in JOIN_PHASES {
        writeln!(out, "join  {:<19} {}", p.name, p.about).ctx("writing to stdout")?;
    }
    for (name, about) in crate::reset::RESET_PHASES {
        writeln!(out, "reset {name:<19} {about}").ctx("writing to stdout")?;
    }
    Ok(())
}

/// `certs certificate-key` and `certs ca-hash`.
fn certs(c: cli::Certs) -> Result<()> {
    match c.command {
        cli::CertsCommand::CertificateKey(_) => {
            println!("{}", crate::config::values::CertificateKey::generate()?.to_hex());
            Ok(())
        }
        cli::CertsCommand::CaHash(h) => {
            let path = match h.file {
                Some(f) => f,
                None => NodeFs::new(&h.root).real(&crate::paths::default_ca_cert()),
            };
            let pem = std::fs::read(&path).map_err(|e| Error::bad_file(format!("reading {}: {e}", path.display())))?;
            let hash = crate::pki::ca_hash(&pem).map_err(|m| Error::bad_file(format!("{} {m}", path.display())))?;
            println!("{hash}");
            Ok(())
        }
        cli::CertsCommand::CheckExpiration(c) => self::certs::check_expiration(c),
        cli::CertsCommand::Renew(r) => self::certs::renew_command(r),
    }
}

/// One `init` (or `init phase`) invocation.
struct InitRun<'a> {
    config: Option<&'a Path>,
    flags: InitFlags,
    root: &'a Path,
    dry_run: bool,
    ignore_preflight: Vec<String>,
    upload: UploadCerts,
    /// `--skip-phases`: a skipped add-on is stored as disabled, as kubeadm's init does.
    skip_phases: Vec<String>,
}

fn init(run: InitRun, body: impl FnOnce(&InitContext) -> Result<()>) -> Result<()> {
    let mut cfg = run.flags.load(run.config, &crate::host::facts())?;
    crate::config::disable_skipped_addons(&mut cfg.cluster, &run.skip_phases);
    for w in &cfg.warnings {
        warn!("[config] WARNING: {w}");
    }
    info!("[init] Using Kubernetes version: {}", cfg.version);
    // kubeadm: `--dry-run` or the InitConfiguration's `dryRun: true`.
    let dry_run = run.dry_run || cfg.init.dry_run;
    let fs = if dry_run { NodeFs::dry_run(run.root) } else { NodeFs::new(run.root) };
    let _lock = fs.lock()?;
    let mut ctx = InitContext::new(cfg, Node::new(&fs, &crate::clock::SystemClock, None), run.ignore_preflight);
    ctx.upload = run.upload;
    let recorder = crate::kube::Recorder::default();
    if dry_run {
        info!("[dry-run] Nothing will be written, waited for or sent; the plan is printed on stdout");
        ctx.dry_run_api = Some(recorder.clone());
    }
    ctx.skip_token_print = run.flags.skip_token_print;
    body(&ctx)?;
    if dry_run {
        let plan = json!({
            "dryRun": true,
            "root": run.root.display().to_string(),
            "files": fs.planned(),
            "objects": recorder.recorded(),
        });
        print_json(&plan)?;
    } else {
        info!("[init] Done; node state is under {}", run.root.display());
    }
    Ok(())
}

fn print_json(v: &impl serde::Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(v).map_err(|e| Error::internal(format!("encoding JSON output: {e}")))?;
    writeln!(std::io::stdout().lock(), "{text}").ctx("writing to stdout")
}

fn preflight(p: cli::Preflight) -> Result<()> {
    let role = crate::preflight::Role::parse(&p.role).ok_or_else(|| {
        Error::bad_flag(format!("--role {:?}: expected control-plane, worker or control-plane-join", p.role))
    })?;
    let json = match p.output.as_str() {
        "json" => true,
        "text" => false,
        o => return Err(Error::bad_flag(format!("--output {o:?}: expected text or json"))),
    };
    let mut ignore = cli::split_all(&p.ignore_preflight_errors);
    let input = match role {
        crate::preflight::Role::ControlPlane => {
            let cfg = config::load_init(p.config.as_deref(), &crate::host::facts())?;
            ignore.extend(cfg.init.node_registration.ignore_preflight_errors.iter().cloned());
            crate::preflight::Input::control_plane(&cfg, &p.root)
        }
        crate::preflight::Role::Worker | crate::preflight::Role::ControlPlaneJoin => {
            if p.config.is_some() {
                return Err(Error::bad_flag(
                    "--config is read for --role control-plane; for a worker use --node-name, --cri-socket, --discovery-endpoint",
                ));
            }
            let host = p
                .discovery_endpoint
                .as_deref()
                .map(|e| e.rsplit_once(':').map_or(e, |(h, _)| h).trim_matches(['[', ']']).to_string());
            let name = p.node_name.unwrap_or_else(crate::host::hostname);
            if role == crate::preflight::Role::Worker {
                crate::preflight::Input::worker(&p.root, name, p.cri_socket, host)
            } else {
                let cri = p.cri_socket.unwrap_or_else(|| crate::constants::DEFAULT_CRI_SOCKET.into());
                crate::preflight::Input::control_plane_join(
                    &p.root,
                    name,
                    cri,
                    host,
                    crate::constants::DEFAULT_API_PORT,
                )
            }
        }
    };
    info!("[preflight] Running pre-flight checks");
    let fs = NodeFs::new(&p.root);
    let report = crate::preflight::run(Node::new(&fs, &crate::clock::SystemClock, None).host, &input, &ignore);
    if json {
        print_json(&report)?;
    }
    Ok(crate::preflight::enforce(&report)?)
}

fn boot(b: cli::Boot) -> Result<()> {
    let stage = crate::boot::Stage::parse(&b.stage)
        .ok_or_else(|| Error::bad_flag(format!("--stage {:?}: expected pre-kubelet or post-kubelet", b.stage)))?;
    let datasource_timeout = match &b.datasource_timeout {
        Some(t) => {
            config::values::parse_duration(t).map_err(|m| Error::bad_flag(format!("--datasource-timeout: {m}")))?
        }
        None => crate::timeouts::DATASOURCE,
    };
    let upgrade_wait = match &b.upgrade_wait {
        Some(t) => config::values::parse_duration(t).map_err(|m| Error::bad_flag(format!("--upgrade-wait: {m}")))?,
        None => crate::boot::image_upgrade::DEFAULT_WAIT,
    };
    let mut env = crate::datasource::Env::from_system();
    env.root = b.root.clone();
    crate::boot::run(crate::boot::BootArgs {
        stage,
        root: b.root,
        datasource_timeout,
        env,
        image_dirs: if b.image_dir.is_empty() { vec![PathBuf::from(crate::images::DEFAULT_DIR)] } else { b.image_dir },
        upgrade_wait,
    })
}
