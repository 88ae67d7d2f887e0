//! What `upgrade` reads from a node and its cluster, as kubeadm's FetchInitConfigurationFromCluster:
//! a client from a kubeconfig, the kube-system ConfigMaps, the node's name (a SelfSubjectReview
//! of its kubelet.conf), its CRI socket (instance-config.yaml) and, on a control plane, its API
//! endpoint (the annotation on its kube-apiserver mirror Pod).

use std::path::Path;
use std::time::Duration;

use log::warn;
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::kube::{ApiError, Client};
use crate::kubeconfig::Kubeconfig;
use crate::paths::{KUBELET_CONF, KUBELET_INSTANCE_CONFIG};
use crate::retry::{Attempt, Retry};

/// A client for a kubeconfig file; the certificate files it names are read under the node root.
pub(super) fn client_from(fs: &NodeFs, path: &Path) -> Result<Client> {
    let bytes = std::fs::read(path).map_err(|e| {
        let hint = if path.ends_with("kubelet.conf") {
            "this node has no kubelet identity (join it first)"
        } else {
            "give the kubeconfig of a cluster administrator with --kubeconfig"
        };
        Error::bad_file(format!("reading {}: {e}: {hint}", path.display()))
    })?;
    let kc = Kubeconfig::parse(&bytes).map_err(|m| Error::bad_file(format!("{} {m}", path.display())))?;
    Client::from_kubeconfig(&kc, &|p| fs.read_following_link(p).ok().flatten(), Duration::from_secs(10))
        .map_err(|m| Error::bad_file(format!("{}: {m}", path.display())))
}

pub(super) fn get_configmap(client: &Client, name: &str) -> Result<Value> {
    let path = format!("/api/v1/namespaces/kube-system/configmaps/{name}");
    get_patiently(client, &path, &format!("reading the ConfigMap kube-system/{name}"))?.ok_or_else(|| {
        Error::cluster(format!(
            "the ConfigMap kube-system/{name} was not found: this cluster was not made by kubeadm or kubestrap"
        ))
    })
}

/// A GET with kubeadm's patience for API calls (`timeouts.kubernetesAPICall`, 1 min, polled
/// every 500 ms): an API server that is down or restarting, as during `upgrade apply` on the
/// control plane, is waited out (see [`attempt`]); a bad certificate ends it at once.
pub(super) fn get_patiently(client: &Client, path: &str, what: &str) -> Result<Option<Value>> {
    patiently(what).run(|| attempt(client.get(path)))
}

/// A list with `get_patiently`'s patience.
pub(super) fn list_patiently(client: &Client, path: &str, what: &str) -> Result<Vec<Value>> {
    patiently(what).run(|| attempt(client.list(path)))
}

fn patiently(what: &str) -> Retry<'_> {
    patiently_for(what, crate::timeouts::KUBERNETES_API_CALL)
}

fn patiently_for(what: &str, timeout: Duration) -> Retry<'_> {
    Retry {
        what,
        tag: "upgrade",
        timeout,
        backoff: &crate::timeouts::KUBERNETES_API_CALL_RETRY,
        clock: &crate::clock::SystemClock,
    }
}

/// One try of an upgrade's API call: [`ApiError::attempt`], and a 403 waited out too. An API
/// server that has just restarted (this upgrade's own, or another control plane's) forbids
/// everyone until its RBAC caches sync; kubeadm's reads retry any error. A real refusal then
/// ends after `kubernetesAPICall`, the 403 as its reason.
pub(super) fn attempt<T>(r: std::result::Result<T, ApiError>) -> Attempt<T, Error> {
    match r {
        Err(e) if e.code() == Some(403) => Attempt::Wait(e.to_string()),
        r => ApiError::attempt(r),
    }
}

/// The node's name as the API server knows its credential (kubeadm's SelfSubjectReview). Asked
/// with `get_patiently`'s patience, and a 403 is waited out too: an API server that has just
/// restarted (an upgrade on another control plane) refuses everyone until its RBAC caches sync.
/// A 401, or a user that is not a node, ends it at once.
pub(super) fn node_name(client: &Client) -> Result<String> {
    node_name_within(client, crate::timeouts::KUBERNETES_API_CALL)
}

/// [`node_name`], waiting up to `timeout` for the API server: at boot a control plane's own API
/// server is only being started by its kubelet (minutes under TCG).
pub(super) fn node_name_within(client: &Client, timeout: Duration) -> Result<String> {
    let review = json!({ "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview" });
    let what = format!("asking the API server who {KUBELET_CONF} is");
    patiently_for(&what, timeout).run(|| {
        match client.request(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            Some(("application/json", &review)),
        ) {
            Ok((code, body)) => review_outcome(code, &body),
            Err(e) => attempt(Err(e)),
        }
    })
}

fn review_outcome(code: u16, body: &Value) -> Attempt<String, Error> {
    let message = body["message"].as_str().unwrap_or_default();
    match code {
        201 => {
            let user = body["status"]["userInfo"]["username"].as_str().unwrap_or_default();
            match user.strip_prefix(crate::constants::NODE_USER_PREFIX).filter(|n| !n.is_empty()) {
                Some(n) => Attempt::Done(n.to_string()),
                None => Attempt::Fail(Error::bad_file(format!(
                    "{KUBELET_CONF} authenticates as {user:?}, not system:node:<name>: it is not a kubelet's credential"
                ))),
            }
        }
        403 | 429 | 500 | 502 | 503 | 504 => Attempt::Wait(format!("HTTP {code}: {message}")),
        _ => Attempt::Fail(Error::bad_file(format!(
            "{KUBELET_CONF} was refused by the API server (HTTP {code}: {message}): it is not a valid kubelet credential"
        ))),
    }
}

/// The CRI socket from instance-config.yaml, or containerd's with kubeadm's warning.
pub(super) fn cri_socket(fs: &NodeFs, node_name: &str) -> Result<String> {
    let Some(bytes) = fs.read(KUBELET_INSTANCE_CONFIG.as_str())? else {
        warn!(
            "Node {node_name:?} lacks a kubelet instance config file {:?}; falling back to default {:?}",
            KUBELET_INSTANCE_CONFIG.as_str(),
            crate::constants::DEFAULT_CRI_SOCKET
        );
        return Ok(crate::constants::DEFAULT_CRI_SOCKET.into());
    };
    let m: serde_yaml::Mapping = serde_yaml::from_slice(&bytes).map_err(|e| {
        Error::bad_file(format!("{KUBELET_INSTANCE_CONFIG}: {e}; fix or remove it (kubeadm rewrites it)"))
    })?;
    match m.get("containerRuntimeEndpoint").and_then(serde_yaml::Value::as_str) {
        Some(s) if !s.is_empty() => Ok(s.to_string()),
        _ => Err(Error::bad_file(format!(
            "{KUBELET_INSTANCE_CONFIG} has no containerRuntimeEndpoint; remove it and it is rewritten with the default"
        ))),
    }
}

/// The annotation kubeadm (and kubestrap) puts on a control plane's kube-apiserver Pod.
const ENDPOINT_ANNOTATION: &str = "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint";

/// This control plane's API endpoint (address, port), from its kube-apiserver mirror Pod's
/// annotation, as kubeadm's GetAPIEndpoint: polled every 500 ms for `timeouts.kubernetesAPICall`
/// (the kubelet may not have mirrored the static Pod yet).
pub(super) fn api_endpoint(client: &Client, node: &str) -> Result<(String, u16)> {
    let path = format!(
        "/api/v1/namespaces/kube-system/pods?labelSelector=component%3Dkube-apiserver%2Ctier%3Dcontrol-plane&fieldSelector=spec.nodeName%3D{node}"
    );
    let retry = patiently("reading this node's API endpoint from its kube-apiserver Pod");
    let endpoint = retry.run::<_, crate::retry::GaveUp>(|| match client.list(&path) {
        Ok(pods) => match endpoint_of(&pods, node) {
            Ok(e) => Attempt::Done(e),
            Err(e) => Attempt::Wait(e),
        },
        Err(e) => Attempt::Wait(format!("listing this node's kube-apiserver Pod: {e}")),
    });
    let endpoint = endpoint.map_err(|e| {
        Error::cluster(format!("could not retrieve API endpoints for node {node:?} using pod annotations: {e}"))
    })?;
    let (host, port) = endpoint.rsplit_once(':').unwrap_or((endpoint.as_str(), ""));
    let port = port.parse().map_err(|_| {
        Error::cluster(format!("{ENDPOINT_ANNOTATION} {endpoint:?} on node {node:?}: not of the form address:port"))
    })?;
    Ok((host.trim_start_matches('[').trim_end_matches(']').to_string(), port))
}

fn endpoint_of(pods: &[Value], node: &str) -> std::result::Result<String, String> {
    let [pod] = pods else {
        return Err(format!(
            "API server pod for node name {node:?} has {} entries, only one was expected (is its kubelet running the static Pods?)",
            pods.len()
        ));
    };
    pod["metadata"]["annotations"][ENDPOINT_ANNOTATION].as_str().map(str::to_string).ok_or_else(|| {
        format!("API server pod for node name {node:?} hasn't got a {ENDPOINT_ANNOTATION:?} annotation, cannot retrieve API endpoint")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_names_the_node_waits_out_a_starting_server_and_refuses_others() {
        let ok = json!({"status": {"userInfo": {"username": "system:node:cp-2"}}});
        assert!(matches!(review_outcome(201, &ok), Attempt::Done(n) if n == "cp-2"));
        // An API server whose RBAC caches have not synced forbids everyone: wait.
        let rbac = json!({"message": "selfsubjectreviews.authentication.k8s.io is forbidden: RBAC: clusterrole \"system:basic-user\" not found"});
        assert!(matches!(review_outcome(403, &rbac), Attempt::Wait(m) if m.contains("HTTP 403") && m.contains("RBAC")));
        assert!(matches!(review_outcome(503, &json!({})), Attempt::Wait(_)));
        let Attempt::Fail(e) = review_outcome(401, &json!({"message": "Unauthorized"})) else {
            panic!("401 must fail")
        };
        assert!(e.to_string().contains("HTTP 401: Unauthorized"), "{e}");
        let admin = json!({"status": {"userInfo": {"username": "kubernetes-admin"}}});
        let Attempt::Fail(e) = review_outcome(201, &admin) else { panic!("an admin is not a node") };
        assert!(e.to_string().contains("\"kubernetes-admin\", not system:node:<name>"), "{e}");
    }

    #[test]
    fn an_upgrade_read_waits_out_a_403_and_a_503_but_not_a_401() {
        let status = |code: u16| ApiError::Status {
            code,
            reason: String::new(),
            message: "configmaps \"kubeadm-config\" is forbidden".into(),
            who: "kubernetes-admin".into(),
            what: "GET /api/v1/namespaces/kube-system/configmaps/kubeadm-config".into(),
        };
        assert!(matches!(attempt::<()>(Err(status(403))), Attempt::Wait(m) if m.contains("forbidden")));
        assert!(matches!(attempt::<()>(Err(status(503))), Attempt::Wait(_)));
        assert!(matches!(attempt::<()>(Err(status(401))), Attempt::Fail(_)));
        assert!(matches!(attempt(Ok(1)), Attempt::Done(1)));
    }
}
