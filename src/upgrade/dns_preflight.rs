//! kubeadm's CoreDNS preflight of `upgrade apply` and `upgrade plan` (RunCoreDNSMigrationCheck):
//! `CoreDNSUnsupportedPlugins` fails on a Corefile plugin or option that corefile-migration
//! does not know between the deployed CoreDNS and the new one; `CoreDNSMigration` fails when no
//! migration between the two versions exists. As kubeadm, a cluster with no `coredns` ConfigMap
//! has no deployed version and fails both (skip them with --ignore-preflight-errors); an
//! ignored check prints its errors as warnings.

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

pub(super) fn check(client: &Client, ignore: &[String]) -> Result<()> {
    let ignored = |name: &str| ignore.iter().any(|i| i.eq_ignore_ascii_case("all") || i.eq_ignore_ascii_case(name));
    let target = crate::objects::coredns::COREDNS_VERSION.trim_start_matches('v');
    let mut found: Vec<(&str, String)> = Vec::new();
    match deployed(client) {
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
