//! The local etcd member's static Pod (kubeadm's phases/etcd/local.go GetEtcdPodSpec).

use serde_json::{Value, json};

use super::pod::{Component, Probe, Volume, command, last_arg, merge_env, render};
use super::{HostEnv, kv, loopback, startup_threshold, url_host};
use crate::config::InitConfig;
use crate::constants::*;

pub fn etcd(cfg: &InitConfig, env: &HostEnv) -> Option<Value> {
    etcd_pod(cfg, env, None)
}

/// The manifest of a member joining an existing cluster: `--initial-cluster` lists every member
/// (from the learner add, `etcd::add_as_learner`) and `--initial-cluster-state=existing`.
pub fn etcd_join(cfg: &InitConfig, env: &HostEnv, initial_cluster: &str) -> Option<Value> {
    etcd_pod(cfg, env, Some(initial_cluster))
}

/// kubeadm's GetEtcdProbeEndpoint: the first URL of the user's (last) `listen-metrics-urls`,
/// else the loopback metrics port over HTTP. Returns (host, port, scheme).
pub(crate) fn probe_endpoint(cfg: &InitConfig, extra: &[crate::config::types::Arg]) -> (String, u16, &'static str) {
    let localhost = if cfg.advertise_address.is_ipv6() { "::1" } else { "127.0.0.1" };
    let fallback = (localhost.to_string(), ETCD_METRICS_PORT, "HTTP");
    let Some(urls) = last_arg(extra, "listen-metrics-urls") else {
        return fallback;
    };
    let first = urls.split(',').next().unwrap_or_default();
    // Go's url.Parse rejects a scheme-less "host:port"; kubeadm then falls back.
    let Some((scheme, rest)) = first.split_once("://") else {
        return fallback;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = split_host_port(authority);
    let host = if host.is_empty() { localhost.to_string() } else { host.to_string() };
    // kubeadm's ParsePort: 1-65535, else the default metrics port.
    let port = port.parse::<u16>().ok().filter(|p| *p > 0).unwrap_or(ETCD_METRICS_PORT);
    (host, port, if scheme == "https" { "HTTPS" } else { "HTTP" })
}

/// Go's url.Hostname and url.Port: brackets stripped, a port only when all digits after the
/// last colon.
fn split_host_port(authority: &str) -> (&str, &str) {
    if let Some(rest) = authority.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((h, p)) => (h, p.strip_prefix(':').unwrap_or_default()),
            None => (rest, ""),
        };
    }
    match authority.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => (h, p),
        _ => (authority, ""),
    }
}

fn etcd_pod(cfg: &InitConfig, _env: &HostEnv, joining: Option<&str>) -> Option<Value> {
    let local = cfg.local_etcd()?;
    let adv = url_host(cfg.advertise_address);
    let lo = loopback(cfg);
    let e = format!("{}/etcd", cfg.certs_dir());
    let name = &cfg.node_name;
    let client_url = format!("https://{adv}:{ETCD_CLIENT_PORT}");
    // kubeadm 1.36+ writes the etcd 3.6 names whatever the image tag: no --experimental-* flags.
    let mut defaults = kv(&[
        ("advertise-client-urls", client_url.clone()),
        ("cert-file", format!("{e}/server.crt")),
        ("client-cert-auth", "true".into()),
        ("data-dir", local.data_dir.clone()),
        ("feature-gates", "InitialCorruptCheck=true".into()),
        ("initial-advertise-peer-urls", format!("https://{adv}:{ETCD_PEER_PORT}")),
        ("initial-cluster", joining.map_or_else(|| format!("{name}=https://{adv}:{ETCD_PEER_PORT}"), str::to_string)),
        ("key-file", format!("{e}/server.key")),
        ("listen-client-urls", format!("https://{lo}:{ETCD_CLIENT_PORT},{client_url}")),
        ("listen-metrics-urls", format!("http://{lo}:{ETCD_METRICS_PORT}")),
        ("listen-peer-urls", format!("https://{adv}:{ETCD_PEER_PORT}")),
        ("name", name.clone()),
        ("peer-cert-file", format!("{e}/peer.crt")),
        ("peer-client-cert-auth", "true".into()),
        ("peer-key-file", format!("{e}/peer.key")),
        ("peer-trusted-ca-file", format!("{e}/ca.crt")),
        ("snapshot-count", "10000".into()),
        ("trusted-ca-file", format!("{e}/ca.crt")),
        ("watch-progress-notify-interval", "5s".into()),
    ]);
    if joining.is_some() {
        defaults.push(("initial-cluster-state".into(), "existing".into()));
    }
    let cmd = command("etcd", defaults, &local.extra_args);
    let (host, port, scheme) = probe_endpoint(cfg, &local.extra_args);
    // Unlike the other components, the etcd probe host is used as parsed (no wildcard check).
    let probe = |path| Probe { host: Some(host.clone()), path, scheme };
    Some(render(&Component {
        name: "etcd",
        image: etcd_image(cfg)?,
        liveness: probe("/livez"),
        readiness: Some(probe("/readyz")),
        startup: probe("/readyz"),
        command: cmd,
        startup_failure_threshold: startup_threshold(cfg),
        requests: json!({ "cpu": "100m", "memory": "100Mi" }),
        volumes: vec![
            Volume::new("etcd-data", &local.data_dir, false, "DirectoryOrCreate"),
            Volume::new("etcd-certs", &e, false, "DirectoryOrCreate"),
        ],
        // kubeadm passes etcd only its extraEnvs, not the host's proxy variables.
        env: merge_env(&[], &local.extra_envs),
        // The member's own client URL, whatever advertise-client-urls says (kubeadm's GetClientURL).
        annotations: vec![(crate::etcd::ADVERTISE_CLIENT_URLS_ANNOTATION.into(), client_url)],
        probe_port: port,
        keep_mount_order: true,
    }))
}

/// The local etcd's image: etcd.local.imageRepository (else the cluster's) and the tag resolved
/// for this Kubernetes version; None with external etcd.
pub(crate) fn etcd_image(cfg: &InitConfig) -> Option<String> {
    let local = cfg.local_etcd()?;
    let repo = if local.image_repository.is_empty() { &cfg.cluster.image_repository } else { &local.image_repository };
    Some(format!("{repo}/etcd:{}", cfg.etcd_image_tag))
}
