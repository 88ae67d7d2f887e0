//! `upgrade apply [version]` on a control plane, as kubeadm 1.37's: preflight (the version skew
//! policy, `--force` for the skippable rules, the question unless `-y`), control-plane (the static
//! Pod rollout, staticpods.rs), upload-config (kubeadm-config at the new version, kubelet-config),
//! kubeconfig, kubelet-config (this node's config.yaml), bootstrap-token (the RBAC rules), addon
//! (CoreDNS and kube-proxy once every API server runs the new version), post-upgrade (nothing in
//! 1.37). A dry run says what each phase would do and prints the new manifests.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Duration;

use log::info;

use super::cluster::{client_from, get_patiently};
use super::context::{View, Want};
use super::policy;
use crate::config::upgrade::UpgradeConfiguration;
use crate::config::values::Version;
use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::host::Host;
use crate::init::InitContext;
use crate::kube::Client;
use crate::objects;
use crate::paths::{self, ADMIN_CONF, KUBELET_CONF};
use crate::phases::{Phase, Stage};

/// `upgrade apply`'s flags, as given (`None`: not on the command line).
#[derive(Debug, Default, Clone)]
pub struct ApplyFlags {
    pub root: PathBuf,
    pub version: Option<String>,
    pub yes: bool,
    pub force: bool,
    pub dry_run: bool,
    pub kubeconfig: Option<PathBuf>,
    pub patches: Option<String>,
    pub ignore_preflight: Vec<String>,
    pub skip_phases: Vec<String>,
    pub certificate_renewal: Option<bool>,
    pub etcd_upgrade: Option<bool>,
    pub allow_experimental: bool,
    pub allow_rc: bool,
    pub print_config: bool,
}

/// The flags over the UpgradeConfiguration's `apply` fields (kubeadm's ValueFromFlagsOrConfig).
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyArgs {
    pub root: PathBuf,
    pub version: String,
    pub yes: bool,
    pub force: bool,
    pub dry_run: bool,
    pub kubeconfig: Option<PathBuf>,
    pub patches: Option<String>,
    pub ignore_preflight: Vec<String>,
    pub skip_phases: Vec<String>,
    pub certificate_renewal: bool,
    pub etcd_upgrade: bool,
    pub allow_experimental: bool,
    pub allow_rc: bool,
    /// `apply.imagePullPolicy` (or `node.`'s): the prepull's, over the node's own.
    pub image_pull_policy: String,
    /// `--print-config` / `apply.printConfig`.
    pub print_config: bool,
    /// `timeouts.upgradeManifests` (5m).
    pub upgrade_manifests: Duration,
    /// `upgrade node` on a control plane: the cluster's version, no policy, no upload.
    pub node: bool,
}

impl ApplyArgs {
    /// A control plane's `upgrade node`: its flags, at the cluster's version, asking nothing.
    pub(super) fn for_node(n: &super::NodeArgs) -> ApplyArgs {
        ApplyArgs {
            root: n.root.clone(),
            version: String::new(),
            yes: true,
            force: false,
            dry_run: n.dry_run,
            kubeconfig: n.kubeconfig.clone(),
            patches: n.patches.clone(),
            ignore_preflight: n.ignore_preflight.clone(),
            skip_phases: n.skip_phases.clone(),
            certificate_renewal: n.certificate_renewal,
            etcd_upgrade: n.etcd_upgrade,
            allow_experimental: false,
            allow_rc: false,
            image_pull_policy: n.image_pull_policy.clone(),
            print_config: false,
            upgrade_manifests: n.upgrade_manifests,
            node: true,
        }
    }

    pub fn resolve(f: ApplyFlags, cfg: Option<&UpgradeConfiguration>) -> Result<ApplyArgs> {
        let a = cfg.and_then(|c| c.apply.clone()).unwrap_or_default();
        let version = f.version.or(a.kubernetes_version).filter(|v| !v.is_empty()).ok_or_else(|| {
            Error::bad_flag(
                "missing one or more required arguments: [version] (or apply.kubernetesVersion in --config)",
            )
        })?;
        let mut ignore = f.ignore_preflight;
        ignore.extend(a.ignore_preflight_errors);
        ignore.sort();
        ignore.dedup();
        let upgrade_manifests = super::upgrade_manifests(cfg)?;
        let image_pull_policy = crate::config::upgrade::image_pull_policy("apply", a.image_pull_policy.as_deref())
            .map_err(Error::bad_config)?;
        Ok(ApplyArgs {
            root: f.root,
            version,
            yes: f.yes,
            force: f.force || a.force_upgrade.unwrap_or(false),
            dry_run: f.dry_run || a.dry_run.unwrap_or(false),
            kubeconfig: f.kubeconfig,
            patches: f.patches.or(a.patches.map(|p| p.directory)).filter(|d| !d.is_empty()),
            ignore_preflight: ignore,
            skip_phases: if f.skip_phases.is_empty() { a.skip_phases } else { f.skip_phases },
            certificate_renewal: f.certificate_renewal.or(a.certificate_renewal).unwrap_or(true),
            etcd_upgrade: f.etcd_upgrade.or(a.etcd_upgrade).unwrap_or(true),
            allow_experimental: f.allow_experimental || a.allow_experimental_upgrades.unwrap_or(false),
            allow_rc: f.allow_rc || a.allow_rc_upgrades.unwrap_or(false),
            image_pull_policy,
            print_config: f.print_config || a.print_config.unwrap_or(false),
            upgrade_manifests,
            node: false,
        })
    }
}

/// What the phases share. The configuration is resolved at the target version after preflight
/// (whose version rules come first, as kubeadm's, before anything is rendered at it).
pub struct ApplyRun<'a> {
    pub args: &'a ApplyArgs,
    fs: &'a NodeFs,
    view: View,
    target: Version,
    /// The run's client (admin.conf or --kubeconfig) until the context takes it.
    client: Option<Client>,
    ctx: Option<InitContext<'a>>,
    pub host: &'a dyn Host,
    pub live: bool,
    pub stamp: String,
    pub input: &'a mut dyn BufRead,
}

impl<'a> ApplyRun<'a> {
    fn client(&self) -> Result<&Client> {
        match (&self.ctx, &self.client) {
            (Some(ctx), _) => ctx.admin(),
            (None, Some(c)) => Ok(c),
            (None, None) => Err(Error::internal("upgrade apply: no client")),
        }
    }

    /// The context at the target version, made once.
    fn resolve(&mut self) -> Result<()> {
        if self.ctx.is_some() {
            return Ok(());
        }
        let cfg = self.view.resolve(Some(self.target.to_string()))?;
        let node = crate::node::Node::new(self.fs, &crate::clock::SystemClock, None);
        let ctx = InitContext::new(cfg, node, self.args.ignore_preflight.clone());
        // The phases and the add-on writers share this client; its rights are the caller's.
        if let Some(c) = self.client.take() {
            let _ = ctx.admin_client.set(c);
        }
        ctx.admin_bound.set(true);
        self.ctx = Some(ctx);
        Ok(())
    }

    fn ctx(&self) -> Result<&InitContext<'a>> {
        self.ctx.as_ref().ok_or_else(|| Error::internal("upgrade apply: the configuration was not resolved"))
    }
}

pub(crate) type ApplyFn = fn(&mut ApplyRun) -> Result<()>;

/// kubeadm 1.37's `upgrade apply` phases, in its order (`kubeconfig` is hidden in kubeadm's help).
#[rustfmt::skip]
pub const APPLY_PHASES: &[Phase<ApplyFn>] = &[
    Phase { name: "preflight", about: "Run preflight checks before upgrade", stage: Stage::PostKubelet, commit: true, run: preflight },
    Phase { name: "control-plane", about: "Upgrade the control plane", stage: Stage::PostKubelet, commit: true, run: control_plane },
    Phase { name: "upload-config/kubeadm", about: "Upload the kubeadm ClusterConfiguration to a ConfigMap", stage: Stage::PostKubelet, commit: true, run: upload_kubeadm },
    Phase { name: "upload-config/kubelet", about: "Upload the kubelet configuration to a ConfigMap", stage: Stage::PostKubelet, commit: true, run: upload_kubelet },
    Phase { name: "kubeconfig", about: "Upgrade kubeconfig files for this node", stage: Stage::PostKubelet, commit: true, run: kubeconfig },
    Phase { name: "kubelet-config", about: "Upgrade the kubelet configuration for this node", stage: Stage::PostKubelet, commit: true, run: kubelet_config },
    Phase { name: "bootstrap-token", about: "Configures bootstrap token and cluster-info RBAC rules", stage: Stage::PostKubelet, commit: true, run: bootstrap_token },
    Phase { name: "addon/coredns", about: "Upgrade the CoreDNS addon", stage: Stage::PostKubelet, commit: true, run: addon_coredns },
    Phase { name: "addon/kube-proxy", about: "Upgrade the kube-proxy addon", stage: Stage::PostKubelet, commit: true, run: addon_kube_proxy },
    Phase { name: "post-upgrade", about: "Run post upgrade tasks", stage: Stage::PostKubelet, commit: true, run: post_upgrade },
];

/// `kubestrap upgrade apply`: on a control plane only; reads the cluster, runs the phases.
pub fn run_apply(
    args: &ApplyArgs,
    fs: &NodeFs,
    host: &dyn Host,
    now: time::OffsetDateTime,
    input: &mut dyn BufRead,
) -> Result<()> {
    crate::phases::check_skip(APPLY_PHASES, "upgrade apply", &args.skip_phases)?;
    let target =
        Version::parse(&args.version).map_err(|e| Error::bad_flag(format!("the version {:?}: {e}", args.version)))?;
    if !fs.exists(paths::manifest("kube-apiserver")) {
        return Err(Error::bad_flag(format!(
            "{} does not exist: `upgrade apply` runs on a control plane (on a worker, run `kubestrap upgrade node`)",
            paths::manifest("kube-apiserver")
        )));
    }
    let mut run = ApplyRun::start(args, fs, host, now, input, Some(target.clone()))?;
    let mut print = args.print_config;
    for p in APPLY_PHASES.iter().filter(|p| !crate::phases::is_skipped(&args.skip_phases, p.name)) {
        if p.name != "preflight" {
            run.resolve()?;
            // Once the configuration is resolved at the target, after the version rules.
            if std::mem::take(&mut print) {
                let cm = objects::configmaps::kubeadm_config(&run.ctx()?.cfg)?;
                print_configuration(cm["data"]["ClusterConfiguration"].as_str().unwrap_or_default())?;
            }
        }
        super::lease::fence(p.name)?;
        run.phase(p.name, p.run)?;
    }
    if args.dry_run {
        info!("[upgrade/successful] Finished dryrunning successfully!");
        return Ok(());
    }
    info!("");
    info!("[upgrade] SUCCESS! A control plane node of your cluster was upgraded to \"{target}\".");
    info!("");
    info!("[upgrade] Now please proceed with upgrading the rest of the nodes by following the right order.");
    Ok(())
}

/// kubeadm's printConfiguration: a header, then the ClusterConfiguration's lines, each after a
/// tab, on stdout.
pub(super) fn print_configuration(cluster_configuration: &str) -> Result<()> {
    let mut text = String::from("[upgrade/config] Configuration used:\n");
    for line in cluster_configuration.lines() {
        text.push_str(&format!("\t{line}\n"));
    }
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).map_err(|e| Error::failed(format!("writing to stdout: {e}")))
}

/// `upgrade node` on a control plane, as kubeadm's: this node's static Pods at the cluster's
/// `kubernetesVersion` (which `upgrade apply` set), its kubelet.conf and config.yaml, and the
/// add-ons once every API server runs the new image (so the last control plane upgrades them).
pub fn run_node_control_plane(args: &ApplyArgs, fs: &NodeFs, host: &dyn Host, now: time::OffsetDateTime) -> Result<()> {
    let mut no_input = std::io::empty();
    let mut run = ApplyRun::start(args, fs, host, now, &mut no_input, None)?;
    let phases: [(&str, ApplyFn); 7] = [
        ("preflight", node_preflight),
        ("control-plane", control_plane),
        ("kubeconfig", kubeconfig),
        ("kubelet-config", kubelet_config),
        ("addon/coredns", addon_coredns),
        ("addon/kube-proxy", addon_kube_proxy),
        ("post-upgrade", post_upgrade),
    ];
    for (name, f) in phases.into_iter().filter(|(n, _)| !crate::phases::is_skipped(&args.skip_phases, n)) {
        run.resolve()?;
        super::lease::fence(name)?;
        run.phase(name, f)?;
    }
    if args.dry_run {
        info!("[upgrade/successful] Finished dryrunning successfully!");
    } else {
        info!("[upgrade] The control plane instance for this node was successfully upgraded to \"{}\"", run.target);
    }
    Ok(())
}

impl<'a> ApplyRun<'a> {
    /// Reads the cluster; `target` None: the cluster's own `kubernetesVersion`.
    fn start(
        args: &'a ApplyArgs,
        fs: &'a NodeFs,
        host: &'a dyn Host,
        now: time::OffsetDateTime,
        input: &'a mut dyn BufRead,
        target: Option<Version>,
    ) -> Result<ApplyRun<'a>> {
        let admin = fs.real(ADMIN_CONF.as_str());
        let client = client_from(fs, args.kubeconfig.as_deref().unwrap_or(&admin))?;
        info!("[upgrade] Reading configuration from the \"kubeadm-config\" ConfigMap in namespace \"kube-system\"...");
        info!("[upgrade] Use 'kubeadm init phase upload-config kubeadm --config your-config-file' to re-upload it.");
        let want = Want { version: None, patches: args.patches.as_deref(), component_configs: true };
        let view = super::context::fetch(fs, &client, &want)?;
        let target = match target {
            Some(t) => t,
            None => {
                let v = view.cluster_version()?;
                Version::parse(&v).map_err(|e| {
                    Error::cluster(format!("the kubeadm-config ConfigMap's kubernetesVersion {v:?}: {e}"))
                })?
            }
        };
        Ok(ApplyRun {
            args,
            fs,
            view,
            target,
            client: Some(client),
            ctx: None,
            host,
            live: crate::node::is_live(fs.root()),
            stamp: crate::pki::check::file_stamp(now),
            input,
        })
    }

    fn phase(&mut self, name: &str, f: ApplyFn) -> Result<()> {
        let fs = self.fs;
        f(self).and_then(|()| Ok(fs.commit()?)).map_err(|e| {
            fs.discard();
            e.context(format_args!("phase {name}"))
        })
    }
}

fn node_preflight(r: &mut ApplyRun) -> Result<()> {
    info!("[upgrade/preflight] Running pre-flight checks");
    host_checks(r)?;
    if r.args.dry_run {
        info!("[upgrade/preflight] Would pull the required images (like 'kubeadm config images pull')");
        return Ok(());
    }
    pull_images(r)
}

/// kubeadm's prepull (RunPullImagesCheck) of the target version's images, on this machine's
/// runtime: an image that is neither preloaded nor pullable stops the upgrade here, before any
/// manifest changes, instead of a rollback after `upgradeManifests`. Under `--root` the
/// runtime is not the node's: skipped, as the other host checks.
fn pull_images(r: &mut ApplyRun) -> Result<()> {
    if !r.live {
        return Ok(());
    }
    info!("[upgrade/preflight] Pulling images required for setting up a Kubernetes cluster");
    info!("[upgrade/preflight] This might take a minute or two, depending on the speed of your internet connection");
    info!("[upgrade/preflight] You can also perform this action beforehand using 'kubeadm config images pull'");
    r.resolve()?;
    let mut input = crate::preflight::Input::control_plane(&r.ctx()?.cfg, r.fs.root());
    // kubeadm's prepull takes the UpgradeConfiguration's policy, not the node's.
    input.image_pull_policy = r.args.image_pull_policy.clone();
    let report = crate::preflight::run_only(r.host, &input, &r.args.ignore_preflight, &["ImagePull"]);
    Ok(crate::preflight::enforce(&report)?)
}

fn host_checks(r: &ApplyRun) -> Result<()> {
    if r.live {
        super::host_checks(r.host, r.fs.root(), (r.view.node_name(), r.view.cri_socket()), &r.args.ignore_preflight)?;
    }
    Ok(())
}

fn preflight(r: &mut ApplyRun) -> Result<()> {
    info!("[upgrade/preflight] Running preflight checks");
    host_checks(r)?;
    super::dns_preflight::check(r.client()?, &r.args.ignore_preflight)?;
    check_health(r.fs, r.client()?, &r.args.ignore_preflight)?;
    let target = r.target.clone();
    info!("[upgrade/preflight] You have chosen to upgrade the cluster version to \"{target}\"");
    let cluster = cluster_version(r.client()?)?;
    info!("[upgrade/versions] Cluster version: {cluster}");
    info!(
        "[upgrade/versions] kubeadm version: v1.{} (kubestrap {})",
        crate::constants::MAX_MINOR,
        env!("CARGO_PKG_VERSION")
    );
    let kubelets = kubelet_versions(r.client()?);
    let kubelets = kubelets.as_deref().map_err(String::clone);
    let skew = policy::enforce(&target, &cluster, kubelets, r.args.allow_experimental, r.args.allow_rc);
    if !skew.mandatory.is_empty() {
        return Err(Error::bad_flag(format!(
            "the version argument is invalid due to these fatal errors:\n\n{}\nPlease fix the misalignments highlighted above and try upgrading again",
            policy::format(&skew.mandatory)
        )));
    }
    if !skew.skippable.is_empty() {
        if !r.args.force {
            return Err(Error::bad_flag(format!(
                "the version argument is invalid due to these errors:\n\n{}\nCan be bypassed if you pass the --force flag",
                policy::format(&skew.skippable)
            )));
        }
        info!(
            "[upgrade/preflight] Found {} potential version compatibility errors but skipping since the --force flag is set: \n\n{}",
            skew.skippable.len(),
            policy::format(&skew.skippable)
        );
    }
    if !(r.args.yes || r.args.force || r.args.dry_run) {
        let mut out = std::io::stdout().lock();
        write!(out, "[upgrade] Are you sure you want to proceed? [y/N]: ")
            .and_then(|()| out.flush())
            .map_err(|e| Error::failed(format!("writing to stdout: {e}")))?;
        let mut answer = String::new();
        r.input.read_line(&mut answer).map_err(|e| Error::failed(format!("reading the answer from stdin: {e}")))?;
        if !matches!(answer.trim(), "y" | "Y") {
            return Err(Error::failed(
                "won't proceed; the user didn't answer (Y|y) in order to continue (use -y or --force to skip the question)",
            ));
        }
    }
    if r.args.dry_run {
        info!("[dryrun] Would pull the required images (like 'kubeadm config images pull')");
        return Ok(());
    }
    pull_images(r)
}

/// kubeadm's CheckClusterHealth, less its test Job: every control-plane Node Ready
/// (ControlPlaneNodesReady) and the three manifests on this node (StaticPodManifest).
pub(super) fn check_health(fs: &NodeFs, client: &Client, ignore: &[String]) -> Result<()> {
    let ignored = |name: &str| ignore.iter().any(|i| i == "all" || i.eq_ignore_ascii_case(name));
    let (mut lines, mut names) = (Vec::new(), Vec::new());
    let not_ready = not_ready_control_planes(client)?;
    if !not_ready.is_empty() && !ignored("ControlPlaneNodesReady") {
        lines.push(format!(
            "\t[ERROR ControlPlaneNodesReady]: there are NotReady control-planes in the cluster: {not_ready:?}"
        ));
        names.push("ControlPlaneNodesReady".to_string());
    }
    let missing: Vec<String> = super::diff::COMPONENTS
        .iter()
        .map(|c| paths::manifest(c))
        .filter(|m| !fs.exists(m))
        .map(|m| m.as_str().to_string())
        .collect();
    if !missing.is_empty() && !ignored("StaticPodManifest") {
        lines.push(format!("\t[ERROR StaticPodManifest]: manifest files not found: [{}]", missing.join(" ")));
        names.push("StaticPodManifest".to_string());
    }
    if lines.is_empty() {
        return Ok(());
    }
    Err(crate::preflight::PreflightError { lines, names }.into())
}

/// The control-plane Nodes that are not Ready.
pub(super) fn not_ready_control_planes(client: &Client) -> Result<Vec<String>> {
    // Patient: after a reboot onto a new image the API server behind the endpoint may be restarting.
    let nodes = super::cluster::list_patiently(
        client,
        "/api/v1/nodes?labelSelector=node-role.kubernetes.io%2Fcontrol-plane",
        "listing the control-plane Nodes",
    )?;
    Ok(nodes
        .iter()
        .filter(|n| {
            !n["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
        })
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect())
}

fn cluster_version(client: &Client) -> Result<Version> {
    let v = get_patiently(client, "/version", "reading the cluster version")?.unwrap_or_default();
    let s = v["gitVersion"].as_str().unwrap_or_default();
    Version::parse(s).map_err(|e| {
        Error::cluster(format!(
            "the version argument is invalid due to these fatal errors:\n\n\t- Unable to fetch cluster version: {s:?}: {e}\n"
        ))
    })
}

/// The Nodes' kubelet versions as reported, or why they could not be listed (a skippable
/// policy error, as kubeadm's).
fn kubelet_versions(client: &Client) -> std::result::Result<Vec<String>, String> {
    let nodes = super::cluster::list_patiently(client, "/api/v1/nodes", "listing the Nodes").map_err(|e| e.message)?;
    let mut vs: Vec<String> = nodes
        .iter()
        .map(|n| n["status"]["nodeInfo"]["kubeletVersion"].as_str().unwrap_or_default().to_string())
        .collect();
    vs.sort();
    vs.dedup();
    Ok(vs)
}

fn control_plane(r: &mut ApplyRun) -> Result<()> {
    let version = r.ctx()?.cfg.version.to_string();
    if r.args.dry_run {
        info!("[dryrun] Would upgrade your static Pod-hosted control plane to version {version:?}");
        for (name, pod) in crate::init::control_plane::pods(r.ctx()?, true)? {
            info!("[dryrun] Would write file {:?} with content:", paths::manifest(name).as_str());
            for line in crate::manifests::pod::to_yaml(&pod)?.lines() {
                info!("\t{line}");
            }
        }
        return Ok(());
    }
    if r.args.node {
        info!(
            "[upgrade/control-plane] Upgrading your Static Pod-hosted control plane instance to version {version:?}..."
        );
    } else {
        info!(
            "[upgrade/control-plane] Upgrading your static Pod-hosted control plane to version {version:?} (timeout: {})...",
            crate::config::values::go_duration(r.args.upgrade_manifests)
        );
    }
    let rollout = super::staticpods::Rollout {
        ctx: r.ctx()?,
        client: r.ctx()?.admin()?,
        etcd_upgrade: r.args.etcd_upgrade,
        renew_certs: r.args.certificate_renewal,
        timeout: r.args.upgrade_manifests,
        stamp: r.stamp.clone(),
    };
    rollout.run().map_err(|e| e.context("couldn't complete the static pod upgrade"))?;
    info!("[upgrade/control-plane] The control plane instance for this node was successfully upgraded!");
    Ok(())
}

fn apply_objects(r: &ApplyRun, tag: &str, objs: &[serde_json::Value]) -> Result<()> {
    for o in objs {
        r.ctx()?.apply(r.ctx()?.admin()?, tag, o)?;
    }
    Ok(())
}

fn upload_kubeadm(r: &mut ApplyRun) -> Result<()> {
    if r.args.dry_run {
        info!("[dryrun] Would upload the kubeadm ClusterConfiguration to a ConfigMap");
        return Ok(());
    }
    info!(
        "[upload-config] Storing the configuration used in ConfigMap \"kubeadm-config\" in the \"kube-system\" Namespace"
    );
    // Only data.ClusterConfiguration changes: other keys, labels and annotations stay, as
    // kubeadm's CreateOrMutateConfigMap keeps them.
    let cm = objects::configmaps::kubeadm_config(&r.ctx()?.cfg)?;
    let ctx = r.ctx()?;
    let (client, what) = (ctx.admin()?, "storing data.ClusterConfiguration of ConfigMap kube-system/kubeadm-config");
    ctx.retry(what, "upload-config", ctx.cfg.api_call_timeout)
        .run(|| crate::kube::ApiError::attempt::<_, Error>(client.create_or_set_data(&cm)))?;
    apply_objects(r, "upload-config", &objects::rbac::upload_config_rbac().into_iter().take(2).collect::<Vec<_>>())
}

fn upload_kubelet(r: &mut ApplyRun) -> Result<()> {
    if r.args.dry_run {
        info!("[dryrun] Would upload the kubelet configuration to a ConfigMap");
        info!("[dryrun] Would write the CRISocket annotation for the control-plane node");
        return Ok(());
    }
    info!(
        "[kubelet] Creating a ConfigMap \"kubelet-config\" in namespace kube-system with the configuration for the kubelets in the cluster"
    );
    let mut objs = vec![objects::configmaps::kubelet_config_map(&r.ctx()?.cfg)?];
    objs.extend(objects::rbac::upload_config_rbac().into_iter().skip(2));
    apply_objects(r, "upload-config", &objs)
}

/// kubeadm's UpdateKubeletKubeconfigServer: a kubelet.conf that talks to the
/// controlPlaneEndpoint (not this node's API server) is pointed at the local one, and the
/// kubelet restarted.
fn kubeconfig(r: &mut ApplyRun) -> Result<()> {
    let fs = r.ctx()?.node.fs;
    let cfg = &r.ctx()?.cfg;
    if let Some(bytes) = fs.read(KUBELET_CONF.as_str())? {
        let mut kc =
            crate::kubeconfig::Kubeconfig::parse(&bytes).map_err(|m| Error::bad_file(format!("{KUBELET_CONF} {m}")))?;
        let (cpe, local) = (cfg.endpoint.url(), cfg.local_endpoint.url());
        let name = kc.contexts.iter().find(|c| c.name == kc.current_context).map(|c| c.context.cluster.clone());
        let current = kc.clusters.iter_mut().find(|c| Some(&c.name) == name.as_ref());
        if let Some(cluster) = current.filter(|c| c.cluster.server == cpe && cpe != local) {
            if r.args.dry_run {
                info!("[dryrun] Would change the server of {KUBELET_CONF} from {cpe} to {local}");
            } else {
                cluster.cluster.server = local.clone();
                let text = kc.to_yaml().map_err(|e| Error::internal(format!("rendering {KUBELET_CONF}: {e}")))?;
                fs.write(&crate::paths::KUBELET_CONF, text.as_bytes())?;
                fs.commit()?;
                info!("[upgrade/kubeconfig] Updating the server of {KUBELET_CONF} to {local}");
                if r.live {
                    crate::systemd::restart_kubelet();
                }
            }
        }
    }
    info!("[upgrade/kubeconfig] The kubeconfig files for this node were successfully upgraded!");
    Ok(())
}

fn kubelet_config(r: &mut ApplyRun) -> Result<()> {
    let cfg = &r.ctx()?.cfg;
    let yaml = objects::kubelet::config_yaml(cfg)?;
    let cri = cfg.init.node_registration.cri_socket.clone();
    let fs = if r.args.dry_run { &NodeFs::dry_run(r.ctx()?.node.fs.root()) } else { r.ctx()?.node.fs };
    super::node::write_kubelet_config(fs, &r.stamp, &cri, &yaml, r.args.patches.as_deref())?;
    if r.args.dry_run {
        for f in fs.planned() {
            info!("[dryrun] Would write file {:?}", f.path);
        }
    }
    Ok(())
}

fn bootstrap_token(r: &mut ApplyRun) -> Result<()> {
    if r.args.dry_run {
        info!("[dryrun] Would configure bootstrap token and cluster-info RBAC rules");
        return Ok(());
    }
    info!("[upgrade/bootstrap-token] Configuring bootstrap token and cluster-info RBAC rules");
    let mut objs = objects::rbac::bootstrap_token_rbac();
    objs.extend(objects::rbac::cluster_info_rbac());
    apply_objects(r, "bootstrap-token", &objs)
}

/// The control planes whose API server does not run this node's (new) kube-apiserver image.
fn unupgraded(r: &ApplyRun) -> Result<Vec<String>> {
    let mine = r.ctx()?.cfg.image("kube-apiserver");
    let pods = r
        .client()?
        .list("/api/v1/namespaces/kube-system/pods?labelSelector=component%3Dkube-apiserver")
        .map_err(|e| {
            Error::cluster(format!(
                "failed to determine whether all the control plane instances have been upgraded: {e}"
            ))
        })?;
    let mut out: Vec<String> = pods
        .iter()
        .filter(|p| {
            let image = p["spec"]["containers"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["name"] == "kube-apiserver"))
                .and_then(|c| c["image"].as_str());
            image != Some(mine.as_str())
        })
        .filter_map(|p| p["spec"]["nodeName"].as_str().map(str::to_string))
        .collect();
    out.sort();
    Ok(out)
}

fn addon(r: &ApplyRun, name: &str, disabled: bool, apply: fn(&InitContext) -> Result<()>) -> Result<()> {
    if disabled {
        info!("[upgrade/addon] Skipping the addon/{name} phase. The addon is disabled.");
        return Ok(());
    }
    if r.args.dry_run {
        info!("[dryrun] Would upgrade the {name} addon");
        return Ok(());
    }
    let left = unupgraded(r)?;
    if !left.is_empty() {
        info!(
            "[upgrade/addon] Skipping upgrade of addons because control plane instances [{}] have not been upgraded",
            left.join(" ")
        );
        return Ok(());
    }
    apply(r.ctx()?)
}

fn addon_coredns(r: &mut ApplyRun) -> Result<()> {
    addon(r, "coredns", r.ctx()?.cfg.cluster.dns.disabled, crate::init::addons::coredns)
}

fn addon_kube_proxy(r: &mut ApplyRun) -> Result<()> {
    addon(r, "kube-proxy", r.ctx()?.cfg.cluster.proxy.disabled, crate::init::addons::kube_proxy)
}

/// kubeadm 1.37's post-upgrade removes no kubelet flag (its list is empty): nothing to do.
fn post_upgrade(_: &mut ApplyRun) -> Result<()> {
    Ok(())
}
