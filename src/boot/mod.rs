//! `kubestrap boot`: the systemd entry point. gather → validate → preflight → init or join, split
//! into the part that must finish before the kubelet starts (`pre-kubelet`) and the part that
//! needs it running (`post-kubelet`: a control plane's API phases). A done stamp per stage makes
//! later boots a fast no-op; a failed stage is simply retried at the next boot.
//!
//! User-data that runs kubeadm from runcmd (see `script`) is performed around the same steps:
//! pre-kubelet runs bootcmd, write_files and the runcmd entries before the kubeadm line, then
//! the init's on-disk phases or the whole join; post-kubelet finishes the init, then runs the
//! rest of the kubeadm line's `&&` chain and the later entries (on workers too).

pub mod every_boot;
mod every_boot_leaves;
pub mod existing;
pub mod failure;
pub mod image_upgrade;
mod image_upgrade_cp;
mod kubelet_watch;
pub mod metadata;
pub mod script;

use std::path::{Path, PathBuf};
use std::time::Duration;

use log::info;

use crate::clock::{Clock, SystemClock};
use crate::config::InitConfig;
use crate::config::types::JoinConfiguration;
use crate::datasource::Gathered;
use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::init::{InitContext, UploadCerts};
use crate::join::{JoinContext, JoinFlags};
use crate::node::Node;
use crate::paths::{self, BOOT_PLAN as PLAN_FILE};
use crate::phases::{self, INIT_PHASES, JOIN_PHASES};
use crate::status::Reporter;
use crate::userdata::{BootPlan, NodePlan, Script, plan_detailed};

/// The boot stages are the phase tables' `stage` column.
pub use crate::phases::Stage;

pub struct BootArgs {
    pub stage: Stage,
    pub root: PathBuf,
    pub datasource_timeout: Duration,
    pub env: crate::datasource::Env,
    /// Image archive directories to preload (under the node root), before the kubelet starts.
    pub image_dirs: Vec<PathBuf>,
    /// How long a worker booted on a newer image waits for its control plane to reach that minor.
    pub upgrade_wait: Duration,
}

/// Runs one stage, reporting every step; the error (if any) is also in the status file. User-data
/// shell commands run through `/bin/sh` only when the node root is `/`.
pub fn run(args: BootArgs) -> Result<()> {
    let runner = script::runner_for(&args.root);
    run_with(args, runner.as_ref())
}

/// [`run`] with the runner for user-data shell commands given.
pub(crate) fn run_with(args: BootArgs, runner: &dyn script::Runner) -> Result<()> {
    let fs = NodeFs::new(&args.root);
    let _lock = fs.lock()?;
    let attempts = paths::boot_attempts(args.stage.name());
    // A torn or foreign counter only restarts the count: it is a report, not state we act on.
    let attempt = fs.read(&attempts)?.map_or(0, |b| String::from_utf8_lossy(&b).trim().parse().unwrap_or(0)) + 1;
    let report = Reporter::new(&fs, args.stage.name(), attempt);
    let done = paths::boot_done(args.stage.name());
    if fs.exists(&done) {
        if args.stage == Stage::PreKubelet {
            // /run is empty again: Afterburn's files as the first boot wrote them.
            metadata::put_back(&fs);
            // Every later boot, before the kubelet: keep the node's credentials alive.
            let every = every_boot::Env {
                clock: &SystemClock,
                credentials_dir: args.env.credentials_path(),
                config: planned_cluster(&fs),
            };
            let env = image_upgrade::Env {
                clock: &SystemClock,
                host: &crate::host::LinuxHost,
                wait: args.upgrade_wait,
                patches: node_patches(&fs),
            };
            let mut checked = every_boot::run(&fs, &every).map(|rows| report.certs(&rows));
            if checked.is_ok() && image_upgrade::due(&fs) {
                let node = Node::new(&fs, &SystemClock, Some(&report));
                let worker = !image_upgrade::is_control_plane(&fs);
                checked = preload_images(&args, node, &image_upgrade::cri_socket(&fs), worker);
            }
            if let Err(e) = checked.and_then(|()| image_upgrade::run(&fs, &report, &env)) {
                failed(&fs, &report, &e);
                return Err(e);
            }
        }
        if args.stage == Stage::PostKubelet {
            // A control plane on the next image: upgraded now that its kubelet runs.
            let env = image_upgrade::Env {
                clock: &SystemClock,
                host: &crate::host::LinuxHost,
                wait: args.upgrade_wait,
                patches: node_patches(&fs),
            };
            if let Err(e) = image_upgrade_cp::run(&fs, &report, &env) {
                failed(&fs, &report, &e);
                return Err(e);
            }
        }
        // What the first boot decided, so a later boot's status says what this node is.
        if let Ok(p) = read_plan(&fs) {
            let role = if p.node.is_worker() { "worker" } else { "control-plane" };
            report.set(|s| {
                s.role = role.into();
                s.datasource = format!("{PLAN_FILE} (gathered by the first boot)");
            });
        }
        failure::clear(&fs);
        report.skipped("this node was bootstrapped by an earlier boot");
        return Ok(());
    }
    if args.stage == Stage::PreKubelet && crate::node::is_live(fs.root()) {
        crate::host::LinuxHost::warm_kubelet_version();
    }
    // Durable with the stage's first commit (a syncfs pair costs a first-boot VM 30-70 ms here).
    fs.write_unsynced(&attempts, attempt.to_string().as_bytes())?;
    let result = stage(&fs, &args, &report, &SystemClock, runner);
    match &result {
        Ok(()) => {
            // The done stamp, then the scrubbed plan, in one commit: each commit costs two
            // syncfs, which is most of a first boot's disk time. A cut between the renames
            // leaves the token in the 0600 plan, never a scrubbed plan without the stamp.
            fs.write(&done, b"")?;
            if args.stage == Stage::PreKubelet {
                image_upgrade::record_first_boot(&fs);
            }
            let last = last_stage(&fs, args.stage);
            let scrubbed = if last { scrub_plan(&fs)? } else { false };
            fs.commit()?;
            if scrubbed {
                info!("[boot] Scrubbed the bootstrap token from {PLAN_FILE}");
            }
            if last {
                fs.remove(&paths::GENERATED_TOKEN)?;
            }
            failure::clear(&fs);
            report.done();
        }
        Err(e) => failed(&fs, &report, e),
    }
    result
}

/// A failed stage: the status file, the error event, and the failure file for fleet managers.
fn failed(fs: &NodeFs, report: &Reporter, e: &Error) {
    report.failed(e);
    let f = failure::record(&report.snapshot(), e, &crate::logging::tail(), crate::status::now());
    failure::report(fs, &f);
}

fn stage(
    fs: &NodeFs,
    args: &BootArgs,
    report: &Reporter,
    clock: &dyn Clock,
    runner: &dyn script::Runner,
) -> Result<()> {
    let node = Node::new(fs, clock, Some(report));
    let (plan, gathered, resolved) = match args.stage {
        Stage::PreKubelet => {
            let pre = pre_kubelet_plan(fs, args, report, clock, runner)?;
            (pre.plan, Some(pre.gathered), pre.resolved)
        }
        Stage::PostKubelet => {
            report.set(|s| s.datasource = format!("{PLAN_FILE} (gathered by the pre-kubelet stage)"));
            (read_plan(fs)?, None, None)
        }
    };
    let BootPlan { node: node_plan, script: user_script } = plan;
    if args.stage == Stage::PreKubelet {
        let socket = match (&node_plan, &resolved) {
            (NodePlan::Init { .. }, Some(cfg)) => cfg.init.node_registration.cri_socket.clone(),
            (NodePlan::Join { join }, _) => join.node_registration.cri_socket.clone(),
            _ => String::new(),
        };
        let worker = node_plan.is_worker();
        preload_images(args, node, &socket, worker)?;
    }
    match node_plan {
        NodePlan::Init { docs, upload_certs, join_existing } => {
            report.set(|s| s.role = "control-plane".into());
            let cfg = match resolved {
                Some(cfg) => cfg,
                None => crate::config::resolve_init("user-data", docs, &crate::host::facts())?,
            };
            if let Some(g) = &gathered {
                existing::prepare_ca(fs, g, &cfg, join_existing.as_deref())?;
            }
            init_stage(args.stage, cfg, node, upload_certs)?;
        }
        NodePlan::Join { join } => join_stage(args, report, node, &join, user_script.as_ref())?,
    }
    if let (Stage::PostKubelet, Some(s)) = (args.stage, &user_script) {
        let mut progress = script::Progress::new(fs, args.stage.name())?;
        script::commands(fs, &s.after, runner, &mut progress, report)?;
    }
    Ok(())
}

/// Imports the image archives before the kubelet (and preflight's ImagePull check) looks for
/// its images. Without `ctr` there is no way in: said, and left to preflight and the kubelet. A
/// worker leaves the control plane's archives alone (under TCG each is over a minute's import).
fn preload_images(args: &BootArgs, node: Node<'_>, cri_socket: &str, worker: bool) -> Result<()> {
    let mut dirs: Vec<PathBuf> = args.image_dirs.iter().map(|d| node.fs.real(&d.to_string_lossy())).collect();
    // Held until the imports are done: a seed disk's images/ is read from its mount.
    let seed = crate::datasource::seed_images::find(&args.env)?;
    dirs.extend(seed.dirs.iter().cloned());
    if crate::images::archives(&dirs)?.is_empty() {
        return Ok(());
    }
    if let Some(r) = node.report {
        r.phase("images");
    }
    let Some(binary) = node.host.find_in_path("ctr") else {
        log::warn!(
            "[images] ctr (containerd's client) is not on PATH: the archives in {} are not preloaded",
            join_paths(&dirs)
        );
        return Ok(());
    };
    let socket = if cri_socket.is_empty() { crate::constants::DEFAULT_CRI_SOCKET } else { cri_socket };
    let ctr = crate::images::Ctr { binary, address: PathBuf::from(socket.trim_start_matches("unix://")) };
    // One import per CPU (at most 4): under TCG on two vCPUs, seven archives took 310 s one by one.
    let width = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
    let done = crate::images::preload(&dirs, &ctr, width, worker, &mut |p| {
        info!("[images] {} {}: {} ({} ms)", p.state, p.archive, p.images.join(", "), p.ms);
        if let Some(r) = node.report {
            r.image(p);
        }
    })?;
    let count = |s: &str| done.iter().filter(|p| p.state == s).count();
    let (imported, present) = (count("imported"), count("present"));
    let mut line = format!("[images] {} archives: {imported} imported, {present} already present", done.len());
    if worker {
        line.push_str(&format!(", {} not needed on a worker", count("not-needed")));
    }
    info!("{line}");
    Ok(())
}

fn join_paths(dirs: &[PathBuf]) -> String {
    dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// What the pre-kubelet stage gathered and decided, for the phases that follow.
struct PreKubelet {
    plan: BootPlan,
    gathered: Gathered,
    // Resolved once per stage: the existing-cluster check and the init phases share it.
    resolved: Option<InitConfig>,
}

/// Gathers the user-data, turns an init into a join when a cluster already answers, writes the
/// plan for the post-kubelet stage and runs the user-data's steps before the kubeadm line.
fn pre_kubelet_plan(
    fs: &NodeFs,
    args: &BootArgs,
    report: &Reporter,
    clock: &dyn Clock,
    runner: &dyn script::Runner,
) -> Result<PreKubelet> {
    report.phase("gather");
    let g = crate::datasource::detect(&args.env, args.datasource_timeout, clock)?;
    report.set(|s| s.datasource = g.source.clone());
    for n in &g.notices {
        info!("[gather] {n}");
    }
    let planned = plan_detailed(&g)?;
    for n in &planned.notices {
        log::warn!("[gather] {n}");
    }
    let mut p = BootPlan { node: planned.plan, script: planned.script };
    let mut resolved = None;
    if let NodePlan::Init { docs, join_existing, .. } = &p.node {
        let cfg = crate::config::resolve_init("user-data", docs.clone(), &crate::host::facts())?;
        let existing = join_existing.as_deref();
        match existing::decide(fs, &cfg, existing, crate::timeouts::EXISTING_CLUSTER_PROBE)? {
            Some(join) => p.node = NodePlan::Join { join },
            None => resolved = Some(cfg),
        }
    }
    let text = p.to_yaml().map_err(|e| Error::internal(format!("rendering {PLAN_FILE}: {e}")))?;
    fs.write(&PLAN_FILE, text.as_bytes())?;
    fs.commit()?;
    // Before any user command runs, as Afterburn's unit would be: bootcmd may source them.
    let line = metadata::write_metadata_files(fs, &crate::datasource::vars::Vars::new(&g))?;
    info!("[metadata] {line}");
    if let Some(s) = &p.script {
        let mut progress = script::Progress::new(fs, args.stage.name())?;
        script::commands(fs, &s.bootcmd, runner, &mut progress, report)?;
        script::write_files(fs, &s.files, &mut progress, report)?;
        script::commands(fs, &s.before, runner, &mut progress, report)?;
        info!("[runcmd] {}: performed by kubestrap", s.kubeadm);
    }
    Ok(PreKubelet { plan: p, gathered: g, resolved })
}

/// The init phases of this stage.
fn init_stage(stage: Stage, cfg: InitConfig, node: Node<'_>, upload_certs: bool) -> Result<()> {
    let mut ctx = InitContext::new(cfg, node, Vec::new());
    // The key came with the user-data: the console and journal need not show it again.
    ctx.upload = UploadCerts { enabled: upload_certs, certificate_key: None, skip_key_print: true };
    phases::check_skip(INIT_PHASES, "init", &ctx.cfg.init.skip_phases)?;
    let mut skip: Vec<String> = phases::outside(INIT_PHASES, stage).collect();
    skip.extend(ctx.cfg.init.skip_phases.iter().cloned());
    // The controller-manager's and scheduler's manifests follow the API server's answer (init::in_order).
    if crate::init::in_order::applies(&ctx, |p| phases::is_skipped(&ctx.cfg.init.skip_phases, p)) {
        match stage {
            Stage::PreKubelet => ctx.apiserver_first = true,
            Stage::PostKubelet => phases::run_init_phase(&ctx, &IN_ORDER)?,
        }
    }
    phases::run_init(&ctx, &skip)
}

/// The rest of the control-plane phase, as a boot's post-kubelet stage runs it.
const IN_ORDER: phases::Phase<phases::InitFn> = phases::Phase {
    name: "control-plane",
    about: "Write the controller-manager's and scheduler's manifests once the API server answers",
    stage: Stage::PostKubelet,
    commit: true,
    run: crate::init::in_order::run,
};

/// The join phases of this stage: all of a worker's run before the kubelet starts.
fn join_stage(
    args: &BootArgs,
    report: &Reporter,
    node: Node<'_>,
    join: &JoinConfiguration,
    user_script: Option<&Script>,
) -> Result<()> {
    let control_plane = join.control_plane.is_some();
    report.set(|s| s.role = if control_plane { "control-plane" } else { "worker" }.into());
    if args.stage == Stage::PreKubelet || control_plane {
        let configured = join.timeouts.as_ref().and_then(|t| t.discovery.as_ref()).is_some();
        let flags = JoinFlags {
            discovery_timeout: (!configured).then_some(crate::timeouts::BOOT_DISCOVERY),
            root: args.root.clone(),
            ..JoinFlags::default()
        };
        let ja = crate::join::resolve(&flags, join)?;
        phases::check_skip(JOIN_PHASES, "join", &join.skip_phases)?;
        let mut skip: Vec<String> = phases::outside(JOIN_PHASES, args.stage).collect();
        skip.extend(join.skip_phases.iter().cloned());
        phases::run_join(&JoinContext::on(&ja, node), &skip)?;
    } else {
        if node.acts() {
            watch_kubelet(node, report, join);
        }
        if user_script.is_none_or(|s| s.after.is_empty()) {
            info!("[boot] worker: nothing more to do after the kubelet starts");
        }
    }
    Ok(())
}

/// A worker's kubelet until its Node registers (see `kubelet_watch`): the time is in the timeline.
fn watch_kubelet(node: Node<'_>, report: &Reporter, join: &JoinConfiguration) {
    let name = crate::join::node_name(join);
    let Some(live) = kubelet_watch::Live::new(node.fs, &name) else { return };
    match kubelet_watch::watch(&live, node.clock, Some(report)) {
        kubelet_watch::Outcome::Ready => info!("[boot] The Node {name:?} is Ready"),
        kubelet_watch::Outcome::Restarted => {}
        kubelet_watch::Outcome::NotReady(m) => {
            info!("[boot] The Node {name:?} is registered, not Ready yet ({m}): the kubelet's business from here")
        }
        kubelet_watch::Outcome::NotRegistered => info!(
            "[boot] The kubelet had not registered the Node {name:?} after {} s: left to it (`journalctl -u kubelet`)",
            kubelet_watch::WATCH.as_secs()
        ),
    }
}

/// The plan the pre-kubelet stage wrote.
fn read_plan(fs: &NodeFs) -> Result<BootPlan> {
    let bytes = fs
        .read(&PLAN_FILE)?
        .ok_or_else(|| Error::bad_file(format!("{PLAN_FILE} is missing: the pre-kubelet stage has not run")))?;
    BootPlan::from_yaml(&bytes).map_err(|e| Error::bad_file(format!("{PLAN_FILE}: {e}")))
}

/// The patches directory this node was made with (its init's or join's `patches.directory`):
/// an upgrade by image applies it again, or a patched static Pod or kubelet config would lose
/// its patches with the next version.
fn node_patches(fs: &NodeFs) -> Option<String> {
    plan_patches(&read_plan(fs).ok()?.node)
}

fn plan_patches(plan: &NodePlan) -> Option<String> {
    let patches = match plan {
        NodePlan::Join { join } => join.patches.clone(),
        NodePlan::Init { docs, join_existing, .. } => docs
            .init
            .as_ref()
            .and_then(|i| i.patches.clone())
            .or_else(|| join_existing.as_ref().and_then(|j| j.patches.clone())),
    };
    patches.map(|p| p.directory).filter(|d| !d.is_empty())
}

/// The ClusterConfiguration this node made its cluster from (the boot plan of an init), for
/// the every-boot pass; `None` for a join or a plan that no longer resolves (said, not fatal).
fn planned_cluster(fs: &NodeFs) -> Option<InitConfig> {
    let NodePlan::Init { mut docs, .. } = read_plan(fs).ok()?.node else { return None };
    // The tokens and the certificate key were scrubbed once the node was done; renewal needs
    // neither.
    if let Some(init) = docs.init.as_mut() {
        init.bootstrap_tokens.clear();
        init.certificate_key.clear();
    }
    crate::config::resolve_init("user-data", docs, &crate::host::facts())
        .map_err(|e| log::warn!("[certs] {PLAN_FILE} no longer resolves ({e}); judging from the certificates"))
        .ok()
}

/// Is this the node's last stage? A worker is done before the kubelet starts unless its
/// user-data has commands after the join; a control plane always finishes after it.
fn last_stage(fs: &NodeFs, stage: Stage) -> bool {
    stage == Stage::PostKubelet
        || read_plan(fs).is_ok_and(|p| p.node.is_worker() && p.script.is_none_or(|s| s.after.is_empty()))
}

/// Once the node is bootstrapped, the bootstrap tokens kubestrap kept are no longer needed:
/// stages its copy of the user-data plan without them (the caller commits and removes the
/// generated-token file). True when there was something to scrub.
fn scrub_plan(fs: &NodeFs) -> Result<bool> {
    let Some(bytes) = fs.read(&PLAN_FILE)? else { return Ok(false) };
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let scrubbed = scrub_tokens(&text);
    if scrubbed == text {
        return Ok(false);
    }
    fs.write(&PLAN_FILE, scrubbed.as_bytes())?;
    Ok(true)
}

/// Replaces every `<id>.<secret>` bootstrap token in `text`.
/// Certificate keys (`certificateKey: <hex>` lines) go too: they open the kubeadm-certs Secret.
fn scrub_tokens(text: &str) -> String {
    let text = crate::token::replace_tokens(text, "scrubbed-after-bootstrap");
    let mut out: String = text
        .lines()
        .map(|l| match l.split_once("certificateKey: ") {
            Some((indent, _)) if indent.trim().is_empty() => {
                format!("{indent}certificateKey: scrubbed-after-bootstrap")
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// `text` (a command line, for the log) with its bootstrap tokens hidden.
pub(crate) fn hide_tokens(text: &str) -> String {
    crate::token::replace_tokens(text, "<token hidden>")
}

/// `kubestrap status`: the last run in words (or this boot's timeline); non-zero if it failed.
pub fn status(root: &Path, timeline: bool) -> Result<()> {
    let fs = NodeFs::new(root);
    match crate::status::read(&fs) {
        Some(s) => {
            if timeline {
                print!("{}", crate::status::describe_timeline(&s));
            } else {
                print!("{}", crate::status::describe(&s));
            }
            if s.state == "failed" {
                return Err(Error::failed(format!("the last kubestrap run failed: {}", s.last_error)));
            }
            Ok(())
        }
        None => Err(Error::failed(format!("no status at {} (kubestrap has not run since this boot)", paths::STATUS))),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_are_scrubbed_and_nothing_else() {
        let t = "token: abcdef.0123456789abcdef\nother: xabcdef.0123456789abcdefx\nü: ok";
        assert_eq!(super::scrub_tokens(t), "token: scrubbed-after-bootstrap\nother: xabcdef.0123456789abcdefx\nü: ok");
        let t = format!("a:\n  certificateKey: {}\n  xcertificateKey: 1\n", "0f".repeat(32));
        assert_eq!(super::scrub_tokens(&t), "a:\n  certificateKey: scrubbed-after-bootstrap\n  xcertificateKey: 1\n");
    }

    /// The every-boot pass reads the cluster's settings from the plan a finished boot scrubbed.
    #[test]
    fn a_scrubbed_init_plan_still_gives_the_cluster_settings() {
        let d = tempfile::tempdir().unwrap();
        let fs = crate::fsutil::NodeFs::new(d.path());
        let docs = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nbootstrapTokens:\n- token: abcdef.0123456789abcdef\n\
                    certificateKey: 0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f\n---\n\
                    apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\ncertificateValidityPeriod: 2160h\n\
                    encryptionAlgorithm: ECDSA-P256\n";
        let docs = crate::config::load::parse_documents("user-data", docs).unwrap();
        let plan = crate::userdata::BootPlan {
            node: crate::userdata::NodePlan::Init { docs, upload_certs: false, join_existing: None },
            script: None,
        };
        fs.write(&super::PLAN_FILE, super::scrub_tokens(&plan.to_yaml().unwrap()).as_bytes()).unwrap();
        fs.commit().unwrap();
        let cfg = super::planned_cluster(&fs).expect("the scrubbed plan resolves");
        assert_eq!(cfg.cert_validity, std::time::Duration::from_secs(2160 * 3600));
        assert_eq!(cfg.key_algorithm, crate::config::KeyAlgorithm::EcdsaP256);
    }

    /// An upgrade by image applies the patches the node was made with: its init's, its join's,
    /// or (a control plane that found its cluster up) the join it made instead.
    #[test]
    fn the_node_s_own_patches_directory_is_found_for_every_kind_of_plan() {
        use crate::userdata::NodePlan;
        let parse = |d: &str| crate::config::load::parse_documents("user-data", d).unwrap();
        let init =
            |patches: &str| parse(&format!("apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n{patches}"));
        let join = |patches: &str| {
            let docs = parse(&format!(
                "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    \
                 token: abcdef.0123456789abcdef\n    apiServerEndpoint: 10.0.0.1:6443\n    \
                 unsafeSkipCAVerification: true\n{patches}"
            ));
            docs.join.expect("a JoinConfiguration")
        };
        let dir = "patches:\n  directory: /etc/kubernetes/patches\n";
        let want = Some("/etc/kubernetes/patches".to_string());
        let plan = NodePlan::Init { docs: init(dir), upload_certs: false, join_existing: None };
        assert_eq!(super::plan_patches(&plan), want, "init's");
        let plan = NodePlan::Join { join: join(dir) };
        assert_eq!(super::plan_patches(&plan), want, "join's");
        let plan = NodePlan::Init { docs: init(""), upload_certs: true, join_existing: Some(Box::new(join(dir))) };
        assert_eq!(super::plan_patches(&plan), want, "the join a control plane made instead of init");
        let plan =
            NodePlan::Init { docs: init("patches:\n  directory: \"\"\n"), upload_certs: false, join_existing: None };
        assert_eq!(super::plan_patches(&plan), None, "an empty directory is none");
        let plan = NodePlan::Join { join: join("") };
        assert_eq!(super::plan_patches(&plan), None, "no patches");
    }
}

#[cfg(test)]
mod failure_tests;
