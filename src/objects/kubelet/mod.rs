//! The kubelet's files: config.yaml (the KubeletConfiguration kubeadm computes, §6, with
//! instance-config.yaml merged in), instance-config.yaml (the node's CRI endpoint),
//! kubeadm-flags.env (§9 step 8), bootstrap-kubelet.conf and the kubeconfig the kubelet writes
//! for itself after TLS bootstrap (§9).

mod zero;

use serde_yaml::{Mapping, Value as Y};

use super::{RenderError, default_at, mapping_yaml};
use crate::config::InitConfig;
use crate::config::types::{Arg, Taint};
use crate::constants::{KUBELET_API_VERSION, MANIFESTS_DIR};
use crate::kubeconfig::{self, Cluster, Context, Credentials, Kubeconfig, NamedCluster, NamedContext, NamedUser, User};

/// kubeadm's PauseVersion per Kubernetes minor: 3.10.1 up to 1.35, 3.10.2 from 1.36
/// (constants.go). Only for image lists: the kubelet no longer takes a pause flag (1.35+).
pub fn pause_version(minor: u32) -> &'static str {
    if minor <= 35 { "3.10.1" } else { "3.10.2" }
}
/// The kubelet's healthz endpoint kubeadm waits on.
pub(crate) const HEALTHZ_BIND_ADDRESS: &str = "127.0.0.1";
pub(crate) const HEALTHZ_PORT: u16 = 10248;
/// Where kubeadm points resolvConf when systemd-resolved is active on the node.
pub(crate) const SYSTEMD_RESOLVED_RESOLV_CONF: &str = "/run/systemd/resolve/resolv.conf";
/// The variable the kubelet drop-in expands.
pub(crate) const FLAGS_ENV_VAR: &str = "KUBELET_KUBEADM_ARGS";

/// The effective KubeletConfiguration, as if systemd-resolved were not active.
pub(crate) fn kubelet_configuration(cfg: &InitConfig) -> Mapping {
    kubelet_configuration_with(cfg, false)
}

/// The user's KubeletConfiguration (if any) with kubeadm's defaults (componentconfigs/kubelet.go
/// Default): each set only where the user left the field empty, except rotateCertificates, which
/// kubeadm always forces to true. `systemd_resolved` is whether systemd-resolved is active on this
/// machine (a host fact the caller supplies); kubeadm then defaults resolvConf to its resolv.conf.
pub(crate) fn kubelet_configuration_with(cfg: &InitConfig, systemd_resolved: bool) -> Mapping {
    let mut m = cfg.kubelet.clone().unwrap_or_default();
    m.insert("apiVersion".into(), KUBELET_API_VERSION.into());
    m.insert("kind".into(), "KubeletConfiguration".into());
    default_at(&mut m, &["staticPodPath"], MANIFESTS_DIR.into());
    default_at(&mut m, &["clusterDNS"], Y::Sequence(vec![cfg.dns_ip.to_string().into()]));
    default_at(&mut m, &["clusterDomain"], cfg.cluster.networking.dns_domain.clone().into());
    default_at(&mut m, &["authentication", "x509", "clientCAFile"], format!("{}/ca.crt", cfg.certs_dir()).into());
    default_at(&mut m, &["authentication", "anonymous", "enabled"], false.into());
    default_at(&mut m, &["authorization", "mode"], "Webhook".into());
    default_at(&mut m, &["authentication", "webhook", "enabled"], true.into());
    default_at(&mut m, &["healthzBindAddress"], HEALTHZ_BIND_ADDRESS.into());
    default_at(&mut m, &["healthzPort"], HEALTHZ_PORT.into());
    // kubeadm cannot tell "unset" from false for this non-pointer field, so it always forces it.
    m.insert("rotateCertificates".into(), true.into());
    default_at(&mut m, &["cgroupDriver"], "systemd".into());
    if systemd_resolved {
        default_at(&mut m, &["resolvConf"], SYSTEMD_RESOLVED_RESOLV_CONF.into());
    }
    zero::fill(&mut m);
    m
}

/// /var/lib/kubelet/config.yaml; also the `kubelet` key of the kubelet-config ConfigMap.
pub fn config_yaml(cfg: &InitConfig) -> Result<String, RenderError> {
    mapping_yaml(&kubelet_configuration(cfg))
}

/// Init's /var/lib/kubelet/config.yaml: [`config_yaml`] with the node's instance-config.yaml
/// (its CRI socket) merged in.
#[cfg(test)]
pub(crate) fn init_node_config_yaml(cfg: &InitConfig) -> Result<String, RenderError> {
    init_node_config_yaml_from(kubelet_configuration(cfg), cfg)
}

/// [`init_node_config_yaml`] of a given (patched) KubeletConfiguration.
pub(crate) fn init_node_config_yaml_from(m: Mapping, cfg: &InitConfig) -> Result<String, RenderError> {
    mapping_yaml(&with_instance_config(m, &cfg.init.node_registration.cri_socket))
}

/// Like [`config_yaml`], for a node where systemd-resolved may be active.
pub fn config_yaml_with(cfg: &InitConfig, systemd_resolved: bool) -> Result<String, RenderError> {
    mapping_yaml(&kubelet_configuration_with(cfg, systemd_resolved))
}

/// The kubelet's healthz URL from a KubeletConfiguration (`healthzBindAddress`, `healthzPort`,
/// kubeadm's defaults where absent; an IPv6 address in brackets); `None` when `healthzPort: 0`
/// turns it off. Init and join wait on the same URL.
pub(crate) fn healthz_url(kc: &serde_yaml::Mapping) -> Option<String> {
    let port = kc.get("healthzPort").and_then(Y::as_u64).unwrap_or(u64::from(HEALTHZ_PORT));
    let addr = kc.get("healthzBindAddress").and_then(Y::as_str).unwrap_or(HEALTHZ_BIND_ADDRESS);
    let host = if addr.contains(':') { format!("[{addr}]") } else { addr.to_string() };
    (port != 0).then(|| format!("http://{host}:{port}/healthz"))
}

/// `<imageRepository>/pause:<PauseVersion>` (kubeadm's GetPauseImage), for image lists.
pub fn pause_image(cfg: &InitConfig) -> String {
    format!("{}/pause:{}", cfg.cluster.image_repository, pause_version(cfg.version.minor))
}

/// /var/lib/kubelet/instance-config.yaml as kubeadm 1.37 writes it (WriteInstanceConfigToDisk):
/// one line, the endpoint Go-quoted, no apiVersion or kind.
pub fn instance_config_yaml(cri_socket: &str) -> String {
    format!("containerRuntimeEndpoint: {}\n", go_quote(cri_socket))
}

/// Merges instance-config.yaml into a KubeletConfiguration, as kubeadm's WriteConfigToDisk
/// does (a strategic merge patch of that one field): the node's endpoint wins.
pub(crate) fn with_instance_config(mut m: Mapping, cri_socket: &str) -> Mapping {
    m.insert("containerRuntimeEndpoint".into(), cri_socket.into());
    m
}

/// The node's config.yaml: the cluster-wide KubeletConfiguration text (the kubelet-config
/// ConfigMap's, or init's own) with instance-config.yaml merged in, keys sorted as kubeadm's
/// YAML round-trip leaves them.
#[cfg(test)]
pub(crate) fn node_config_yaml(cluster_yaml: &str, cri_socket: &str) -> Result<String, RenderError> {
    let m: Mapping = serde_yaml::from_str(cluster_yaml)
        .map_err(|e| RenderError { what: "the KubeletConfiguration".into(), detail: e.to_string() })?;
    mapping_yaml(&with_instance_config(m, cri_socket))
}

/// [`node_config_yaml`] with the patches for `kubeletconfiguration` applied before the
/// instance config is merged (kubeadm's WriteConfigToDisk order).
pub(crate) fn node_config_yaml_patched(
    cluster_yaml: &str,
    cri_socket: &str,
    patches: Option<&crate::patches::Patches>,
) -> crate::error::Result<String> {
    let m: Mapping = serde_yaml::from_str(cluster_yaml)
        .map_err(|e| RenderError { what: "the KubeletConfiguration".into(), detail: e.to_string() })?;
    let m = match patches {
        Some(p) => p.kubelet_config(m, false)?,
        None => m,
    };
    Ok(mapping_yaml(&with_instance_config(m, cri_socket))?)
}

/// core/v1 Taint.ToString: `key[=value]:effect`.
fn taint_string(t: &Taint) -> String {
    match (t.value.is_empty(), t.effect.is_empty()) {
        (true, true) => t.key.clone(),
        (false, true) => format!("{}={}:", t.key, t.value),
        (true, false) => format!("{}:{}", t.key, t.effect),
        (false, false) => format!("{}={}:{}", t.key, t.value, t.effect),
    }
}

/// The `--register-with-taints` value for a worker, None when there are no taints.
pub(crate) fn taints_flag(taints: &[Taint]) -> Option<String> {
    (!taints.is_empty()).then(|| taints.iter().map(taint_string).collect::<Vec<_>>().join(","))
}

/// Go's `%q` (strconv.Quote): double quotes, with `"` and `\` escaped, C escapes for common
/// control characters, `\xNN` for other ASCII controls and `\uNNNN`/`\UNNNNNNNN` for non-printable
/// Unicode; printable Unicode is kept as is.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() || c == '\u{feff}' => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// /var/lib/kubelet/kubeadm-flags.env: `KUBELET_KUBEADM_ARGS="..."` and a newline, as kubeadm
/// 1.37's WriteKubeletDynamicEnvFile writes it. Defaults: --register-with-taints (workers only:
/// the caller passes [`taints_flag`]) and --hostname-override when the node name differs from
/// the (lowercased) hostname; the CRI endpoint lives in instance-config.yaml and the pause flag
/// is gone (kubelet 1.35 removed it). As kubeadm's ArgumentsToCommand: the defaults sorted by
/// name then value, less those `extra` (kubeletExtraArgs) names, then `extra` in the user's
/// order (a repeated flag's order can matter).
pub fn kubeadm_flags_env(node_name: &str, hostname: &str, taints_flag: Option<String>, extra: &[Arg]) -> String {
    let mut defaults: Vec<(String, String)> = Vec::new();
    if let Some(t) = taints_flag.filter(|t| !t.is_empty()) {
        defaults.push(("register-with-taints".into(), t));
    }
    // kubeadm compares against nodeutil.GetHostname, which trims and lowercases.
    if node_name != hostname.trim().to_lowercase() {
        defaults.push(("hostname-override".into(), node_name.into()));
    }
    defaults.retain(|(n, _)| !extra.iter().any(|a| &a.name == n));
    defaults.sort();
    let args: Vec<String> = defaults
        .into_iter()
        .chain(extra.iter().map(|a| (a.name.clone(), a.value.clone())))
        .map(|(n, v)| format!("--{n}={v}"))
        .collect();
    format!("{FLAGS_ENV_VAR}={}\n", go_quote(&args.join(" ")))
}

/// /etc/kubernetes/bootstrap-kubelet.conf: cluster `kubernetes`, user `tls-bootstrap-token-user`
/// with the bootstrap token, context `tls-bootstrap-token-user@kubernetes`.
pub fn bootstrap_kubelet_conf(server: &str, ca_pem: &[u8], token: &str) -> Kubeconfig {
    kubeconfig::build("kubernetes", server, ca_pem, "tls-bootstrap-token-user", Credentials::Token(token.into()))
}

/// /etc/kubernetes/kubelet.conf as the kubelet writes it after TLS bootstrap (and as kubeadm's
/// kubelet-finalize rewrites it): the client cert and key both come from the rotating
/// kubelet-client-current.pem, so rotation never needs the file rewritten.
pub fn kubelet_conf_for_rotation(server: &str, ca_pem: &[u8]) -> Kubeconfig {
    Kubeconfig {
        api_version: "v1".into(),
        clusters: vec![NamedCluster {
            cluster: Cluster { certificate_authority_data: super::b64(ca_pem), server: server.into() },
            name: "default-cluster".into(),
        }],
        contexts: vec![NamedContext {
            context: Context {
                cluster: "default-cluster".into(),
                namespace: "default".into(),
                user: "default-auth".into(),
            },
            name: "default-context".into(),
        }],
        current_context: "default-context".into(),
        kind: "Config".into(),
        preferences: Default::default(),
        users: vec![NamedUser {
            name: "default-auth".into(),
            user: User {
                client_certificate: crate::paths::KUBELET_CLIENT_CURRENT.as_str().into(),
                client_key: crate::paths::KUBELET_CLIENT_CURRENT.as_str().into(),
                ..Default::default()
            },
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::test_support::cfg;

    fn arg(n: &str, v: &str) -> Arg {
        Arg { name: n.into(), value: v.into() }
    }

    #[test]
    fn kubelet_defaults_match_kubeadm() {
        let m = kubelet_configuration(&cfg(""));
        let y = Y::Mapping(m);
        assert_eq!(y["apiVersion"], "kubelet.config.k8s.io/v1beta1");
        assert_eq!(y["kind"], "KubeletConfiguration");
        assert_eq!(y["staticPodPath"], "/etc/kubernetes/manifests");
        assert_eq!(y["clusterDNS"], Y::Sequence(vec!["10.96.0.10".into()]));
        assert_eq!(y["clusterDomain"], "cluster.local");
        assert_eq!(y["authentication"]["x509"]["clientCAFile"], "/etc/kubernetes/pki/ca.crt");
        assert_eq!(y["authentication"]["anonymous"]["enabled"], false);
        assert_eq!(y["authentication"]["webhook"]["enabled"], true);
        assert_eq!(y["authorization"]["mode"], "Webhook");
        assert_eq!(y["healthzBindAddress"], "127.0.0.1");
        assert_eq!(y["healthzPort"], 10248);
        assert_eq!(y["rotateCertificates"], true);
        assert_eq!(y["cgroupDriver"], "systemd");
        assert!(y.get("resolvConf").is_none());
        assert!(y.get("readOnlyPort").is_none(), "0 is the kubelet's own default; kubeadm does not write it");
    }

    #[test]
    fn user_values_win_except_rotate_certificates() {
        let c = cfg("\
networking:
  dnsDomain: example.internal
  serviceSubnet: 10.100.0.0/16
certificatesDir: /srv/pki
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
clusterDNS: [10.96.0.53]
rotateCertificates: false
maxPods: 50
authentication:
  anonymous:
    enabled: true
");
        let y = Y::Mapping(kubelet_configuration_with(&c, true));
        assert_eq!(y["cgroupDriver"], "cgroupfs");
        assert_eq!(y["clusterDNS"], Y::Sequence(vec!["10.96.0.53".into()]));
        assert_eq!(y["rotateCertificates"], true, "forced, as kubeadm does");
        assert_eq!(y["maxPods"], 50, "unknown fields pass through");
        assert_eq!(y["authentication"]["anonymous"]["enabled"], true);
        assert_eq!(y["authentication"]["webhook"]["enabled"], true, "sibling defaults still filled");
        assert_eq!(y["clusterDomain"], "example.internal");
        assert_eq!(y["authentication"]["x509"]["clientCAFile"], "/srv/pki/ca.crt");
        assert_eq!(y["resolvConf"], "/run/systemd/resolve/resolv.conf");
    }

    #[test]
    fn config_yaml_is_sorted_and_parses() {
        let text = config_yaml(&cfg("")).unwrap();
        assert!(text.starts_with("apiVersion: kubelet.config.k8s.io/v1beta1\nauthentication:\n"), "{text}");
        let keys: Vec<String> =
            serde_yaml::from_str::<Mapping>(&text).unwrap().keys().map(|k| k.as_str().unwrap().to_string()).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
    }

    #[test]
    fn healthz_url_brackets_ipv6_and_follows_the_config() {
        let kc = |t: &str| -> Mapping { serde_yaml::from_str(t).unwrap() };
        assert_eq!(healthz_url(&kc("{}")).unwrap(), "http://127.0.0.1:10248/healthz");
        assert_eq!(healthz_url(&kc("healthzBindAddress: '::1'")).unwrap(), "http://[::1]:10248/healthz");
        assert_eq!(
            healthz_url(&kc("healthzBindAddress: 10.0.0.1\nhealthzPort: 40123")).unwrap(),
            "http://10.0.0.1:40123/healthz"
        );
        assert_eq!(healthz_url(&kc("healthzPort: 0")), None, "port 0 turns the check off");
    }

    #[test]
    fn pause_image_per_minor_and_repository() {
        assert_eq!(pause_image(&cfg("")), "registry.k8s.io/pause:3.10.2");
        assert_eq!(pause_version(35), "3.10.1");
        assert_eq!(pause_version(36), "3.10.2");
        assert_eq!(pause_version(37), "3.10.2");
        let c = cfg("imageRepository: my.registry.example/k8s\n"); // BASE is v1.37.0
        assert_eq!(pause_image(&c), "my.registry.example/k8s/pause:3.10.2");
    }

    /// kubelet 1.35 removed --pod-infra-container-image (it exits on it) and kubeadm 1.36+ moved
    /// the CRI endpoint to instance-config.yaml: neither flag is written, whatever the node.
    #[test]
    fn flags_env_has_no_pause_or_cri_flag() {
        let env = kubeadm_flags_env("cp-1", "cp-1", None, &[]);
        assert_eq!(env, "KUBELET_KUBEADM_ARGS=\"\"\n");
        let env = kubeadm_flags_env("worker-1", "ip-10-0-0-5", Some("a:NoSchedule".into()), &[]);
        assert!(!env.contains("pod-infra-container-image") && !env.contains("container-runtime-endpoint"), "{env}");
    }

    /// kubeadm's ArgumentsToCommand (1.36, backported to 1.35.1): defaults sorted, overridden
    /// defaults dropped, then the overrides in the user's order, repeats kept.
    #[test]
    fn flags_env_defaults_sorted_then_overrides_in_order() {
        // Hostname comparison is case-insensitive (GetHostname lowercases).
        let same = kubeadm_flags_env("node-a", " Node-A\n", None, &[]);
        assert!(!same.contains("hostname-override"), "{same}");

        let taints = vec![
            Taint { key: "dedicated".into(), value: "gpu".into(), effect: "NoSchedule".into(), time_added: None },
            Taint { key: "spot".into(), value: String::new(), effect: "PreferNoSchedule".into(), time_added: None },
        ];
        let env = kubeadm_flags_env(
            "worker-1",
            "ip-10-0-0-5",
            taints_flag(&taints),
            &[arg("v", "2"), arg("node-labels", "a=b"), arg("v", "1")],
        );
        assert_eq!(
            env,
            "KUBELET_KUBEADM_ARGS=\"--hostname-override=worker-1 \
             --register-with-taints=dedicated=gpu:NoSchedule,spot:PreferNoSchedule --v=2 --node-labels=a=b --v=1\"\n"
        );
        // An override replaces the default of its name and takes the user's place.
        let env = kubeadm_flags_env("worker-1", "h", None, &[arg("v", "3"), arg("hostname-override", "w")]);
        assert_eq!(env, "KUBELET_KUBEADM_ARGS=\"--v=3 --hostname-override=w\"\n");
        assert_eq!(taints_flag(&[]), None);
    }

    /// kubeadm 1.37's WriteInstanceConfigToDisk: `containerRuntimeEndpoint: %q`, nothing else.
    #[test]
    fn instance_config_is_one_quoted_line() {
        assert_eq!(
            instance_config_yaml("unix:///var/run/containerd/containerd.sock"),
            "containerRuntimeEndpoint: \"unix:///var/run/containerd/containerd.sock\"\n"
        );
        let y: Y = serde_yaml::from_str(&instance_config_yaml("unix:///run/a \"b\".sock")).unwrap();
        assert_eq!(y["containerRuntimeEndpoint"], "unix:///run/a \"b\".sock");
    }

    /// config.yaml is the cluster's KubeletConfiguration with instance-config.yaml merged in,
    /// keys sorted; the node's endpoint wins over one in the cluster config.
    #[test]
    fn node_config_merges_the_instance_config() {
        let c = cfg("");
        let text = init_node_config_yaml(&c).unwrap();
        let y: Y = serde_yaml::from_str(&text).unwrap();
        assert_eq!(y["containerRuntimeEndpoint"], "unix:///var/run/containerd/containerd.sock");
        assert!(text.contains("\ncontainerRuntimeEndpoint: unix:///var/run/containerd/containerd.sock\n"), "{text}");
        // The cluster-wide copy (the ConfigMap's) has no node endpoint: Go's zero value.
        let cluster: Y = serde_yaml::from_str(&config_yaml(&c).unwrap()).unwrap();
        assert_eq!(cluster["containerRuntimeEndpoint"], "");
        let joined = node_config_yaml(
            "apiVersion: kubelet.config.k8s.io/v1beta1\ncontainerRuntimeEndpoint: unix:///other.sock\nkind: KubeletConfiguration\nmaxPods: 7\n",
            "unix:///run/crio/crio.sock",
        )
        .unwrap();
        assert_eq!(
            joined,
            "apiVersion: kubelet.config.k8s.io/v1beta1\ncontainerRuntimeEndpoint: unix:///run/crio/crio.sock\nkind: KubeletConfiguration\nmaxPods: 7\n"
        );
        assert!(node_config_yaml("- not a mapping\n", "unix:///x").is_err());
    }

    #[test]
    fn go_quote_escapes_like_strconv_quote() {
        assert_eq!(go_quote("a b"), "\"a b\"");
        assert_eq!(go_quote("say \"hi\" \\ ok"), "\"say \\\"hi\\\" \\\\ ok\"");
        assert_eq!(go_quote("a\tb\nc\u{1}\u{7f}"), "\"a\\tb\\nc\\x01\\x7f\"");
        assert_eq!(go_quote("é\u{85}"), "\"é\\u0085\"");
        let env = kubeadm_flags_env("n", "n", None, &[arg("node-labels", "x=\"y\"")]);
        assert_eq!(env, "KUBELET_KUBEADM_ARGS=\"--node-labels=x=\\\"y\\\"\"\n");
    }

    #[test]
    fn bootstrap_kubeconfig_names() {
        let k = bootstrap_kubelet_conf("https://10.0.0.10:6443", b"CA", "abcdef.0123456789abcdef");
        assert_eq!(k.clusters[0].name, "kubernetes");
        assert_eq!(k.clusters[0].cluster.server, "https://10.0.0.10:6443");
        assert_eq!(k.clusters[0].cluster.certificate_authority_data, "Q0E=");
        assert_eq!(k.users[0].name, "tls-bootstrap-token-user");
        assert_eq!(k.users[0].user.token, "abcdef.0123456789abcdef");
        assert_eq!(k.current_context, "tls-bootstrap-token-user@kubernetes");
        assert_eq!(k.contexts[0].context.cluster, "kubernetes");
        assert_eq!(k.contexts[0].context.user, "tls-bootstrap-token-user");
    }

    #[test]
    fn rotation_kubeconfig_points_at_current_pem() {
        let k = kubelet_conf_for_rotation("https://10.0.0.10:6443", b"CA");
        let (cluster, user) = k.current().unwrap();
        assert_eq!(cluster.server, "https://10.0.0.10:6443");
        assert_eq!(cluster.certificate_authority_data, "Q0E=");
        let user = user.unwrap();
        assert_eq!(user.client_certificate, "/var/lib/kubelet/pki/kubelet-client-current.pem");
        assert_eq!(user.client_key, "/var/lib/kubelet/pki/kubelet-client-current.pem");
        assert!(user.client_certificate_data.is_empty() && user.token.is_empty());
        assert_eq!(k.clusters[0].name, "default-cluster");
        assert_eq!(k.users[0].name, "default-auth");
        assert_eq!(k.contexts[0].name, "default-context");
        assert_eq!(k.contexts[0].context.namespace, "default");
        // Round-trips through the loader.
        assert_eq!(Kubeconfig::parse(k.to_yaml().unwrap().as_bytes()).unwrap(), k);
    }
}
