//! `kubestrap join --dry-run`: the real join phases on a dry-run [`NodeFs`], every request
//! answered by a [`Recorder`] seeded with what the cluster would hold, under a [`FakeClock`] so
//! no wait waits. The plan is read back from what the phases did: the files they wrote (in
//! order), the requests they sent and as whom, and etcd-join's calls.
//!
//! The cluster is a stand-in: a control plane made as init makes one (its PKI, kubeadm-config,
//! kubelet-config, a cluster-info signed for the join's token, kubeadm-certs sealed with the
//! join's certificate key, one etcd member), so file contents and the CA are the stand-in's,
//! never shown. Discovery checks the stand-in's CA against its own pin: the cluster's real CA
//! is only known to a real run.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine;
use log::info;
use serde::Serialize;
use serde_json::{Value, json};

use self::objects::requests;
use super::{Discovery, JoinArgs, JoinContext};
use crate::clock::FakeClock;
use crate::config::InitConfig;
use crate::constants::{ETCD_CLIENT_PORT, ETCD_PEER_PORT};
use crate::discovery::{CLUSTER_INFO, CaPin};
use crate::error::{Error, Result};
use crate::etcd::{ADVERTISE_CLIENT_URLS_ANNOTATION, ETCD_PODS, HEALTHCHECK_CLIENT};
use crate::fsutil::{NodeFs, PlannedFile};
use crate::kube::{Exchange, Recorder, StandIn};
use crate::node::Node;
use crate::paths::{self, DEFAULT_CERTS_DIR, ETCD_DATA_DIR};
use crate::pki::copycerts;

const ASSUMES: &str = "the cluster's ClusterConfiguration (kube-system/kubeadm-config, read by a real run) keeps the default certificatesDir and stacked etcd; with external etcd the etcd files and etcd-join are skipped";

/// The stand-in control plane's address (TEST-NET-1: never a real machine).
const STAND_IN_ADDRESS: &str = "192.0.2.10";

/// Runs the phases named in `selected` (through `run_phase`: the table is `phases`', above
/// join) as a dry run and returns the plan.
pub fn run(
    mut args: JoinArgs,
    fs: &NodeFs,
    selected: &[&'static str],
    run_phase: &dyn Fn(&JoinContext, &str) -> Result<()>,
) -> Result<Value> {
    info!("[dry-run] Nothing will be written, waited for or sent; the plan is printed on stdout");
    info!(
        "[dry-run] The phases run against a stand-in cluster: discovery verifies its CA in place of the one the hash pins, and every wait ends at once"
    );
    let has = |name: &str| selected.contains(&name);
    let discovery = args.discovery.as_ref().filter(|_| has("discovery")).map(describe);
    let (cluster, recorder) = stand_in(&mut args)?;
    let clock = FakeClock::new();
    let mut ctx = JoinContext::on(&args, Node::new(fs, &clock, None));
    ctx.dry_run_api = Some(recorder.clone());
    // Each phase's share of the dry-run log.
    let mut slices = Vec::new();
    for &name in selected {
        if args.control_plane.is_some()
            && name.starts_with("control-plane-prepare/")
            && name != "control-plane-prepare/download-certs"
        {
            cluster.copy_shared(fs)?;
        }
        let start = fs.dry_run_log().len();
        run_phase(&ctx, name)?;
        slices.push((name, start, fs.dry_run_log().len()));
    }
    let (files, from_cluster) = split_files(&args, fs, slices);
    let exchanges = recorder.exchanges();
    let control_plane = control_plane_plan(&args, has("wait-control-plane"), &exchanges);
    Ok(json!({
        "dryRun": true,
        "root": fs.root().display().to_string(),
        "nodeName": args.node_name,
        "discovery": discovery,
        "files": files,
        "filesFromCluster": from_cluster,
        "objects": requests(&exchanges),
        "controlPlane": control_plane,
    }))
}

/// The stand-in cluster and the recorder that answers as it; a token discovery's pins become the
/// stand-in's CA.
fn stand_in(args: &mut JoinArgs) -> Result<(Cluster, Recorder)> {
    // The stand-in's own certs phase would log as if it were this node's.
    let level = log::max_level();
    log::set_max_level(log::LevelFilter::Warn.min(level));
    let cluster = Cluster::new(args);
    log::set_max_level(level);
    let cluster = cluster?;
    let recorder = cluster.recorder(args)?;
    if let Some(Discovery::Token { pins, .. }) = &mut args.discovery
        && !pins.is_empty()
    {
        *pins = vec![cluster.ca_pin()?];
    }
    Ok((cluster, recorder))
}

/// The files the phases wrote, from each phase's `(name, start, end)` slice of the dry-run log:
/// preflight's are this node's own (planned in full), the rest come from the cluster.
fn split_files(
    args: &JoinArgs,
    fs: &NodeFs,
    slices: Vec<(&str, usize, usize)>,
) -> (Vec<PlannedFile>, Vec<FromCluster>) {
    let log = fs.dry_run_log();
    let mut local = HashSet::new();
    let mut from_cluster = Vec::new();
    for (phase, start, end) in slices {
        for (path, mode) in &log[start..end] {
            if phase == "preflight" {
                local.insert(path.clone());
            } else {
                from_cluster.extend(describe_file(args, phase, path, mode));
            }
        }
    }
    let files: Vec<_> = fs.planned().into_iter().filter(|f| local.contains(&f.path)).collect();
    (files, from_cluster)
}

/// A control-plane join's part of the plan: its address, etcd-join's calls and the waits.
fn control_plane_plan(args: &JoinArgs, waits_run: bool, exchanges: &[Exchange]) -> Option<Value> {
    args.control_plane.as_ref().map(|cp| {
        let address = cp.advertise_address.parse().ok().or_else(|| crate::host::facts().default_address);
        let bind_port = cp.bind_port.and_then(|p| u16::try_from(p).ok()).unwrap_or(6443);
        let mut waits = Vec::new();
        if waits_run {
            let api = std::net::SocketAddr::new(address.unwrap_or(std::net::IpAddr::from([0, 0, 0, 0])), bind_port);
            let secs = |d: std::time::Duration| format!("{}s", d.as_secs());
            waits.push(json!({"component": "kubelet", "url": "http://<healthzBindAddress>:<healthzPort>/healthz of the cluster's kubelet-config (127.0.0.1:10248 by default)", "timeout": secs(args.kubelet_health_timeout)}));
            waits.push(json!({"component": "kube-apiserver", "url": format!("https://{api}/livez"), "timeout": secs(args.control_plane_health_timeout)}));
        }
        json!({
            "advertiseAddress": address.map(|a| a.to_string()),
            "bindPort": bind_port,
            "assumes": ASSUMES,
            "etcdCalls": etcd_calls(exchanges, address),
            "waits": waits,
        })
    })
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

/// The stand-in control plane: its config and its files (a dry-run NodeFs of its own).
struct Cluster {
    cfg: InitConfig,
    pki: NodeFs,
}

impl Cluster {
    fn new(args: &JoinArgs) -> Result<Cluster> {
        let endpoint = match &args.discovery {
            Some(Discovery::Token { endpoint, .. }) => endpoint.clone(),
            _ => format!("{STAND_IN_ADDRESS}:6443"),
        };
        // ECDSA: quick keys, and no key material is ever shown.
        let text = format!(
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nlocalAPIEndpoint:\n  advertiseAddress: {STAND_IN_ADDRESS}\nnodeRegistration:\n  name: dry-run-control-plane\n  criSocket: unix:///run/containerd/containerd.sock\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\ncontrolPlaneEndpoint: \"{endpoint}\"\nencryptionAlgorithm: ECDSA-P256\n"
        );
        let source = "the dry run's stand-in cluster";
        let docs = crate::config::parse_documents(source, &text)?;
        let cfg = crate::config::resolve_init(source, docs, &crate::host::facts())?;
        // A root nothing is read from: the stand-in's files live in its plan only.
        let pki = NodeFs::dry_run("/nonexistent/kubestrap-dry-run-cluster");
        let keys = crate::pki::keys::KeyPool::new(cfg.key_algorithm);
        crate::pki::ensure_certs(&pki, &cfg, time::OffsetDateTime::now_utc(), &keys)?;
        Ok(Cluster { cfg, pki })
    }

    fn file(&self, path: &str) -> Result<Vec<u8>> {
        self.pki.read(path)?.ok_or_else(|| Error::internal(format!("internal: the dry run's stand-in has no {path}")))
    }

    fn ca_pem(&self) -> Result<Vec<u8>> {
        self.file(paths::cert(self.cfg.certs_dir(), "ca").as_str())
    }

    fn ca_pin(&self) -> Result<CaPin> {
        let pem = self.ca_pem()?;
        let (_, p) = x509_parser::pem::parse_x509_pem(&pem)
            .map_err(|e| Error::internal(format!("internal: the stand-in CA: {e}")))?;
        CaPin::of_cert_der(&p.contents).map_err(|e| Error::internal(format!("internal: the stand-in CA: {e}")))
    }

    /// A recorder holding what the cluster would answer the join's reads with.
    fn recorder(&self, args: &JoinArgs) -> Result<Recorder> {
        let r = Recorder::default();
        let seed = |obj: Value| -> Result<()> {
            let path = crate::kube::paths::object(&obj).map_err(|e| Error::internal(format!("internal: {e}")))?;
            r.seed(&path, obj);
            Ok(())
        };
        let ca_pem = self.ca_pem()?;
        let (mut info, kubeconfig) = crate::objects::configmaps::cluster_info(&self.cfg, &ca_pem);
        if let Some(Discovery::Token { token, .. }) = &args.discovery {
            info["data"][format!("jws-kubeconfig-{}", token.id())] =
                json!(crate::discovery::jws_sign(&kubeconfig, token));
        }
        r.seed(CLUSTER_INFO, info);
        seed(crate::objects::configmaps::kubelet_config_map(&self.cfg).map_err(|e| Error::internal(e.to_string()))?)?;
        seed(crate::objects::configmaps::kubeadm_config(&self.cfg).map_err(|e| Error::internal(e.to_string()))?)?;
        // Init made it; mark-control-plane's create of it is refused as existing.
        seed(crate::objects::rbac::cluster_admins_binding())?;
        if let Some(key) = args.control_plane.as_ref().and_then(|cp| cp.certificate_key.as_ref()) {
            let mut data = serde_json::Map::new();
            for t in copycerts::files_to_transfer(&self.cfg) {
                let sealed = key.seal(&self.file(&t.path)?)?;
                data.insert(t.key, json!(base64::engine::general_purpose::STANDARD.encode(sealed)));
            }
            seed(json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": "kubeadm-certs", "namespace": "kube-system"}, "data": data}))?;
        }
        let pod = json!({"metadata": {"name": "etcd-dry-run-control-plane", "namespace": "kube-system",
            "annotations": {ADVERTISE_CLIENT_URLS_ANNOTATION: format!("https://{STAND_IN_ADDRESS}:{ETCD_CLIENT_PORT}")}}});
        r.seed(ETCD_PODS, json!({"apiVersion": "v1", "kind": "PodList", "items": [pod]}));
        let member = json!({"ID": "1", "name": "dry-run-control-plane",
            "peerURLs": [format!("https://{STAND_IN_ADDRESS}:{ETCD_PEER_PORT}")],
            "clientURLs": [format!("https://{STAND_IN_ADDRESS}:{ETCD_CLIENT_PORT}")]});
        r.set_stand_in(Arc::new(Rest { members: Mutex::new(vec![member]), certificate: ca_pem }));
        Ok(r)
    }

    /// A control-plane join without --certificate-key needs the shared CAs and keys copied by
    /// hand first; the dry run assumes they were (the stand-in's), without listing them.
    fn copy_shared(&self, fs: &NodeFs) -> Result<()> {
        for t in copycerts::files_to_transfer(&self.cfg) {
            if fs.exists(&t.path) {
                continue;
            }
            let data = self.file(&t.path)?;
            let private = String::from_utf8_lossy(&data).contains("PRIVATE KEY-----");
            let mode = if private { paths::PRIVATE } else { paths::READABLE };
            info!("[dry-run] Assuming {} was copied from the first control plane", t.path);
            fs.write(&paths::File::at(t.path, mode), &data)?;
        }
        Ok(())
    }
}

/// What the recorder alone cannot answer: etcd's gateway and the CSR signer.
struct Rest {
    members: Mutex<Vec<Value>>,
    /// What the signer issues (the stand-in CA's certificate: only its form is checked).
    certificate: Vec<u8>,
}

impl StandIn for Rest {
    fn answer(&self, method: &str, path: &str, body: &Value) -> Option<(u16, Value)> {
        if method != "POST" || !path.starts_with("/v3/") {
            return None;
        }
        let mut members = self.members.lock().unwrap_or_else(PoisonError::into_inner);
        let header = json!({"cluster_id": "1", "member_id": "1"});
        let answer = match path {
            "/v3/cluster/member/list" => json!({"header": header, "members": members.clone()}),
            "/v3/cluster/member/add" => {
                let m = json!({"ID": (members.len() + 1).to_string(), "peerURLs": body["peerURLs"],
                    "isLearner": body["isLearner"]});
                members.push(m.clone());
                json!({"header": header, "member": m, "members": members.clone()})
            }
            "/v3/cluster/member/promote" => {
                for m in members.iter_mut().filter(|m| m["ID"] == body["ID"]) {
                    m["isLearner"] = json!(false);
                }
                json!({"header": header, "members": members.clone()})
            }
            "/v3/maintenance/status" => json!({"header": header, "version": "3.6.0", "leader": "1", "raftIndex": "1"}),
            _ => return None,
        };
        Some((200, answer))
    }

    fn watched(&self, object: &Value) -> Option<Value> {
        if object["kind"] != "CertificateSigningRequest" {
            return None;
        }
        let mut issued = object.clone();
        issued["status"] = json!({
            "conditions": [{"type": "Approved", "status": "True", "reason": "DryRun"}],
            "certificate": base64::engine::general_purpose::STANDARD.encode(&self.certificate),
        });
        Some(issued)
    }
}

/// A file whose content only the cluster can give.
#[derive(Debug, Serialize)]
struct FromCluster {
    path: String,
    mode: String,
    content: String,
}

/// A file a phase wrote, with where its content comes from; `None` for what the phase removes
/// itself (the TLS bootstrap's temp key).
fn describe_file(args: &JoinArgs, phase: &str, path: &str, mode: &str) -> Option<FromCluster> {
    let dir = DEFAULT_CERTS_DIR;
    let node = args.node_name.as_str();
    let name = path.rsplit('/').next().unwrap_or(path);
    let bundle = paths::kubelet_client_bundle("<timestamp>");
    let (before, after) = bundle.as_str().split_once("<timestamp>").unwrap_or((bundle.as_str(), ""));
    let mut shown = path.to_string();
    let content = match phase {
        "discovery" if path == paths::BOOTSTRAP_KUBELET_CONF.as_str() => {
            "the verified server and CA, and the TLS bootstrap token; removed once kubelet.conf exists".into()
        }
        "discovery" => "the cluster CA found by discovery".into(),
        "control-plane-prepare/download-certs" => format!(
            "decrypted from the kubeadm-certs Secret's {} entry",
            path.strip_prefix(&format!("{dir}/")).unwrap_or(path).replace('/', "-")
        ),
        "control-plane-prepare/certs" => {
            let spec = crate::pki::spec::CERTS.iter().find(|s| {
                paths::cert(dir, s.name).as_str() == path || paths::key(dir, s.name).as_str() == path
            });
            match spec {
                Some(s) if paths::key(dir, s.name).as_str() == path => format!("a new key for {}", s.name),
                Some(s) => format!("{} signed by the shared {} for this node ({node})", s.name, s.ca.unwrap_or_default()),
                None => format!("written by the {phase} phase"),
            }
        }
        "control-plane-prepare/kubeconfig" => format!("{name} for this node, signed by the shared CA"),
        "control-plane-prepare/control-plane" => {
            format!("{} as init writes it, advertising this node", name.trim_end_matches(".yaml"))
        }
        "kubelet-start" if path == paths::KUBELET_CLIENT_KEY_TMP.as_str() => return None,
        "kubelet-start" if path == paths::KUBELET_INSTANCE_CONFIG.as_str() => "the CRI socket given here".into(),
        "kubelet-start" if path == paths::KUBELET_CONFIG.as_str() => {
            "data.kubelet of the cluster's kubelet-config ConfigMap, with instance-config.yaml merged in".into()
        }
        "kubelet-start" if path == paths::KUBELET_FLAGS_ENV.as_str() => {
            "the node name, taints and kubeletExtraArgs given here".into()
        }
        "kubelet-start" if path == paths::KUBELET_CLIENT_CURRENT.as_str() => "a symlink to the bundle above".into(),
        "kubelet-start" if path == paths::KUBELET_CONF.as_str() => if args.control_plane.is_some() {
            "this node's own API server (advertise address and bind port) and the verified CA; the client certificate is the symlink above"
        } else {
            "the verified server and CA; the client certificate is the symlink above"
        }
        .into(),
        "kubelet-start" if path.starts_with(before) && path.ends_with(after) => {
            // The timestamp is the run's own.
            shown = bundle.as_str().to_string();
            "the issued client certificate and its key".into()
        }
        "etcd-join" if path == paths::etcd_data_dir(ETCD_DATA_DIR).path => "etcd's data dir".into(),
        "etcd-join" if path == paths::manifest("etcd").as_str() => {
            "etcd with --initial-cluster (the members after the learner add) and --initial-cluster-state=existing".into()
        }
        _ => format!("written by the {phase} phase"),
    };
    Some(FromCluster { path: shown, mode: mode.to_string(), content })
}

/// etcd-join's calls (JSON gateway, with the healthcheck client certificate), each at its first
/// use.
fn etcd_calls(exchanges: &[Exchange], address: Option<std::net::IpAddr>) -> Vec<Value> {
    let url = |port: u16| match address {
        Some(a) => format!("https://{}", std::net::SocketAddr::new(a, port)),
        None => format!("https://<advertise address>:{port}"),
    };
    let client = url(ETCD_CLIENT_PORT);
    let call = |call: &str, path: &str, body: Value, to: String, when: &str| {
        json!({"call": call, "method": "POST", "path": path, "body": body, "to": to,
            "as": format!("{HEALTHCHECK_CLIENT}.crt"), "when": when})
    };
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for e in exchanges.iter().filter(|e| e.path.starts_with("/v3/")) {
        if !seen.insert(e.path.as_str()) {
            continue;
        }
        out.push(match e.path.as_str() {
            "/v3/cluster/member/list" => call(
                "MemberList",
                &e.path,
                json!({}),
                format!("the client URLs in the etcd Pods' {ADVERTISE_CLIENT_URLS_ANNOTATION} annotation"),
                "first: the members' client URLs replace the Pods'; a member with this peer URL (a rerun) is reused",
            ),
            "/v3/cluster/member/add" => call(
                "MemberAdd",
                &e.path,
                e.body.clone(),
                "the members".into(),
                "unless the member exists; retried while etcd refuses it (another node's learner, an unhealthy cluster)",
            ),
            "/v3/cluster/member/promote" => call(
                "MemberPromote",
                &e.path,
                json!({"ID": "<the learner's ID>"}),
                "the members".into(),
                "after the etcd manifest is written, once the kubelet runs it and the learner has caught up",
            ),
            "/v3/maintenance/status" => call(
                "Status",
                &e.path,
                json!({}),
                format!("every member, {client} included"),
                "until each answers",
            ),
            other => call(other, other, e.body.clone(), "the members".into(), ""),
        });
    }
    out
}

mod objects;

#[cfg(test)]
mod tests;
