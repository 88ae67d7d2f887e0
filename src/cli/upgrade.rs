//! `kubestrap upgrade node` and `upgrade diff`.

use argh::FromArgs;
use std::path::PathBuf;

/// Upgrade this node as `kubeadm upgrade` does (apply, plan, node, diff).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "upgrade")]
pub struct Upgrade {
    #[argh(subcommand)]
    pub command: UpgradeCommand,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum UpgradeCommand {
    Apply(UpgradeApply),
    Plan(UpgradePlan),
    Node(UpgradeNode),
    Diff(UpgradeDiff),
}

/// Upgrade the cluster to a version from its first control plane, as `kubeadm upgrade apply` (phases: preflight, control-plane, upload-config, kubeconfig, kubelet-config, bootstrap-token, addon, post-upgrade).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "apply")]
pub struct UpgradeApply {
    #[argh(positional)]
    /// optional `phase NAME` (run only that phase, as `kubeadm upgrade apply phase NAME`), then the Kubernetes version to upgrade to (or apply.kubernetesVersion in --config)
    pub words: Vec<String>,
    #[argh(option)]
    /// an UpgradeConfiguration (kubeadm.k8s.io/v1beta4) file; its `apply` fields are defaults for the flags
    pub config: Option<PathBuf>,
    #[argh(switch, short = 'y')]
    /// do not ask for confirmation
    pub yes: bool,
    #[argh(switch, short = 'f')]
    /// go on past the skippable version rules, without asking
    pub force: bool,
    #[argh(switch)]
    /// change nothing: say what each phase would do
    pub dry_run: bool,
    #[argh(option)]
    /// the kubeconfig to talk to the cluster with (default admin.conf)
    pub kubeconfig: Option<PathBuf>,
    #[argh(option)]
    /// a directory of kubeadm patches (target[suffix][+patchtype].extension)
    pub patches: Option<String>,
    #[argh(option)]
    /// checks whose errors become warnings (comma-separated, repeatable; `all` for every check)
    pub ignore_preflight_errors: Vec<String>,
    #[argh(option)]
    /// phases to skip (comma-separated, repeatable)
    pub skip_phases: Vec<String>,
    #[argh(option)]
    /// renew the certificates of upgraded components (default true)
    pub certificate_renewal: Option<bool>,
    #[argh(option)]
    /// upgrade etcd (default true)
    pub etcd_upgrade: Option<bool>,
    #[argh(switch)]
    /// allow alpha, beta and release-candidate versions
    pub allow_experimental_upgrades: bool,
    #[argh(switch)]
    /// allow release-candidate versions
    pub allow_release_candidate_upgrades: bool,
    #[argh(switch)]
    /// print the ClusterConfiguration the upgrade uses (on stdout)
    pub print_config: bool,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// the node root (default /); under another root the kubelet is left alone
    pub root: PathBuf,
}

/// Show the versions the cluster runs and what `upgrade apply VERSION` would move each to, as `kubeadm upgrade plan` (changes nothing).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "plan")]
pub struct UpgradePlan {
    #[argh(positional)]
    /// the version to plan for (default plan.kubernetesVersion in --config, else this node's image's version; kubestrap never asks the internet)
    pub version: Option<String>,
    #[argh(option)]
    /// an UpgradeConfiguration (kubeadm.k8s.io/v1beta4) file; its `plan` fields are defaults for the flags
    pub config: Option<PathBuf>,
    #[argh(option)]
    /// the kubeconfig to talk to the cluster with (default admin.conf)
    pub kubeconfig: Option<PathBuf>,
    #[argh(option, short = 'o', default = "String::from(\"text\")")]
    /// output format: text, json or yaml (default text)
    pub output: String,
    #[argh(option)]
    /// list etcd's upgrade too (default true)
    pub etcd_upgrade: Option<bool>,
    #[argh(option)]
    /// checks whose errors become warnings (comma-separated, repeatable; `all` for every check)
    pub ignore_preflight_errors: Vec<String>,
    #[argh(switch)]
    /// list alpha, beta and release-candidate versions
    pub allow_experimental_upgrades: bool,
    #[argh(switch)]
    /// list release-candidate versions
    pub allow_release_candidate_upgrades: bool,
    #[argh(switch)]
    /// print the cluster's ClusterConfiguration (on stdout, before the plan)
    pub print_config: bool,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// the node root (default /)
    pub root: PathBuf,
}

/// Show what would change in this control plane's static Pod manifests at a version, as `kubeadm upgrade diff` (changes nothing).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "diff")]
pub struct UpgradeDiff {
    #[argh(positional)]
    /// the Kubernetes version to compare with (default the cluster's kubernetesVersion)
    pub version: Option<String>,
    #[argh(option)]
    /// an UpgradeConfiguration (kubeadm.k8s.io/v1beta4) file; its `diff` fields are defaults
    pub config: Option<PathBuf>,
    #[argh(option)]
    /// the kubeconfig to talk to the cluster with (default admin.conf)
    pub kubeconfig: Option<PathBuf>,
    #[argh(option, short = 'c')]
    /// how many lines of context in the diff (default 0, as kubeadm 1.37 applies it)
    pub context_lines: Option<usize>,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// the node root (default /)
    pub root: PathBuf,
}

/// Upgrade this node's kubelet configuration to the cluster's, as `kubeadm upgrade node` (phases: preflight, control-plane, kubeconfig, kubelet-config, addon, post-upgrade); the kubelet is not restarted.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "node")]
pub struct UpgradeNode {
    #[argh(positional)]
    /// optional `phase NAME`: run only that phase, as `kubeadm upgrade node phase NAME`
    pub words: Vec<String>,
    #[argh(option)]
    /// an UpgradeConfiguration (kubeadm.k8s.io/v1beta4) file; its `node` fields are defaults for the flags
    pub config: Option<PathBuf>,
    #[argh(switch)]
    /// change nothing: say what would be written
    pub dry_run: bool,
    #[argh(option)]
    /// the kubeconfig to talk to the cluster with (default kubelet.conf, admin.conf on a control plane)
    pub kubeconfig: Option<PathBuf>,
    #[argh(option)]
    /// a directory of kubeadm patches (target[suffix][+patchtype].extension)
    pub patches: Option<String>,
    #[argh(option)]
    /// checks whose errors become warnings (comma-separated, repeatable; `all` for every check)
    pub ignore_preflight_errors: Vec<String>,
    #[argh(option)]
    /// phases to skip (comma-separated, repeatable)
    pub skip_phases: Vec<String>,
    #[argh(option)]
    /// renew the certificates of upgraded components (default true; a control plane's)
    pub certificate_renewal: Option<bool>,
    #[argh(option)]
    /// upgrade etcd (default true; a control plane's)
    pub etcd_upgrade: Option<bool>,
    #[argh(option, default = "PathBuf::from(\"/\")")]
    /// the node root (default /); under another root the kubelet is left alone
    pub root: PathBuf,
}
