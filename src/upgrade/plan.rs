//! `upgrade plan [version]`, as kubeadm 1.37's: the versions each control-plane component, kubelet,
//! kube-proxy, CoreDNS and etcd run now (read from the cluster) and what `upgrade apply` would move
//! them to, then the component configs' API versions. kubestrap never asks the internet for
//! `stable`: without a version it takes the one its image was built for (image.json). The upgrades
//! listed follow kubeadm's GetAvailableUpgrades with that version as every CI label, so a newer
//! version in the cluster's own minor or the next is listed as "version in the v1.X series".

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use log::{info, warn};
use serde::Serialize;
use serde_json::Value;

use super::cluster::client_from;
use crate::config::upgrade::UpgradeConfiguration;
use crate::config::values::Version;
use crate::constants::MAX_MINOR;
use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::kube::Client;
use crate::paths::ADMIN_CONF;

/// `upgrade plan`'s flags (`None`: not on the command line).
#[derive(Debug, Default)]
pub struct PlanArgs {
    pub root: PathBuf,
    pub kubeconfig: Option<PathBuf>,
    pub version: Option<String>,
    pub config: Option<UpgradeConfiguration>,
    pub output: String,
    pub allow_experimental: bool,
    pub allow_rc: bool,
    pub etcd_upgrade: Option<bool>,
    pub ignore_preflight: Vec<String>,
    /// `--print-config` / `plan.printConfig`.
    pub print_config: bool,
    /// The version this node's image was built for (image.json): the target without one given.
    pub image_version: Option<String>,
}

/// Version → the nodes running it, as kubeadm's map[string][]string (keys sorted as strings).
pub type Versions = BTreeMap<String, Vec<String>>;

/// What the cluster runs, as kubeadm's KubeVersionGetter reads it.
#[derive(Debug, Default, Clone)]
pub struct Facts {
    pub api_servers: Versions,
    pub controller_managers: Versions,
    pub schedulers: Versions,
    pub etcd: Versions,
    pub kubelets: Versions,
    /// The CoreDNS Deployment's image tag ("" without one).
    pub dns: String,
    pub configs: Vec<ConfigState>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ComponentPlan {
    pub name: &'static str,
    pub current_version: String,
    pub new_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub node_name: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AvailableUpgrade {
    pub description: String,
    pub components: Vec<ComponentPlan>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConfigState {
    pub group: &'static str,
    pub current_version: String,
    pub preferred_version: &'static str,
    pub manual_upgrade_required: bool,
}

/// kubeadm's output.kubeadm.k8s.io/v1alpha3 UpgradePlan, fields in its order.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradePlan {
    pub kind: &'static str,
    pub api_version: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub available_upgrades: Vec<AvailableUpgrade>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub config_versions: Vec<ConfigState>,
}

/// The `kubeadm version` kubestrap stands for: it renders every patch of its newest minor.
pub fn kubeadm_version() -> String {
    format!("v1.{MAX_MINOR} (kubestrap {})", env!("CARGO_PKG_VERSION"))
}

/// apimachinery's Version.String(): no leading `v`.
fn bare(v: &Version) -> String {
    v.to_string().trim_start_matches('v').to_string()
}

struct Target {
    kube: String,
    kubeadm: String,
    etcd: String,
}

/// kubeadm's GetAvailableUpgrades with `version` answering every CI label (its offline getter),
/// then genUpgradePlan. Also returns the `[upgrade/versions]` lines it prints.
pub fn compute(
    f: &Facts,
    version: &str,
    experimental: bool,
    rc: bool,
    etcd_upgrade: bool,
) -> Result<(Vec<AvailableUpgrade>, Vec<String>)> {
    let mut lines = vec!["[upgrade] Fetching available versions to upgrade to".to_string()];
    let mut cluster: Option<Version> = None;
    for (tag, nodes) in &f.api_servers {
        let v = Version::parse(tag).map_err(|_| {
            Error::cluster(format!("couldn't parse kube-apiserver version {tag} from nodes [{}]", nodes.join(" ")))
        })?;
        if cluster.as_ref().is_none_or(|c| v.semver_cmp(c).is_ge()) {
            cluster = Some(v);
        }
    }
    let cluster = cluster.ok_or_else(|| {
        Error::cluster("no kube-apiserver Pods in kube-system (component=kube-apiserver,tier=control-plane)")
    })?;
    if f.api_servers.len() > 1 {
        let each: Vec<String> = f.api_servers.iter().map(|(v, n)| format!("{v} on nodes [{}]", n.join(" "))).collect();
        warn!(
            "Different API server versions in the cluster were discovered: {}. Please upgrade your control plane nodes to the same version of Kubernetes",
            each.join(", ")
        );
    }
    let target = Version::parse(version).map_err(|e| Error::bad_flag(format!("the version {version:?}: {e}")))?;
    lines.push(format!("[upgrade/versions] Cluster version: {}", bare(&cluster)));
    lines.push(format!("[upgrade/versions] kubeadm version: {}", kubeadm_version()));
    lines.push(format!("[upgrade/versions] Target version: {version}"));
    let etcd =
        if f.etcd.is_empty() { String::new() } else { crate::config::etcd_version_for(target.minor).to_string() };
    let newer = cluster.semver_cmp(&target).is_lt();
    let mut ups: Vec<(String, Target)> = Vec::new();
    // The label for the cluster's own branch answers the same version: when it is newer it is
    // listed as that branch's latest, and no separate minor upgrade remains.
    if !target.semver_cmp(&cluster).is_lt() {
        let description = format!("version in the v{}.{} series", cluster.major, cluster.minor);
        lines.push(format!("[upgrade/versions] Latest {description}: {version}"));
        if newer {
            // kubestrap is new enough for any patch of a minor it renders.
            let kubeadm =
                if target.major == 1 && target.minor <= MAX_MINOR { kubeadm_version() } else { version.into() };
            ups.push((description, Target { kube: version.into(), kubeadm, etcd: etcd.clone() }));
        }
    }
    if experimental || rc {
        lines.push(format!("[upgrade/versions] Latest experimental version: {version}"));
        lines.push(format!("[upgrade/versions] Latest previous version: {version}"));
        let unstable = || Target { kube: version.into(), kubeadm: version.into(), etcd: etcd.clone() };
        if rc && target.pre_release().starts_with("rc") && newer {
            ups.push(("release candidate version".into(), unstable()));
        }
        if experimental && newer {
            ups.push(("experimental version".into(), unstable()));
        }
    }
    lines.push(String::new());
    let plans = ups
        .into_iter()
        .map(|(description, t)| AvailableUpgrade { description, components: components(f, &cluster, &t, etcd_upgrade) })
        .collect();
    Ok((plans, lines))
}

/// genAvailableUpgrade's rows, in its order.
fn components(f: &Facts, cluster: &Version, t: &Target, etcd_upgrade: bool) -> Vec<ComponentPlan> {
    let row = |name, current: &str, node: &str, new: &str| ComponentPlan {
        name,
        current_version: current.to_string(),
        new_version: new.to_string(),
        node_name: node.to_string(),
    };
    let mut out = Vec::new();
    let rows = |out: &mut Vec<ComponentPlan>, name, versions: &Versions, new: &str| {
        for (v, nodes) in versions {
            for n in nodes {
                out.push(row(name, v, n, new));
            }
        }
    };
    // CanUpgradeKubelets: several versions, or one that is not the target's string.
    let kubelets = f.kubelets.len() > 1 || (f.kubelets.len() == 1 && !f.kubelets.contains_key(&t.kube));
    if kubelets {
        rows(&mut out, "kubelet", &f.kubelets, &t.kube);
    }
    rows(&mut out, "kube-apiserver", &f.api_servers, &t.kube);
    rows(&mut out, "kube-controller-manager", &f.controller_managers, &t.kube);
    rows(&mut out, "kube-scheduler", &f.schedulers, &t.kube);
    out.push(row("kube-proxy", &bare(cluster), "", &t.kube));
    out.push(row("CoreDNS", &f.dns, "", crate::objects::coredns::COREDNS_VERSION));
    out.push(row("kubeadm", &kubeadm_version(), "", &t.kubeadm));
    if etcd_upgrade {
        rows(&mut out, "etcd", &f.etcd, &t.etcd);
    }
    out
}

/// The text kubeadm's upgradePlanTextPrinter writes.
pub fn to_text(plan: &UpgradePlan) -> String {
    let mut out = String::new();
    let table = |rows: Vec<String>| {
        let mut lines = vec!["COMPONENT\tNODE\tCURRENT\tTARGET".to_string()];
        lines.extend(rows);
        crate::tabwrite::tabwrite(&lines)
    };
    let cells = |c: &ComponentPlan| format!("{}\t{}\t{}\t{}", c.name, c.node_name, c.current_version, c.new_version);
    for au in &plan.available_upgrades {
        let find = |n: &str| au.components.iter().find(|c| c.name == n);
        let kube = find("kube-apiserver").map(|c| c.new_version.clone()).unwrap_or_default();
        let pre = Version::parse(&kube).map(|v| v.pre_release().to_string()).unwrap_or_default();
        let flag = match pre.as_str() {
            "" => "",
            p if p.starts_with("rc") => " --allow-release-candidate-upgrades",
            _ => " --allow-experimental-upgrades",
        };
        out.push_str("Components that must be upgraded manually after you have upgraded the control plane with 'kubeadm upgrade apply':\n");
        out.push_str(&table(au.components.iter().filter(|c| c.name == "kubelet").map(cells).collect()));
        out.push_str(&format!("\nUpgrade to the latest {}:\n\n", au.description));
        out.push_str(&table(
            au.components.iter().filter(|c| c.name != "kubelet" && c.name != "kubeadm").map(cells).collect(),
        ));
        out.push_str(&format!("\nYou can now apply the upgrade by executing the following command:\n\n\tkubeadm upgrade apply {kube}{flag}\n\n"));
        if let Some(k) = find("kubeadm").filter(|k| k.current_version != k.new_version) {
            out.push_str(&format!(
                "Note: Before you can perform this upgrade, you have to update kubeadm to {}.\n\n",
                k.new_version
            ));
        }
        out.push_str(SEPARATOR);
    }
    if plan.config_versions.is_empty() {
        out.push_str("No information available on component configs.\n");
        return out;
    }
    out.push_str(CONFIGS_INTRO);
    let mut lines = vec!["API GROUP\tCURRENT VERSION\tPREFERRED VERSION\tMANUAL UPGRADE REQUIRED".to_string()];
    let dash = |s: &str| if s.is_empty() { "-".to_string() } else { s.to_string() };
    for s in &plan.config_versions {
        let manual = if s.manual_upgrade_required { "yes" } else { "no" };
        lines.push(format!("{}\t{}\t{}\t{manual}", s.group, dash(&s.current_version), dash(s.preferred_version)));
    }
    out.push_str(&crate::tabwrite::tabwrite(&lines));
    out.push_str(SEPARATOR);
    out
}

const SEPARATOR: &str = "_____________________________________________________________________\n\n";
const CONFIGS_INTRO: &str = "
The table below shows the current state of component configs as understood by this version of kubeadm.
Configs that have a \"yes\" mark in the \"MANUAL UPGRADE REQUIRED\" column require manual config upgrade or
resetting to kubeadm defaults before a successful upgrade can be performed. The version to manually
upgrade to is denoted in the \"PREFERRED VERSION\" column.

";

/// `-o json`: kubeadm's JSON printer (4-space indent, a final newline).
pub fn to_json(plan: &UpgradePlan) -> Result<String> {
    let mut buf = Vec::new();
    let mut ser =
        serde_json::Serializer::with_formatter(&mut buf, serde_json::ser::PrettyFormatter::with_indent(b"    "));
    plan.serialize(&mut ser).map_err(|e| Error::internal(format!("rendering JSON: {e}")))?;
    Ok(format!("{}\n", String::from_utf8_lossy(&buf)))
}

/// `-o yaml`: the JSON through sigs.k8s.io/yaml, whose keys come out sorted.
pub fn to_yaml(plan: &UpgradePlan) -> Result<String> {
    let v = serde_json::to_value(plan).map_err(|e| Error::internal(format!("rendering YAML: {e}")))?;
    serde_yaml::to_string(&sorted(v)).map_err(|e| Error::internal(format!("rendering YAML: {e}")))
}

fn sorted(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            // Inserts rather than collect(): each collect() into a map instantiates its own sort.
            let mut b = BTreeMap::new();
            for (k, v) in m {
                b.insert(k, sorted(v));
            }
            let mut out = serde_json::Map::new();
            for (k, v) in b {
                out.insert(k, v);
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// `kubestrap upgrade plan`: kubeadm's checks, the cluster's versions, the plan on `out`.
pub fn run_plan(a: &PlanArgs, fs: &NodeFs, host: &dyn crate::host::Host, out: &mut dyn Write) -> Result<()> {
    if !matches!(a.output.as_str(), "text" | "json" | "yaml") {
        return Err(Error::bad_flag(format!("--output {:?}: kubestrap prints text, json or yaml", a.output)));
    }
    let p = a.config.as_ref().and_then(|c| c.plan.clone()).unwrap_or_default();
    let mut ignore = a.ignore_preflight.clone();
    ignore.extend(p.ignore_preflight_errors.iter().cloned());
    info!("[preflight] Running pre-flight checks.");
    if crate::node::is_live(fs.root()) {
        let input = crate::preflight::Input::worker(fs.root(), String::new(), None, None);
        crate::preflight::enforce(&crate::preflight::run_only(host, &input, &ignore, &["IsPrivilegedUser"]))?;
    }
    let admin = fs.real(ADMIN_CONF.as_str());
    let client = client_from(fs, a.kubeconfig.as_deref().unwrap_or(&admin))?;
    super::dns_preflight::check(&client, &ignore)?;
    info!(
        "[upgrade/config] Reading configuration from the \"kubeadm-config\" ConfigMap in namespace \"kube-system\"..."
    );
    info!("[upgrade/config] Use 'kubeadm init phase upload-config kubeadm --config your-config-file' to re-upload it.");
    let stored = super::context::cluster_configuration(&client)?;
    info!("[upgrade] Running cluster health checks");
    super::apply::check_health(fs, &client, &ignore)?;
    // The cluster's configuration as stored, at its current version (kubeadm's plan prints it so).
    if a.print_config || p.print_config.unwrap_or(false) {
        super::apply::print_configuration(&stored)?;
    }
    let version = match a.version.clone().or(p.kubernetes_version.clone()).filter(|v| !v.is_empty()) {
        Some(v) => v,
        None => a.image_version.clone().ok_or_else(|| {
            Error::bad_flag(
                "give the version to plan for (`kubestrap upgrade plan v1.37.2`): kubestrap does not ask dl.k8s.io for the latest stable release, and this node's image names none (/usr/share/kubestrap/image.json)",
            )
        })?,
    };
    let facts = read_facts(&client)?;
    let experimental = a.allow_experimental || p.allow_experimental_upgrades.unwrap_or(false);
    let rc = a.allow_rc || p.allow_rc_upgrades.unwrap_or(false);
    let etcd = a.etcd_upgrade.or(p.etcd_upgrade).unwrap_or(true);
    let (upgrades, lines) = compute(&facts, &version, experimental, rc, etcd)?;
    for l in lines {
        info!("{l}");
    }
    if upgrades.is_empty() {
        info!("[upgrade/versions] Nothing to upgrade: the cluster already runs {version} or newer");
        return Ok(());
    }
    let plan = UpgradePlan {
        kind: "UpgradePlan",
        api_version: "output.kubeadm.k8s.io/v1alpha3",
        available_upgrades: upgrades,
        config_versions: facts.configs,
    };
    let text = match a.output.as_str() {
        "json" => to_json(&plan)?,
        "yaml" => to_yaml(&plan)?,
        _ => to_text(&plan),
    };
    out.write_all(text.as_bytes()).map_err(|e| Error::failed(format!("writing the plan: {e}")))
}

/// kubeadm's KubeVersionGetter and GetVersionStates, over the API.
fn read_facts(client: &Client) -> Result<Facts> {
    let pods = |component: &str| -> Result<Versions> {
        let path =
            format!("/api/v1/namespaces/kube-system/pods?labelSelector=component%3D{component}%2Ctier%3Dcontrol-plane");
        let list = client.list(&path).map_err(|e| Error::cluster(format!("couldn't list pods in cluster: {e}")))?;
        let mut m = Versions::new();
        for p in list {
            let image = p["spec"]["containers"][0]["image"].as_str().unwrap_or_default();
            let tag = crate::images::tag_of(image).replacen('_', "+", 1);
            m.entry(tag).or_default().push(p["spec"]["nodeName"].as_str().unwrap_or_default().to_string());
        }
        Ok(m)
    };
    let nodes = client.list("/api/v1/nodes").map_err(|_| Error::cluster("couldn't list all nodes in cluster"))?;
    let mut kubelets = Versions::new();
    for n in nodes {
        let v = n["status"]["nodeInfo"]["kubeletVersion"].as_str().unwrap_or_default().to_string();
        kubelets.entry(v).or_default().push(n["metadata"]["name"].as_str().unwrap_or_default().to_string());
    }
    let dns = super::dns_preflight::deployed_version(client)?;
    Ok(Facts {
        api_servers: pods("kube-apiserver")?,
        controller_managers: pods("kube-controller-manager")?,
        schedulers: pods("kube-scheduler")?,
        etcd: pods("etcd")?,
        kubelets,
        dns,
        configs: config_states(client)?,
    })
}

/// GetVersionStates: kube-proxy's then the kubelet's config, current when its ConfigMap holds
/// the API version kubeadm reads; a kubeadm-generated one at another version is regenerated
/// (no current version); a user's at another version needs converting by hand.
fn config_states(client: &Client) -> Result<Vec<ConfigState>> {
    let known = [
        ("kubeproxy.config.k8s.io", "v1alpha1", "kube-proxy", "config.conf"),
        ("kubelet.config.k8s.io", "v1beta1", "kubelet-config", "kubelet"),
    ];
    let mut out = Vec::new();
    for (group, version, cm, key) in known {
        let path = format!("/api/v1/namespaces/kube-system/configmaps/{cm}");
        let found = super::cluster::get_patiently(client, &path, &format!("reading the ConfigMap kube-system/{cm}"))?;
        let mut current = String::new();
        if let Some(cm_obj) = found.filter(|c| c["data"][key].is_string()) {
            let text = cm_obj["data"][key].as_str().unwrap_or_default();
            let doc: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| {
                Error::cluster(format!("the ConfigMap kube-system/{cm}'s {key:?} is not valid YAML: {e}"))
            })?;
            let api = doc.get("apiVersion").and_then(serde_yaml::Value::as_str).unwrap_or_default();
            let signed = super::context::kubeadm_generated(&cm_obj);
            if api == format!("{group}/{version}") {
                current = version.to_string();
            } else if !signed {
                return Err(Error::cluster(format!(
                    "the ConfigMap kube-system/{cm}: unsupported apiVersion {api:?}, you may have to do manual conversion to \"{group}/{version}\" and run kubeadm again"
                )));
            }
        }
        out.push(ConfigState {
            group,
            current_version: current,
            preferred_version: version,
            manual_upgrade_required: false,
        });
    }
    Ok(out)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
