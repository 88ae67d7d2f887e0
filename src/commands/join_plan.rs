//! `kubestrap join --dry-run`: what the join would do, without contacting the cluster, waiting,
//! or writing. The arguments are resolved and checked exactly as for a real join and the
//! preflight phase runs (into the in-memory plan); discovery and kubelet-start, whose inputs
//! come from the cluster, are described: the requests they would make in order (with the CSR
//! they would send, built from a throwaway key), and the files they would write, by path and
//! mode, with where the content comes from; so are a control-plane join's phases
//! (`join_plan/control_plane.rs`).

mod control_plane;

use crate::discovery::CLUSTER_INFO;
use log::info;
use serde::Serialize;
use serde_json::{Value, json};

use crate::config::KeyAlgorithm;
use crate::error::{Error, Result};
use crate::join::{Discovery, JoinContext};
use crate::paths::{self, File};
use crate::phases::{self, JoinFn, Phase};

const KUBELET_CONFIG_CM: &str = "/api/v1/namespaces/kube-system/configmaps/kubelet-config";
const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

/// A request join would send.
#[derive(Debug, Serialize)]
struct Request {
    verb: &'static str,
    kind: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    namespace: &'static str,
    name: String,
    path: String,
    /// Who sends it: anonymous (discovery) or the bootstrap token (TLS bootstrap).
    #[serde(rename = "as")]
    identity: &'static str,
    #[serde(skip_serializing_if = "Value::is_null")]
    object: Value,
}

/// A file whose content only the cluster can give.
#[derive(Debug, Serialize)]
struct FromCluster {
    path: String,
    mode: String,
    content: String,
}

pub fn run(ctx: &JoinContext, selected: &[&Phase<JoinFn>]) -> Result<()> {
    info!("[dry-run] Nothing will be written, waited for or sent; the plan is printed on stdout");
    let has = |name: &str| selected.iter().any(|p| p.name == name);
    if let Some(p) = selected.iter().find(|p| p.name == "preflight") {
        phases::run_join_phase(ctx, p)?;
    }
    let mut requests = Vec::new();
    let mut files = Vec::new();
    if has("discovery") {
        let d = ctx.args.discovery.as_ref().ok_or_else(|| {
            Error::usage("discovery needs the API server endpoint and --token (kubestrap join HOST:PORT --token ...), or --discovery-file")
        })?;
        if let Discovery::Token { pins, unsafe_skip_ca, .. } = d
            && pins.is_empty()
            && !unsafe_skip_ca
        {
            return Err(Error::usage(
                "token discovery needs --discovery-token-ca-cert-hash sha256:<hex> (from `kubestrap certs ca-hash` on a control-plane node), or --discovery-token-unsafe-skip-ca-verification",
            ));
        }
        if matches!(d, Discovery::Token { .. }) {
            requests.push(get("ConfigMap", "kube-public", "cluster-info", CLUSTER_INFO, "anonymous"));
        }
        files.push(from_cluster(
            &paths::BOOTSTRAP_KUBELET_CONF,
            "the verified server and CA, and the TLS bootstrap token; removed once kubelet.conf exists",
        ));
        if !ctx.fs.exists(&ctx.args.ca_cert_path) {
            files.push(from_cluster(&paths::ca_cert_at(&ctx.args.ca_cert_path), "the cluster CA found by discovery"));
        }
    }
    control_plane::prepare(ctx, &has, &mut requests, &mut files);
    if has("kubelet-start") {
        let name = &ctx.args.node_name;
        let node = format!("/api/v1/nodes/{name}");
        requests.push(get("Node", "", name, &node, "bootstrap token"));
        requests.push(get("ConfigMap", "kube-system", "kubelet-config", KUBELET_CONFIG_CM, "bootstrap token"));
        // A throwaway key: the real run makes its own, so only the name differs.
        let key = crate::pki::keys::generate(KeyAlgorithm::EcdsaP256)?;
        let (pem, csr_name) = crate::csr::node_csr(name, &key)?;
        let csr = crate::csr::csr_object(&csr_name, &pem, crate::csr::kubelet_client_usages(&key));
        requests.push(Request {
            verb: "create",
            kind: "CertificateSigningRequest",
            namespace: "",
            name: csr_name.clone(),
            path: CSRS.to_string(),
            identity: "bootstrap token",
            object: csr,
        });
        requests.push(Request {
            verb: "watch",
            kind: "CertificateSigningRequest",
            namespace: "",
            name: csr_name,
            path: CSRS.to_string(),
            identity: "bootstrap token",
            object: Value::Null,
        });
        files.push(from_cluster(&paths::KUBELET_INSTANCE_CONFIG, "the CRI socket given here"));
        files.push(from_cluster(
            &paths::KUBELET_CONFIG,
            "data.kubelet of the cluster's kubelet-config ConfigMap, with instance-config.yaml merged in",
        ));
        files.push(from_cluster(&paths::KUBELET_FLAGS_ENV, "the node name, taints and kubeletExtraArgs given here"));
        files.push(from_cluster(
            &paths::kubelet_client_bundle("<timestamp>"),
            "the issued client certificate and its key",
        ));
        files.push(from_cluster(&paths::KUBELET_CLIENT_CURRENT, "a symlink to the bundle above"));
        files.push(from_cluster(
            &paths::KUBELET_CONF,
            if ctx.args.control_plane.is_some() {
                "this node's own API server (advertise address and bind port) and the verified CA; the client certificate is the symlink above"
            } else {
                "the verified server and CA; the client certificate is the symlink above"
            },
        ));
    }
    let control_plane = control_plane::after_kubelet(ctx, &has, &mut requests, &mut files);
    let plan = json!({
        "dryRun": true,
        "root": ctx.fs.root().display().to_string(),
        "nodeName": ctx.args.node_name,
        "discovery": ctx.args.discovery.as_ref().filter(|_| has("discovery")).map(describe),
        "files": ctx.fs.planned(),
        "filesFromCluster": files,
        "objects": requests,
        "controlPlane": control_plane,
    });
    super::print_json(&plan)
}

fn get(kind: &'static str, namespace: &'static str, name: &str, path: &str, identity: &'static str) -> Request {
    Request {
        verb: "get",
        kind,
        namespace,
        name: name.to_string(),
        path: path.to_string(),
        identity,
        object: Value::Null,
    }
}

fn from_cluster(f: &File, content: impl Into<String>) -> FromCluster {
    FromCluster { path: f.as_str().to_string(), mode: format!("{:04o}", f.mode), content: content.into() }
}

/// Discovery as the plan shows it: never the token secret.
fn describe(d: &Discovery) -> Value {
    match d {
        Discovery::Token { endpoint, token, pins, unsafe_skip_ca, tls_bootstrap_token } => json!({
            "method": "token",
            "apiServerEndpoint": endpoint,
            "tokenId": token.id(),
            "caCertHashes": pins.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "unsafeSkipCAVerification": unsafe_skip_ca,
            "tlsBootstrapTokenId": tls_bootstrap_token.as_ref().unwrap_or(token).id(),
        }),
        Discovery::File { location, tls_bootstrap_token } => json!({
            "method": "file",
            "location": location,
            "tlsBootstrapTokenId": tls_bootstrap_token.as_ref().map(|t| t.id()),
        }),
    }
}
