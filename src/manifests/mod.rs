//! Static Pod manifests for etcd and the control-plane components, with current kubeadm's
//! flags, probes, volumes and resources.

mod etcd;
pub mod pod;

use std::net::IpAddr;

use serde_json::{Value, json};

use crate::config::InitConfig;
use crate::constants::*;
use pod::{Component, Probe, Volume, command, last_arg, merge_env, probe_address, render};

pub(crate) use etcd::etcd_image;
pub use etcd::{etcd, etcd_join};

/// CA bundle dirs mounted into the API server and controller-manager when they exist on the host.
pub(crate) const OPTIONAL_CA_DIRS: &[&str] = &[
    "/etc/ca-certificates",
    "/etc/pki/ca-trust",
    "/etc/pki/tls/certs",
    "/usr/local/share/ca-certificates",
    "/usr/share/ca-certificates",
];

/// What the manifests take from the machine rather than the config.
#[derive(Debug, Clone, Default)]
pub struct HostEnv {
    /// `*_proxy` variables of our own environment, passed to the components (as kubeadm does).
    pub proxy_env: Vec<(String, String)>,
    /// Which of OPTIONAL_CA_DIRS exist on the node.
    pub ca_dirs: Vec<String>,
}

pub(crate) fn url_host(ip: IpAddr) -> String {
    if ip.is_ipv6() { format!("[{ip}]") } else { ip.to_string() }
}

pub(crate) fn loopback(cfg: &InitConfig) -> &'static str {
    if cfg.advertise_address.is_ipv6() { "[::1]" } else { "127.0.0.1" }
}

pub(crate) fn kv(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

/// kubeadm's StartupProbe: ceil(controlPlaneComponentHealthCheck seconds / the 10 s period).
fn startup_threshold(cfg: &InitConfig) -> u64 {
    (cfg.control_plane_health_timeout.as_secs_f64() / 10.0).ceil() as u64
}

/// kubeadm's Get{ControllerManager,Scheduler}ProbeAddress: the user's (last) --bind-address,
/// else 127.0.0.1.
fn bind_probe_host(extra: &[crate::config::types::Arg]) -> Option<String> {
    probe_address(last_arg(extra, "bind-address").unwrap_or("127.0.0.1"))
}

/// kubeadm's getEtcdCertVolumes: one read-only mount per directory holding an external etcd
/// file, skipping directories already mounted (the certificates dir, /etc/ssl/certs and every
/// optional CA dir, whether or not it exists) and directories under another one kept.
fn etcd_cert_volumes(ext: &crate::config::types::ExternalEtcd, certs_dir: &str) -> Vec<Volume> {
    let mut dirs: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    for file in [&ext.ca_file, &ext.cert_file, &ext.key_file] {
        let dir = std::path::Path::new(file.as_str()).parent().map(|d| d.display().to_string()).unwrap_or_default();
        let mounted = OPTIONAL_CA_DIRS.iter().any(|c| dir.starts_with(c))
            || dir.starts_with("/etc/ssl/certs")
            || dir.starts_with(certs_dir);
        if dir.is_empty() || mounted {
            continue;
        }
        // A parent replaces its children; a child of a kept dir is not added (plain prefix
        // tests, as kubeadm's).
        if dirs.iter().any(|d| dir.starts_with(d.as_str()) && !d.starts_with(dir.as_str())) {
            continue;
        }
        dirs.retain(|d| !d.starts_with(dir.as_str()));
        dirs.insert(dir);
    }
    dirs.iter()
        .enumerate()
        .map(|(i, d)| Volume::new(&format!("etcd-certs-{i}"), d, true, "DirectoryOrCreate"))
        .collect()
}

fn ca_volumes(env: &HostEnv) -> Vec<Volume> {
    let mut v = vec![Volume::new("ca-certs", "/etc/ssl/certs", true, "DirectoryOrCreate")];
    for d in &env.ca_dirs {
        v.push(Volume::new(d.trim_start_matches('/').replace('/', "-").as_str(), d, true, "DirectoryOrCreate"));
    }
    v
}

pub(crate) fn kube_apiserver(cfg: &InitConfig, env: &HostEnv) -> Value {
    let p = cfg.certs_dir();
    let comp = &cfg.cluster.api_server;
    let mut d = kv(&[
        ("advertise-address", cfg.advertise_address.to_string()),
        ("allow-privileged", "true".into()),
        ("client-ca-file", format!("{p}/ca.crt")),
        ("enable-admission-plugins", "NodeRestriction".into()),
        ("enable-bootstrap-token-auth", "true".into()),
        ("kubelet-client-certificate", format!("{p}/apiserver-kubelet-client.crt")),
        ("kubelet-client-key", format!("{p}/apiserver-kubelet-client.key")),
        ("kubelet-preferred-address-types", "InternalIP,ExternalIP,Hostname".into()),
        ("proxy-client-cert-file", format!("{p}/front-proxy-client.crt")),
        ("proxy-client-key-file", format!("{p}/front-proxy-client.key")),
        ("requestheader-allowed-names", "front-proxy-client".into()),
        ("requestheader-client-ca-file", format!("{p}/front-proxy-ca.crt")),
        ("requestheader-extra-headers-prefix", "X-Remote-Extra-".into()),
        ("requestheader-group-headers", "X-Remote-Group".into()),
        ("requestheader-username-headers", "X-Remote-User".into()),
        ("secure-port", cfg.bind_port.to_string()),
        ("service-account-issuer", format!("https://kubernetes.default.svc.{}", cfg.cluster.networking.dns_domain)),
        ("service-account-key-file", format!("{p}/sa.pub")),
        ("service-account-signing-key-file", format!("{p}/sa.key")),
        ("service-cluster-ip-range", cfg.cluster.networking.service_subnet.clone()),
        ("tls-cert-file", format!("{p}/apiserver.crt")),
        ("tls-private-key-file", format!("{p}/apiserver.key")),
    ]);
    if !comp.extra_args.iter().any(|a| a.name == "authorization-config") {
        d.push(("authorization-mode".into(), "Node,RBAC".into()));
    }
    let mut volumes = vec![Volume::new("k8s-certs", p, true, "DirectoryOrCreate")];
    volumes.extend(ca_volumes(env));
    match cfg.external_etcd() {
        Some(ext) => {
            d.push(("etcd-servers".into(), ext.endpoints.join(",")));
            if !ext.ca_file.is_empty() {
                d.push(("etcd-cafile".into(), ext.ca_file.clone()));
            }
            if !ext.cert_file.is_empty() && !ext.key_file.is_empty() {
                d.push(("etcd-certfile".into(), ext.cert_file.clone()));
                d.push(("etcd-keyfile".into(), ext.key_file.clone()));
            }
            volumes.extend(etcd_cert_volumes(ext, p));
        }
        None => {
            // The user's (last) advertise-client-urls for local etcd replaces etcd-servers.
            let servers = cfg
                .local_etcd()
                .and_then(|l| last_arg(&l.extra_args, "advertise-client-urls"))
                .map(str::to_string)
                .unwrap_or_else(|| format!("https://{}:{ETCD_CLIENT_PORT}", loopback(cfg)));
            d.extend(kv(&[
                ("etcd-cafile", format!("{p}/etcd/ca.crt")),
                ("etcd-certfile", format!("{p}/apiserver-etcd-client.crt")),
                ("etcd-keyfile", format!("{p}/apiserver-etcd-client.key")),
                ("etcd-servers", servers),
            ]));
        }
    }
    volumes.extend(comp.extra_volumes.iter().map(Volume::from_extra));
    let cmd = command("kube-apiserver", d, &comp.extra_args);
    // kubeadm probes the advertise address and bind port of localAPIEndpoint, not extraArgs.
    let host = probe_address(&cfg.advertise_address.to_string());
    let probe = |path| Probe { host: host.clone(), path, scheme: "HTTPS" };
    render(&Component {
        name: "kube-apiserver",
        image: cfg.image("kube-apiserver"),
        liveness: probe("/livez"),
        readiness: Some(probe("/readyz")),
        startup: probe("/livez"),
        startup_failure_threshold: startup_threshold(cfg),
        requests: json!({ "cpu": "250m" }),
        volumes,
        env: merge_env(&env.proxy_env, &comp.extra_envs),
        annotations: vec![(
            "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint".into(),
            format!("{}:{}", url_host(cfg.advertise_address), cfg.bind_port),
        )],
        probe_port: cfg.bind_port,
        keep_mount_order: false,
        command: cmd,
    })
}

/// `external_ca`: the cluster CA has no key on this node, so the controller-manager cannot sign.
pub(crate) fn kube_controller_manager(cfg: &InitConfig, env: &HostEnv, external_ca: bool) -> Value {
    let p = cfg.certs_dir();
    let k = format!("{KUBERNETES_DIR}/{CONTROLLER_MANAGER_CONF}");
    let comp = &cfg.cluster.controller_manager;
    let (sign_cert, sign_key) =
        if external_ca { (String::new(), String::new()) } else { (format!("{p}/ca.crt"), format!("{p}/ca.key")) };
    let mut d = kv(&[
        ("authentication-kubeconfig", k.clone()),
        ("authorization-kubeconfig", k.clone()),
        ("bind-address", "127.0.0.1".into()),
        ("client-ca-file", format!("{p}/ca.crt")),
        ("cluster-name", cfg.cluster.cluster_name.clone()),
        ("cluster-signing-cert-file", sign_cert),
        ("cluster-signing-key-file", sign_key),
        ("controllers", "*,bootstrapsigner,tokencleaner".into()),
        ("kubeconfig", k.clone()),
        ("leader-elect", "true".into()),
        ("requestheader-client-ca-file", format!("{p}/front-proxy-ca.crt")),
        ("root-ca-file", format!("{p}/ca.crt")),
        ("service-account-private-key-file", format!("{p}/sa.key")),
        ("use-service-account-credentials", "true".into()),
    ]);
    if !cfg.pod_subnets.is_empty() {
        d.extend(kv(&[
            ("allocate-node-cidrs", "true".into()),
            ("cluster-cidr", cfg.cluster.networking.pod_subnet.clone()),
            ("service-cluster-ip-range", cfg.cluster.networking.service_subnet.clone()),
        ]));
    }
    let cmd = command("kube-controller-manager", d, &comp.extra_args);
    let mut volumes = vec![
        Volume::new("k8s-certs", p, true, "DirectoryOrCreate"),
        Volume::new("kubeconfig", &k, true, "FileOrCreate"),
    ];
    volumes.extend(ca_volumes(env));
    volumes.extend(comp.extra_volumes.iter().map(Volume::from_extra));
    let probe = Probe { host: bind_probe_host(&comp.extra_args), path: "/healthz", scheme: "HTTPS" };
    render(&Component {
        name: "kube-controller-manager",
        image: cfg.image("kube-controller-manager"),
        liveness: probe.clone(),
        readiness: None,
        startup: probe,
        startup_failure_threshold: startup_threshold(cfg),
        requests: json!({ "cpu": "200m" }),
        volumes,
        env: merge_env(&env.proxy_env, &comp.extra_envs),
        annotations: vec![],
        // kubeadm's constant port, even when extraArgs move --secure-port.
        probe_port: KCM_PORT,
        keep_mount_order: false,
        command: cmd,
    })
}

pub(crate) fn kube_scheduler(cfg: &InitConfig, env: &HostEnv) -> Value {
    let s = format!("{KUBERNETES_DIR}/{SCHEDULER_CONF}");
    let comp = &cfg.cluster.scheduler;
    let d = kv(&[
        ("authentication-kubeconfig", s.clone()),
        ("authorization-kubeconfig", s.clone()),
        ("bind-address", "127.0.0.1".into()),
        ("kubeconfig", s.clone()),
        ("leader-elect", "true".into()),
    ]);
    let cmd = command("kube-scheduler", d, &comp.extra_args);
    let mut volumes = vec![Volume::new("kubeconfig", &s, true, "FileOrCreate")];
    volumes.extend(comp.extra_volumes.iter().map(Volume::from_extra));
    let host = bind_probe_host(&comp.extra_args);
    let probe = |path| Probe { host: host.clone(), path, scheme: "HTTPS" };
    render(&Component {
        name: "kube-scheduler",
        image: cfg.image("kube-scheduler"),
        // kubeadm 1.37: /livez and /readyz for the scheduler (the controller-manager keeps /healthz).
        liveness: probe("/livez"),
        readiness: Some(probe("/readyz")),
        startup: probe("/livez"),
        startup_failure_threshold: startup_threshold(cfg),
        requests: json!({ "cpu": "100m" }),
        volumes,
        env: merge_env(&env.proxy_env, &comp.extra_envs),
        annotations: vec![],
        probe_port: SCHEDULER_PORT,
        keep_mount_order: false,
        command: cmd,
    })
}

#[cfg(test)]
mod etcd_join_tests;

#[cfg(test)]
mod tests;
