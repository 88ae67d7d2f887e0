//! `kubestrap upgrade`: kubeadm 1.37's `upgrade` commands on a node kubestrap or kubeadm built.
//! `upgrade apply` (the first control plane: the version policy, the static Pod rollout, the
//! cluster's configuration and add-ons), `upgrade node` (a control plane's static Pods at the
//! cluster's version; on every node config.yaml from the cluster's kubelet-config, the old one
//! backed up), `upgrade diff` and `upgrade plan`.

mod apply;
mod backups;
mod by_image;
mod cluster;
mod context;
pub mod corefile;
mod diff;
mod dns_preflight;
mod etcd;
/// One control plane at a time: the upgrade Lease (public for the real API server's tests of it).
pub mod lease;
mod node;
mod plan;
mod policy;
mod staticpods;

use std::path::PathBuf;

use crate::config::upgrade::{UpgradeConfiguration, UpgradeNodeConfiguration};
use crate::config::{Reads, parse_documents_for};
use crate::error::{Error, Result};

pub use apply::{APPLY_PHASES, ApplyArgs, ApplyFlags, run_apply};
pub use by_image::control_plane_by_image;
pub use diff::{DiffArgs, run_diff};
pub use node::{NODE_PHASES, run_node};
pub use plan::{PlanArgs, run_plan};

/// kubeadm's upgrade host checks (root, SystemVerification, ContainerRuntimeVersion) on a live node.
pub(crate) fn host_checks(
    host: &dyn crate::host::Host,
    root: &std::path::Path,
    (node_name, cri_socket): (&str, &str),
    ignore: &[String],
) -> Result<()> {
    let input = crate::preflight::Input::worker(root, node_name.to_string(), Some(cri_socket.to_string()), None);
    let names = ["IsPrivilegedUser", "SystemVerification", "ContainerRuntimeVersion"];
    Ok(crate::preflight::enforce(&crate::preflight::run_only(host, &input, ignore, &names))?)
}

/// A client on this node's own credential (kubelet.conf).
pub(crate) fn kubelet_client(fs: &crate::fsutil::NodeFs) -> Result<crate::kube::Client> {
    cluster::client_from(fs, &fs.real(crate::paths::KUBELET_CONF.as_str()))
}

/// The version of the kubelet that last ran on this node, as its Node reports it (one try).
pub(crate) fn reported_kubelet_version(fs: &crate::fsutil::NodeFs) -> Result<crate::config::values::Version> {
    let client = kubelet_client(fs)?;
    let name = cluster::node_name(&client)?;
    let node = client
        .get(&format!("/api/v1/nodes/{name}"))
        .map_err(|e| Error::cluster(format!("reading the Node {name:?}: {e}")))?
        .ok_or_else(|| Error::cluster(format!("the Node {name:?} does not exist")))?;
    let v = node["status"]["nodeInfo"]["kubeletVersion"].as_str().unwrap_or_default();
    crate::config::values::Version::parse(v)
        .map_err(|e| Error::cluster(format!("the Node {name:?}'s status.nodeInfo.kubeletVersion {v:?}: {e}")))
}

/// `upgrade node`'s flags, as given (`None`: not on the command line).
#[derive(Debug, Default, Clone)]
pub struct NodeFlags {
    pub root: PathBuf,
    pub dry_run: bool,
    pub kubeconfig: Option<PathBuf>,
    pub patches: Option<String>,
    pub ignore_preflight: Vec<String>,
    pub skip_phases: Vec<String>,
    pub certificate_renewal: Option<bool>,
    pub etcd_upgrade: Option<bool>,
}

/// What `upgrade node` does: the flags over the UpgradeConfiguration's `node` fields, as
/// kubeadm's ValueFromFlagsOrConfig (a flag given wins; preflight ignores are the union).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeArgs {
    pub root: PathBuf,
    pub dry_run: bool,
    pub kubeconfig: Option<PathBuf>,
    pub patches: Option<String>,
    pub ignore_preflight: Vec<String>,
    pub skip_phases: Vec<String>,
    pub certificate_renewal: bool,
    pub etcd_upgrade: bool,
    /// `node.imagePullPolicy` (IfNotPresent): a control plane's prepull.
    pub image_pull_policy: String,
    /// `timeouts.upgradeManifests` (5m): a control plane's static Pod waits.
    pub upgrade_manifests: std::time::Duration,
}

/// kubeadm's default `timeouts.upgradeManifests`.
const DEFAULT_UPGRADE_MANIFESTS: std::time::Duration = std::time::Duration::from_secs(300);

/// `timeouts.upgradeManifests` of an UpgradeConfiguration (5m without one).
pub(crate) fn upgrade_manifests(cfg: Option<&UpgradeConfiguration>) -> Result<std::time::Duration> {
    match cfg.and_then(|c| c.timeouts.as_ref()).and_then(|t| t.upgrade_manifests.as_deref()) {
        Some(t) => crate::config::values::parse_duration(t)
            .map_err(|m| Error::bad_config(format!("timeouts.upgradeManifests: {m}"))),
        None => Ok(DEFAULT_UPGRADE_MANIFESTS),
    }
}

/// The UpgradeConfiguration in `--config`; kubeadm's words when the file has none.
pub fn read_config(path: &std::path::Path) -> Result<UpgradeConfiguration> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| Error::bad_file(format!("reading --config {source}: {e}")))?;
    let docs = parse_documents_for(&source, &text, Reads::Upgrade)?;
    for w in &docs.warnings {
        log::warn!("[config] {w}");
    }
    docs.upgrade.ok_or_else(|| {
        Error::bad_config(format!(
            "{source}: no UpgradeConfiguration found in the supplied config (apiVersion: kubeadm.k8s.io/v1beta4, kind: UpgradeConfiguration)"
        ))
    })
}

impl NodeArgs {
    /// `upgrade node` as a boot runs it: kubeadm's defaults, the node's join patches.
    pub(crate) fn for_boot(root: &std::path::Path, patches: Option<String>) -> NodeArgs {
        let flags = NodeFlags { root: root.to_path_buf(), patches, ..Default::default() };
        NodeArgs::with_timeout(flags, None, DEFAULT_UPGRADE_MANIFESTS)
    }

    /// A malformed `timeouts.upgradeManifests` or `node.imagePullPolicy` is refused, naming the field.
    pub fn resolve(f: NodeFlags, cfg: Option<&UpgradeConfiguration>) -> Result<NodeArgs> {
        let policy = cfg.and_then(|c| c.node.as_ref()).and_then(|n| n.image_pull_policy.as_deref());
        crate::config::upgrade::image_pull_policy("node", policy).map_err(Error::bad_config)?;
        Ok(NodeArgs::with_timeout(f, cfg, upgrade_manifests(cfg)?))
    }

    fn with_timeout(
        f: NodeFlags,
        cfg: Option<&UpgradeConfiguration>,
        upgrade_manifests: std::time::Duration,
    ) -> NodeArgs {
        let n = cfg.and_then(|c| c.node.clone()).unwrap_or_default();
        let UpgradeNodeConfiguration { certificate_renewal, dry_run, etcd_upgrade, ignore_preflight_errors, .. } = n;
        let mut ignore = f.ignore_preflight;
        ignore.extend(ignore_preflight_errors);
        ignore.sort();
        ignore.dedup();
        NodeArgs {
            root: f.root,
            dry_run: f.dry_run || dry_run.unwrap_or(false),
            kubeconfig: f.kubeconfig,
            patches: f.patches.or(n.patches.map(|p| p.directory)).filter(|d| !d.is_empty()),
            ignore_preflight: ignore,
            skip_phases: if f.skip_phases.is_empty() { n.skip_phases } else { f.skip_phases },
            certificate_renewal: f.certificate_renewal.or(certificate_renewal).unwrap_or(true),
            etcd_upgrade: f.etcd_upgrade.or(etcd_upgrade).unwrap_or(true),
            image_pull_policy: crate::config::upgrade::image_pull_policy("node", n.image_pull_policy.as_deref())
                .unwrap_or_else(|_| "IfNotPresent".into()),
            upgrade_manifests,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> UpgradeConfiguration {
        let docs = parse_documents_for("u.yaml", text, Reads::Upgrade).expect("parses");
        docs.upgrade.expect("an UpgradeConfiguration")
    }

    #[test]
    fn flags_win_over_the_configs_node_fields_and_ignores_add_up() {
        let cfg = config(
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: UpgradeConfiguration\nnode:\n  dryRun: true\n  certificateRenewal: false\n  skipPhases: [addon]\n  ignorePreflightErrors: [Swap]\n  patches:\n    directory: /etc/kubernetes/patches\n",
        );
        let from_config = NodeArgs::resolve(NodeFlags::default(), Some(&cfg)).expect("resolves");
        assert!(from_config.dry_run && !from_config.certificate_renewal && from_config.etcd_upgrade);
        assert_eq!(from_config.skip_phases, ["addon"]);
        assert_eq!(from_config.patches.as_deref(), Some("/etc/kubernetes/patches"));
        let flags = NodeFlags {
            certificate_renewal: Some(true),
            skip_phases: vec!["post-upgrade".into()],
            ignore_preflight: vec!["all".into()],
            patches: Some("/p".into()),
            ..Default::default()
        };
        let both = NodeArgs::resolve(flags, Some(&cfg)).expect("resolves");
        assert!(both.certificate_renewal);
        assert_eq!(both.skip_phases, ["post-upgrade"]);
        assert_eq!(both.ignore_preflight, ["Swap", "all"]);
        assert_eq!(both.patches.as_deref(), Some("/p"));
    }

    #[test]
    fn a_malformed_upgrade_manifests_timeout_is_refused_by_name() {
        let cfg = config(
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: UpgradeConfiguration\ntimeouts:\n  upgradeManifests: soon\n",
        );
        let e = NodeArgs::resolve(NodeFlags::default(), Some(&cfg)).expect_err("a bad duration");
        assert!(e.to_string().contains("timeouts.upgradeManifests"), "{e}");
        assert_eq!(e.kind.exit_code(), 2);
        let ok = config(
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: UpgradeConfiguration\ntimeouts:\n  upgradeManifests: 2m\n",
        );
        let args = NodeArgs::resolve(NodeFlags::default(), Some(&ok)).expect("resolves");
        assert_eq!(args.upgrade_manifests, std::time::Duration::from_secs(120));
    }

    #[test]
    fn other_kinds_are_ignored_and_a_file_without_one_is_refused() {
        let text = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: UpgradeConfiguration\n";
        let docs = parse_documents_for("u.yaml", text, Reads::Upgrade).expect("parses");
        assert!(docs.upgrade.is_some() && docs.join.is_none());
        assert!(
            docs.warnings[0].contains("ignored configuration document with GroupVersionKind"),
            "{:?}",
            docs.warnings
        );
        let dir = std::env::temp_dir().join(format!("kubestrap-upgrade-cfg-{}", std::process::id()));
        std::fs::write(&dir, "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n").expect("write");
        let e = read_config(&dir).expect_err("no UpgradeConfiguration");
        let _ = std::fs::remove_file(&dir);
        assert_eq!(e.kind.exit_code(), 2);
        assert!(e.to_string().contains("no UpgradeConfiguration found in the supplied config"), "{e}");
    }

    #[test]
    fn apply_plan_and_diff_are_typed_and_their_pull_policy_is_kubeadms() {
        let parse = |body: &str| {
            parse_documents_for(
                "u.yaml",
                &format!("apiVersion: kubeadm.k8s.io/v1beta4\nkind: UpgradeConfiguration\n{body}"),
                Reads::Upgrade,
            )
        };
        for typo in ["apply:\n  certificateRenewl: false\n", "plan:\n  printconfig: true\n", "diff:\n  lines: 3\n"] {
            let e = parse(typo).expect_err(typo);
            assert!(e.to_string().contains("u.yaml"), "{e}");
        }
        let cfg = parse("apply:\n  imagePullPolicy: Never\n  printConfig: true\n  allowRCUpgrades: true\n")
            .unwrap()
            .upgrade
            .unwrap();
        let flags = apply::ApplyFlags { version: Some("v1.37.2".into()), ..Default::default() };
        let a = ApplyArgs::resolve(flags.clone(), Some(&cfg)).unwrap();
        assert_eq!((a.image_pull_policy.as_str(), a.print_config, a.allow_rc), ("Never", true, true));
        let a = ApplyArgs::resolve(flags.clone(), None).unwrap();
        assert_eq!(a.image_pull_policy, "IfNotPresent");
        let bad = parse("apply:\n  imagePullPolicy: Sometimes\n").unwrap().upgrade.unwrap();
        let e = ApplyArgs::resolve(flags, Some(&bad)).unwrap_err();
        assert!(e.to_string().contains("apply.imagePullPolicy: Invalid value: \"Sometimes\""), "{e}");
        let bad = parse("node:\n  imagePullPolicy: sometimes\n").unwrap().upgrade.unwrap();
        assert!(NodeArgs::resolve(NodeFlags::default(), Some(&bad)).is_err());
        let d = parse("diff:\n  contextLines: 3\n  kubernetesVersion: v1.37.2\n").unwrap().upgrade.unwrap();
        assert_eq!(d.diff.and_then(|d| d.context_lines), Some(3));
    }

    #[test]
    fn an_unknown_field_is_named_with_its_path() {
        let e = parse_documents_for(
            "u.yaml",
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: UpgradeConfiguration\nnode:\n  dryrun: true\n",
            Reads::Upgrade,
        )
        .expect_err("unknown field");
        let m = e.to_string();
        assert!(m.contains("u.yaml") && m.contains("dryrun"), "{m}");
    }
}

/// The cluster's stored version: kubeadm-config's ClusterConfiguration.kubernetesVersion (read
/// with kubeadm's patience for API calls).
pub(crate) fn stored_version(client: &crate::kube::Client) -> Result<crate::config::values::Version> {
    let text = context::cluster_configuration(client)?;
    let source = "ConfigMap kube-system/kubeadm-config";
    let v = crate::config::parse_stored(source, &text)?.cluster.map(|c| c.kubernetes_version).unwrap_or_default();
    crate::config::values::Version::parse(&v)
        .map_err(|e| Error::cluster(format!("{source}: kubernetesVersion {v:?}: {e}")))
}

/// The version an upgrade-in-progress marker names: its last word (`v1.37.2`, or `apply v1.37.2`
/// once the upgrade by image chose `apply`).
pub(crate) fn marker_target(text: &str) -> &str {
    text.split_whitespace().last().unwrap_or_default()
}

#[cfg(test)]
mod marker_tests {
    #[test]
    fn the_marker_names_its_target_with_or_without_the_verb() {
        assert_eq!(super::marker_target("v1.37.2\n"), "v1.37.2");
        assert_eq!(super::marker_target("apply v1.37.2\n"), "v1.37.2");
        assert_eq!(super::marker_target(""), "");
    }
}
