//! kubeadm's CoreDNS preflight of `upgrade apply` and `upgrade plan` (RunCoreDNSMigrationCheck):
//! `CoreDNSUnsupportedPlugins` fails on a Corefile plugin or option that corefile-migration
//! does not know between the deployed CoreDNS and the new one; `CoreDNSMigration` fails when no
//! migration between the two versions exists. As kubeadm, a cluster with no `coredns` ConfigMap
//! has no deployed version and fails both (skip them with --ignore-preflight-errors), unless its
//! configuration disables DNS; an ignored check prints its errors as warnings.

use log::{info, warn};

use super::cluster::{get_patiently, list_patiently};
use super::corefile::{migratable, unsupported};
use crate::error::{Error, Result};
use crate::kube::Client;
use crate::preflight::PreflightError;

/// The deployed Corefile and CoreDNS version ("" for either when there is no `coredns`
/// ConfigMap, as kubeadm's GetCoreDNSInfo).
fn deployed(client: &Client) -> Result<(String, String)> {
    let cm = get_patiently(
        client,
        "/api/v1/namespaces/kube-system/configmaps/coredns",
        "reading the ConfigMap kube-system/coredns",
    )?;
    let Some(cm) = cm else { return Ok((String::new(), String::new())) };
    let corefile = cm["data"]["Corefile"]
        .as_str()
        .ok_or_else(|| Error::cluster("unable to find the CoreDNS Corefile data"))?
        .to_string();
    let version = deployed_version(client)?;
    Ok((corefile, version))
}

/// The deployed CoreDNS's image tag (kubeadm's DeployedDNSAddon): "" with no Deployment
/// labelled `k8s-app=kube-dns`, refused with two.
pub(super) fn deployed_version(client: &Client) -> Result<String> {
    let label = crate::objects::coredns::APP_LABEL;
    let found = list_patiently(
        client,
        &format!("/apis/apps/v1/namespaces/kube-system/deployments?labelSelector=k8s-app%3D{label}"),
        "listing the DNS addon's Deployments",
    )?;
    match &found[..] {
        [] => Ok(String::new()),
        [d] => {
            Ok(crate::images::tag_of(d["spec"]["template"]["spec"]["containers"][0]["image"].as_str().unwrap_or("")))
        }
        many => {
            let names: Vec<&str> = many.iter().filter_map(|d| d["metadata"]["name"].as_str()).collect();
            Err(Error::cluster(format!("multiple DNS addon deployments found: {names:?}")))
        }
    }
}

/// The two checks' errors for the deployed (Corefile, version), as kubeadm words them.
fn judge(deployed: Result<(String, String)>) -> Vec<(&'static str, String)> {
    let target = crate::objects::coredns::COREDNS_VERSION.trim_start_matches('v');
    let mut found = Vec::new();
    match deployed {
        Err(e) => {
            // Each check reads the deployed CoreDNS itself: both fail alike.
            found.push(("CoreDNSUnsupportedPlugins", e.message.clone()));
            found.push(("CoreDNSMigration", format!("CoreDNS will not be upgraded: {}", e.message)));
        }
        Ok((corefile, current)) => {
            let current = current.trim_start_matches('v');
            if current != target {
                match unsupported(current, target, &corefile) {
                    Err(e) => found.push(("CoreDNSUnsupportedPlugins", e)),
                    Ok(list) if list.is_empty() => {}
                    Ok(list) => {
                        info!(
                            "[preflight] The corefile contains plugins that kubeadm/CoreDNS does not know how to migrate. Each plugin listed should be manually verified for compatibility with the newer version of CoreDNS. Once ready, the upgrade can be initiated by skipping the preflight check. During the upgrade, kubeadm will migrate the configuration while leaving the listed plugin configs untouched, but cannot guarantee that they will work with the newer version of CoreDNS."
                        );
                        found.push((
                            "CoreDNSUnsupportedPlugins",
                            format!("CoreDNS cannot migrate the following plugins:\n[{}]", list.join(" ")),
                        ));
                    }
                }
            }
            if let Err(e) = migratable(current, target) {
                found.push(("CoreDNSMigration", format!("CoreDNS will not be upgraded: {e}")));
            }
        }
    }
    found
}

/// The cluster's `dns.disabled` (kubeadm-config).
fn dns_disabled(client: &Client) -> Result<bool> {
    let text = super::context::cluster_configuration(client)?;
    let docs = crate::config::parse_stored("ConfigMap kube-system/kubeadm-config", &text)?;
    Ok(docs.cluster.is_some_and(|c| c.dns.disabled))
}

pub(super) fn check(client: &Client, ignore: &[String]) -> Result<()> {
    // A cluster whose configuration disables DNS has no CoreDNS to migrate; kubeadm checks it
    // anyway and fails (docs/differences.md).
    let disabled = dns_disabled(client)?;
    let found = if disabled { Vec::new() } else { judge(deployed(client)) };
    if disabled {
        info!("[preflight] CoreDNS is disabled in the cluster's configuration: its upgrade checks are skipped");
    }
    let ignored = |name: &str| ignore.iter().any(|i| i.eq_ignore_ascii_case("all") || i.eq_ignore_ascii_case(name));
    let (mut lines, mut names) = (Vec::new(), Vec::new());
    for (name, msg) in found {
        if ignored(name) {
            warn!("\t[WARNING {name}]: {msg}");
        } else {
            lines.push(format!("\t[ERROR {name}]: {msg}"));
            names.push(name.to_string());
        }
    }
    if lines.is_empty() { Ok(()) } else { Err(PreflightError { lines, names }.into()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checks_judge_as_kubeadms() {
        let names = |f: &[(&str, String)]| f.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>();
        // No coredns ConfigMap: no version, both fail with corefile-migration's words.
        let f = judge(Ok((String::new(), String::new())));
        assert_eq!(names(&f), ["CoreDNSUnsupportedPlugins", "CoreDNSMigration"]);
        assert_eq!(f[0].1, "start version '' not supported");
        assert_eq!(f[1].1, "CoreDNS will not be upgraded: start version '' not supported");
        let f = judge(Ok((".:53 {\n    whoami\n}\n".into(), "v1.14.2".into())));
        assert_eq!(names(&f), ["CoreDNSUnsupportedPlugins"]);
        assert!(f[0].1.starts_with("CoreDNS cannot migrate the following plugins:\n[Plugin \"whoami\""), "{}", f[0].1);
        assert!(judge(Ok((".:53 {\n    whoami\n}\n".into(), "v1.14.6".into()))).is_empty(), "the same version");
        assert!(judge(Ok((".:53 {\n    errors\n}\n".into(), "v1.14.2".into()))).is_empty());
        let f = judge(Err(Error::cluster("multiple DNS addon deployments found: [\"a\", \"b\"]")));
        assert_eq!(names(&f), ["CoreDNSUnsupportedPlugins", "CoreDNSMigration"]);
    }
}
