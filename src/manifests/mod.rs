//! Static Pod manifests for etcd and the control-plane components, with current kubeadm's
//! flags, probes, volumes and resources.

pub mod pod;

use std::net::IpAddr;

use serde_json::{Value, json};

use crate::config::InitConfig;
use crate::constants::*;
use pod::{Component, Probe, Volume, command, flag_value, merge_env, render};

/// CA bundle dirs mounted into the API server and controller-manager when they exist on the host.
pub const OPTIONAL_CA_DIRS: &[&str] = &[
    "/etc/ca-certificates",
    "/etc/pki/ca-trust",
    "/etc/pki/tls/certs",
    "/usr/local/share/ca-certificates",
    "/usr/share/ca-certificates",
];
pub const FLEXVOLUME_DIR: &str = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec";

/// What the manifests take from the machine rather than the config.
#[derive(Debug, Clone, Default)]
pub struct HostEnv {
    /// `*_proxy` variables of our own environment, passed to the components (as kubeadm does).
    pub proxy_env: Vec<(String, String)>,
    /// Which of OPTIONAL_CA_DIRS exist on the node.
    pub ca_dirs: Vec<String>,
}

fn url_host(ip: IpAddr) -> String {
    if ip.is_ipv6() { format!("[{ip}]") } else { ip.to_string() }
}

fn loopback(cfg: &InitConfig) -> &'static str {
    if cfg.advertise_address.is_ipv6() { "[::1]" } else { "127.0.0.1" }
}

fn kv(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

/// A probe aimed at a wildcard bind address has no host: the kubelet then uses the Pod IP
/// (the node's, with hostNetwork), as kubeadm does.
fn probe_host(addr: &str) -> Option<String> {
    match addr.parse::<IpAddr>() {
        Ok(ip) if ip.is_unspecified() => None,
        _ => Some(addr.to_string()),
    }
}

fn startup_threshold(cfg: &InitConfig) -> u64 {
    cfg.control_plane_health_timeout.as_secs().div_ceil(10).max(1)
}

fn ca_volumes(env: &HostEnv) -> Vec<Volume> {
    let mut v = vec![Volume::new("ca-certs", "/etc/ssl/certs", true, "DirectoryOrCreate")];
    for d in &env.ca_dirs {
        v.push(Volume::new(d.trim_start_matches('/').replace('/', "-").as_str(), d, true, "DirectoryOrCreate"));
    }
    v
}

/// etcd's image tag decides its flag dialect: 3.6 renamed the experimental flags.
fn etcd_is_36_or_newer(tag: &str) -> bool {
    let mut it = tag.trim_start_matches('v').split(['.', '-']).map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (major, minor) >= (3, 6)
}

pub fn etcd(cfg: &InitConfig, env: &HostEnv) -> Option<Value> {
    etcd_pod(cfg, env, None)
}

/// The manifest of a member joining an existing cluster: `--initial-cluster` lists every member
/// (from the learner add, `etcd::add_as_learner`) and `--initial-cluster-state=existing`.
pub fn etcd_join(cfg: &InitConfig, env: &HostEnv, initial_cluster: &str) -> Option<Value> {
    etcd_pod(cfg, env, Some(initial_cluster))
}

fn etcd_pod(cfg: &InitConfig, env: &HostEnv, joining: Option<&str>) -> Option<Value> {
    let local = cfg.local_etcd()?;
    let adv = url_host(cfg.advertise_address);
    let lo = loopback(cfg);
    let e = format!("{}/etcd", cfg.certs_dir());
    let name = &cfg.node_name;
    let modern = etcd_is_36_or_newer(&cfg.etcd_image_tag);
    let mut defaults = kv(&[
        ("advertise-client-urls", format!("https://{adv}:{ETCD_CLIENT_PORT}")),
        ("cert-file", format!("{e}/server.crt")),
        ("client-cert-auth", "true".into()),
        ("data-dir", local.data_dir.clone()),
        ("initial-advertise-peer-urls", format!("https://{adv}:{ETCD_PEER_PORT}")),
        ("initial-cluster", joining.map_or_else(|| format!("{name}=https://{adv}:{ETCD_PEER_PORT}"), str::to_string)),
        ("key-file", format!("{e}/server.key")),
        ("listen-client-urls", format!("https://{lo}:{ETCD_CLIENT_PORT},https://{adv}:{ETCD_CLIENT_PORT}")),
        ("listen-metrics-urls", format!("http://{lo}:{ETCD_METRICS_PORT}")),
        ("listen-peer-urls", format!("https://{adv}:{ETCD_PEER_PORT}")),
        ("name", name.clone()),
        ("peer-cert-file", format!("{e}/peer.crt")),
        ("peer-client-cert-auth", "true".into()),
        ("peer-key-file", format!("{e}/peer.key")),
        ("peer-trusted-ca-file", format!("{e}/ca.crt")),
        ("snapshot-count", "10000".into()),
        ("trusted-ca-file", format!("{e}/ca.crt")),
    ]);
    if joining.is_some() {
        defaults.push(("initial-cluster-state".into(), "existing".into()));
    }
    if modern {
        defaults.extend(kv(&[
            ("feature-gates", "InitialCorruptCheck=true".into()),
            ("watch-progress-notify-interval", "5s".into()),
        ]));
    } else {
        defaults.extend(kv(&[
            ("experimental-initial-corrupt-check", "true".into()),
            ("experimental-watch-progress-notify-interval", "5s".into()),
        ]));
    }
    let cmd = command("etcd", defaults, &local.extra_args);
    // Probes follow the first metrics URL, which the user may override.
    let metrics =
        flag_value(&cmd, "listen-metrics-urls").unwrap_or_default().split(',').next().unwrap_or_default().to_string();
    let (scheme, rest) = metrics.split_once("://").unwrap_or(("http", metrics.as_str()));
    let (host, port) = rest.rsplit_once(':').unwrap_or((rest, "2381"));
    let port_num: u16 = port.trim_end_matches('/').parse().unwrap_or(ETCD_METRICS_PORT);
    let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
    let (probe_port, ports) = if modern {
        (json!("probe-port"), Some(json!([{ "containerPort": port_num, "name": "probe-port", "protocol": "TCP" }])))
    } else {
        (json!(port_num), None)
    };
    let scheme = if scheme == "https" { "HTTPS" } else { "HTTP" };
    let probe = |path| Probe { host: probe_host(&host), path, port: probe_port.clone(), scheme };
    let client_urls = flag_value(&cmd, "advertise-client-urls").unwrap_or_default().to_string();
    let repo = if local.image_repository.is_empty() { &cfg.cluster.image_repository } else { &local.image_repository };
    Some(render(&Component {
        name: "etcd",
        image: format!("{repo}/etcd:{}", cfg.etcd_image_tag),
        image_pull_policy: cfg.init.node_registration.image_pull_policy.clone(),
        liveness: probe("/livez"),
        readiness: Some(probe("/readyz")),
        startup: probe("/readyz"),
        command: cmd,
        startup_failure_threshold: startup_threshold(cfg),
        requests: json!({ "cpu": "100m", "memory": "100Mi" }),
        volumes: vec![
            Volume::new("etcd-certs", &e, false, "DirectoryOrCreate"),
            Volume::new("etcd-data", &local.data_dir, false, "DirectoryOrCreate"),
        ],
        env: merge_env(&env.proxy_env, &local.extra_envs),
        annotations: vec![(crate::etcd::ADVERTISE_CLIENT_URLS_ANNOTATION.into(), client_urls)],
        ports,
    }))
}

pub fn kube_apiserver(cfg: &InitConfig, env: &HostEnv) -> Value {
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
            let mut i = 0;
            for (flag, file) in
                [("etcd-cafile", &ext.ca_file), ("etcd-certfile", &ext.cert_file), ("etcd-keyfile", &ext.key_file)]
            {
                if file.is_empty() {
                    continue;
                }
                d.push((flag.into(), file.clone()));
                let dir = std::path::Path::new(file).parent().map(|x| x.display().to_string()).unwrap_or_default();
                let covered =
                    volumes.iter().any(|v| dir == v.host_path || dir.starts_with(&format!("{}/", v.host_path)));
                if !covered {
                    volumes.push(Volume::new(&format!("etcd-certs-{i}"), &dir, true, "DirectoryOrCreate"));
                    i += 1;
                }
            }
        }
        None => {
            let servers = cfg
                .local_etcd()
                .and_then(|l| l.extra_args.iter().find(|a| a.name == "advertise-client-urls"))
                .map(|a| a.value.clone())
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
    let port = flag_value(&cmd, "secure-port").and_then(|v| v.parse::<u16>().ok()).unwrap_or(cfg.bind_port);
    let host = flag_value(&cmd, "advertise-address").unwrap_or_default().to_string();
    let probe = |path| Probe { host: probe_host(&host), path, port: json!(port), scheme: "HTTPS" };
    render(&Component {
        name: "kube-apiserver",
        image: cfg.image("kube-apiserver"),
        image_pull_policy: cfg.init.node_registration.image_pull_policy.clone(),
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
        ports: None,
        command: cmd,
    })
}

/// `external_ca`: the cluster CA has no key on this node, so the controller-manager cannot sign.
pub fn kube_controller_manager(cfg: &InitConfig, env: &HostEnv, external_ca: bool) -> Value {
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
    let flex = flag_value(&cmd, "flex-volume-plugin-dir").unwrap_or(FLEXVOLUME_DIR).to_string();
    let mut volumes = vec![
        Volume::new("k8s-certs", p, true, "DirectoryOrCreate"),
        Volume::new("kubeconfig", &k, true, "FileOrCreate"),
        Volume::new("flexvolume-dir", &flex, false, "DirectoryOrCreate"),
    ];
    volumes.extend(ca_volumes(env));
    volumes.extend(comp.extra_volumes.iter().map(Volume::from_extra));
    let host = flag_value(&cmd, "bind-address").unwrap_or("127.0.0.1").to_string();
    let port = flag_value(&cmd, "secure-port").and_then(|v| v.parse::<u16>().ok()).unwrap_or(KCM_PORT);
    let probe = Probe { host: probe_host(&host), path: "/healthz", port: json!(port), scheme: "HTTPS" };
    render(&Component {
        name: "kube-controller-manager",
        image: cfg.image("kube-controller-manager"),
        image_pull_policy: cfg.init.node_registration.image_pull_policy.clone(),
        liveness: probe.clone(),
        readiness: None,
        startup: probe,
        startup_failure_threshold: startup_threshold(cfg),
        requests: json!({ "cpu": "200m" }),
        volumes,
        env: merge_env(&env.proxy_env, &comp.extra_envs),
        annotations: vec![],
        ports: None,
        command: cmd,
    })
}

pub fn kube_scheduler(cfg: &InitConfig, env: &HostEnv) -> Value {
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
    let host = flag_value(&cmd, "bind-address").unwrap_or("127.0.0.1").to_string();
    let port = flag_value(&cmd, "secure-port").and_then(|v| v.parse::<u16>().ok()).unwrap_or(SCHEDULER_PORT);
    let probe = Probe { host: probe_host(&host), path: "/healthz", port: json!(port), scheme: "HTTPS" };
    render(&Component {
        name: "kube-scheduler",
        image: cfg.image("kube-scheduler"),
        image_pull_policy: cfg.init.node_registration.image_pull_policy.clone(),
        liveness: probe.clone(),
        readiness: None,
        startup: probe,
        startup_failure_threshold: startup_threshold(cfg),
        requests: json!({ "cpu": "100m" }),
        volumes,
        env: merge_env(&env.proxy_env, &comp.extra_envs),
        annotations: vec![],
        ports: None,
        command: cmd,
    })
}

#[cfg(test)]
mod etcd_join_tests;
