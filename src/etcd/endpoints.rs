//! Where the existing etcd members are, found as kubeadm finds them: the `kube-system` Pods
//! labelled `component=etcd,tier=control-plane` carry their advertised client URLs in an
//! annotation (written by the etcd manifest, mirrored by each kubelet). The member list then
//! replaces these (`Client::sync`).

use log::debug;
use serde_json::Value;

use super::error::EtcdError;
use crate::clock::Clock;
use crate::kube;
use crate::retry::{Attempt, Retry};
use crate::timeouts::KUBERNETES_API_CALL_RETRY;

/// The annotation on etcd's static Pod: its `--advertise-client-urls`.
pub const ADVERTISE_CLIENT_URLS_ANNOTATION: &str = "kubeadm.kubernetes.io/etcd.advertise-client-urls";
/// The list kubeadm reads: etcd's mirror Pods in kube-system.
pub const ETCD_PODS: &str = "/api/v1/namespaces/kube-system/pods?labelSelector=component%3Detcd%2Ctier%3Dcontrol-plane";

/// The client URLs in a PodList of etcd Pods, in list order. Like kubeadm, a Pod that is not
/// Ready still counts; unlike kubeadm, a comma-separated annotation (an overridden
/// `--advertise-client-urls` with several URLs) gives each URL. An error (worth waiting on)
/// when there are no Pods or some lack the annotation: the kubelets have not mirrored them yet.
pub fn endpoints_from_pods(pod_list: &Value) -> Result<Vec<String>, EtcdError> {
    let items = pod_list["items"].as_array().ok_or_else(|| EtcdError::Pods("the answer is not a PodList".into()))?;
    let mut endpoints = Vec::new();
    let mut unannotated = Vec::new();
    for pod in items {
        let name = pod["metadata"]["name"].as_str().unwrap_or("?");
        let ready = pod["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
        if !ready {
            debug!("[etcd] etcd Pod {name} is not Ready; using its endpoint anyway");
        }
        match pod["metadata"]["annotations"][ADVERTISE_CLIENT_URLS_ANNOTATION].as_str() {
            Some(urls) => {
                for u in urls.split(',').map(str::trim).filter(|u| !u.is_empty()) {
                    if !endpoints.iter().any(|e| e == u) {
                        endpoints.push(u.to_string());
                    }
                }
            }
            None => unannotated.push(name.to_string()),
        }
    }
    if items.is_empty() {
        return Err(EtcdError::Pods("no etcd Pods in kube-system yet".into()));
    }
    if !unannotated.is_empty() || endpoints.is_empty() {
        return Err(EtcdError::Pods(format!(
            "{} etcd Pods, {} without the {ADVERTISE_CLIENT_URLS_ANNOTATION} annotation ({})",
            items.len(),
            unannotated.len(),
            unannotated.join(", ")
        )));
    }
    Ok(endpoints)
}

/// Lists the etcd Pods through the API until every one carries its endpoint (kubeadm: every
/// 500 ms for up to `timeouts.kubernetesAPICall`, 1 m by default).
pub fn endpoints_from_cluster(
    api: &kube::Client,
    timeout: std::time::Duration,
    clock: &dyn Clock,
) -> Result<Vec<String>, EtcdError> {
    let retry = Retry {
        what: "reading the etcd endpoints from the etcd Pods",
        tag: "etcd",
        timeout,
        backoff: &KUBERNETES_API_CALL_RETRY,
        clock,
    };
    retry.run(|| match api.get(ETCD_PODS) {
        Ok(Some(list)) => match endpoints_from_pods(&list) {
            Ok(eps) => Attempt::Done(eps),
            Err(e) => Attempt::Wait(e.to_string()),
        },
        Ok(None) => Attempt::Wait(format!("{ETCD_PODS}: not found")),
        Err(e) if e.is_transient() => Attempt::Wait(e.to_string()),
        Err(e) => Attempt::Fail(EtcdError::Api(e)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, url: Option<&str>, ready: bool) -> Value {
        let mut p = json!({
            "metadata": {"name": name, "namespace": "kube-system", "labels": {"component": "etcd", "tier": "control-plane"}},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        });
        if let Some(u) = url {
            p["metadata"]["annotations"] = json!({ ADVERTISE_CLIENT_URLS_ANNOTATION: u });
        }
        p
    }

    #[test]
    fn every_pod_must_carry_its_endpoint() {
        let list = json!({"kind": "PodList", "items": [
            pod("etcd-cp-1", Some("https://10.0.0.11:2379"), true),
            pod("etcd-cp-2", Some("https://[fd00::12]:2379"), false),
        ]});
        assert_eq!(endpoints_from_pods(&list).unwrap(), ["https://10.0.0.11:2379", "https://[fd00::12]:2379"]);

        let list =
            json!({"items": [pod("etcd-cp-1", Some("https://10.0.0.11:2379"), true), pod("etcd-cp-2", None, true)]});
        let e = endpoints_from_pods(&list).unwrap_err();
        assert!(e.is_transient());
        assert_eq!(
            e.to_string(),
            "etcd Pods: 2 etcd Pods, 1 without the kubeadm.kubernetes.io/etcd.advertise-client-urls annotation (etcd-cp-2)"
        );
        let e = endpoints_from_pods(&json!({"items": []})).unwrap_err();
        assert_eq!(e.to_string(), "etcd Pods: no etcd Pods in kube-system yet");
        assert!(endpoints_from_pods(&json!({"kind": "Status"})).is_err());
    }

    #[test]
    fn several_urls_in_one_annotation_are_split() {
        let list =
            json!({"items": [pod("etcd-cp-1", Some("https://10.0.0.11:2379, https://192.168.1.11:2379"), true)]});
        assert_eq!(endpoints_from_pods(&list).unwrap(), ["https://10.0.0.11:2379", "https://192.168.1.11:2379"]);
    }
}
