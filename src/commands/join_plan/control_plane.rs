//! The control-plane phases of `join --dry-run --control-plane`: the requests they would send,
//! the files they would write (by path and mode), the etcd member calls of etcd-join and the
//! waits of wait-control-plane. The cluster's ClusterConfiguration is only read by a real run,
//! so the plan assumes its defaults (certificatesDir, stacked etcd) and says so.

use std::net::{IpAddr, SocketAddr};

use serde_json::{Value, json};

use super::{FromCluster, Request, from_cluster, get};
use crate::constants::{ETCD_CLIENT_PORT, ETCD_PEER_PORT};
use crate::etcd::{ADVERTISE_CLIENT_URLS_ANNOTATION, ETCD_PODS, HEALTHCHECK_CLIENT};
use crate::join::JoinContext;
use crate::join::control_plane::{KUBECONFIGS, MANIFESTS};
use crate::paths::{self, DEFAULT_CERTS_DIR, ETCD_DATA_DIR};
use crate::pki::copycerts::{SHARED, SHARED_LOCAL_ETCD};

const KUBEADM_CONFIG_CM: &str = "/api/v1/namespaces/kube-system/configmaps/kubeadm-config";
const KUBEADM_CERTS: &str = "/api/v1/namespaces/kube-system/secrets/kubeadm-certs";
const ASSUMES: &str = "the cluster's ClusterConfiguration (kube-system/kubeadm-config, read by a real run) keeps the default certificatesDir and stacked etcd; with external etcd the etcd files and etcd-join are skipped";

/// The phases after kubelet-start.
const AFTER_KUBELET: [&str; 3] = ["etcd-join", "mark-control-plane", "wait-control-plane"];

/// Adds what the selected control-plane phases before kubelet-start (control-plane-prepare)
/// would do to `requests` and `files`. Nothing for a worker join.
pub(super) fn prepare(
    ctx: &JoinContext,
    has: &dyn Fn(&str) -> bool,
    requests: &mut Vec<Request>,
    files: &mut Vec<FromCluster>,
) {
    let Some(cp) = ctx.args.control_plane.as_ref() else { return };
    let name = ctx.args.node_name.as_str();
    let prepare = |p: &str| has(&format!("control-plane-prepare/{p}"));
    let any = ["download-certs", "certs", "kubeconfig", "control-plane"].iter().any(|p| prepare(p))
        || AFTER_KUBELET.iter().any(|p| has(p));
    if !any {
        return;
    }
    // Every control-plane phase builds this node's config from the cluster's (the first with
    // the bootstrap token, before admin.conf exists).
    requests.push(get("ConfigMap", "kube-system", "kubeadm-config", KUBEADM_CONFIG_CM, "bootstrap token"));
    let dir = DEFAULT_CERTS_DIR;
    if prepare("download-certs") && cp.certificate_key.is_some() {
        requests.push(get("Secret", "kube-system", "kubeadm-certs", KUBEADM_CERTS, "bootstrap token"));
        for rel in SHARED.iter().chain(SHARED_LOCAL_ETCD.iter()) {
            let (base, ext) = rel.rsplit_once('.').unwrap_or((rel, ""));
            let f = if ext == "key" { paths::key(dir, base) } else { paths::cert(dir, base) };
            let f = if *rel == "sa.pub" { paths::sa_pub_downloaded(dir) } else { f };
            files.push(from_cluster(
                &f,
                format!("decrypted from the kubeadm-certs Secret's {} entry", rel.replace('/', "-")),
            ));
        }
    }
    if prepare("certs") {
        for spec in crate::pki::spec::CERTS.iter().filter(|s| s.ca.is_some()) {
            let ca = spec.ca.unwrap_or_default();
            files.push(from_cluster(&paths::key(dir, spec.name), format!("a new key for {}", spec.name)));
            let why = format!("{} signed by the shared {ca} for this node ({name})", spec.name);
            files.push(from_cluster(&paths::cert(dir, spec.name), why));
        }
    }
    if prepare("kubeconfig") {
        for k in KUBECONFIGS {
            files.push(from_cluster(&paths::kubeconfig(k), format!("{k} for this node, signed by the shared CA")));
        }
    }
    if prepare("control-plane") {
        for m in MANIFESTS {
            files.push(from_cluster(&paths::manifest(m), format!("{m} as init writes it, advertising this node")));
        }
    }
}

/// Adds what the selected control-plane phases after kubelet-start would do; returns the plan's
/// control-plane part (`None` for a worker join or none of these phases).
pub(super) fn after_kubelet(
    ctx: &JoinContext,
    has: &dyn Fn(&str) -> bool,
    requests: &mut Vec<Request>,
    files: &mut Vec<FromCluster>,
) -> Option<Value> {
    let cp = ctx.args.control_plane.as_ref()?;
    let name = ctx.args.node_name.as_str();
    let address = advertise(cp.advertise_address.as_str());
    let bind_port = cp.bind_port.and_then(|p| u16::try_from(p).ok()).unwrap_or(6443);
    let mut etcd = Vec::new();
    if has("etcd-join") {
        requests.push(Request {
            verb: "list",
            kind: "Pod",
            namespace: "kube-system",
            name: String::new(),
            path: ETCD_PODS.to_string(),
            identity: "admin.conf",
            object: Value::Null,
        });
        etcd = etcd_calls(address);
        let data = paths::etcd_data_dir(ETCD_DATA_DIR);
        files.push(FromCluster {
            path: data.path,
            mode: format!("{:04o}", data.mode),
            content: "etcd's data dir".into(),
        });
        let why =
            "etcd with --initial-cluster (the members after the learner add) and --initial-cluster-state=existing";
        files.push(from_cluster(&paths::manifest("etcd"), why));
    }
    if has("mark-control-plane") {
        let node = format!("/api/v1/nodes/{name}");
        requests.push(get("Node", "", name, &node, "admin.conf"));
        let mut patch = get("Node", "", name, &node, "admin.conf");
        patch.verb = "patch";
        patch.object = json!({"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]}});
        requests.push(patch);
    }
    let mut waits = Vec::new();
    if has("wait-control-plane") {
        let api = SocketAddr::new(address.unwrap_or(IpAddr::from([0, 0, 0, 0])), bind_port);
        let secs = |d: std::time::Duration| format!("{}s", d.as_secs());
        waits.push(json!({"component": "kubelet", "url": "http://<healthzBindAddress>:<healthzPort>/healthz of the cluster's kubelet-config (127.0.0.1:10248 by default)", "timeout": secs(ctx.args.kubelet_health_timeout)}));
        waits.push(json!({"component": "kube-apiserver", "url": format!("https://{api}/livez"), "timeout": secs(ctx.args.control_plane_health_timeout)}));
    }
    Some(json!({
        "advertiseAddress": address.map(|a| a.to_string()),
        "bindPort": bind_port,
        "assumes": ASSUMES,
        "etcdCalls": etcd,
        "waits": waits,
    }))
}

/// The given advertise address, else (as a real run) this machine's default-route address.
fn advertise(given: &str) -> Option<IpAddr> {
    given.parse().ok().or_else(|| crate::host::facts().default_address)
}

/// The etcd v3 calls etcd-join makes (JSON gateway, with the healthcheck client certificate).
fn etcd_calls(address: Option<IpAddr>) -> Vec<Value> {
    let url = |port: u16| match address {
        Some(a) => format!("https://{}", SocketAddr::new(a, port)),
        None => format!("https://<advertise address>:{port}"),
    };
    let (peer, client) = (url(ETCD_PEER_PORT), url(ETCD_CLIENT_PORT));
    let call = |call: &str, path: &str, body: Value, to: String, when: &str| {
        json!({"call": call, "method": "POST", "path": path, "body": body, "to": to,
            "as": format!("{HEALTHCHECK_CLIENT}.crt"), "when": when})
    };
    let pods = format!("the client URLs in the etcd Pods' {ADVERTISE_CLIENT_URLS_ANNOTATION} annotation");
    vec![
        call(
            "MemberList",
            "/v3/cluster/member/list",
            json!({}),
            pods,
            "first: the members' client URLs replace the Pods'; a member with this peer URL (a rerun) is reused",
        ),
        call(
            "MemberAdd",
            "/v3/cluster/member/add",
            json!({"peerURLs": [peer], "isLearner": true}),
            "the members".into(),
            "unless the member exists; retried while etcd refuses it (another node's learner, an unhealthy cluster)",
        ),
        call(
            "MemberPromote",
            "/v3/cluster/member/promote",
            json!({"ID": "<the learner's ID>"}),
            "the members".into(),
            "after the etcd manifest is written, once the kubelet runs it and the learner has caught up",
        ),
        call(
            "Status",
            "/v3/maintenance/status",
            json!({}),
            format!("every member, {client} included"),
            "until each answers",
        ),
    ]
}
