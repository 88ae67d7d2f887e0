//! The kube-proxy addon (kubeadm's phases/addons/proxy): ServiceAccount, RBAC, the `kube-proxy`
//! ConfigMap (config.conf + an in-cluster kubeconfig.conf) and the DaemonSet.

use serde_json::{Value, json};
use serde_yaml::Mapping;

use super::rbac::{cluster_role_binding, role, role_binding};
use super::{
    BOOTSTRAP_GROUP, KUBE_SYSTEM, RenderError, config_map, default_at, get_rule, group_subject, mapping_yaml,
    service_account, service_account_subject, sign_config_map,
};
use crate::config::InitConfig;
use crate::constants::KUBEPROXY_API_VERSION;

pub const NAME: &str = "kube-proxy";
/// ClusterRoleBinding to the built-in system:node-proxier.
pub(crate) const NODE_PROXIER_BINDING: &str = "kubeadm:node-proxier";
/// Where the DaemonSet mounts the ConfigMap, and the two keys in it.
pub(crate) const CONFIG_DIR: &str = "/var/lib/kube-proxy";
pub(crate) const CONFIG_KEY: &str = "config.conf";
pub(crate) const KUBECONFIG_KEY: &str = "kubeconfig.conf";
const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The effective KubeProxyConfiguration: the user's document over the zero struct, with
/// kubeadm's defaults (componentconfigs/kubeproxy.go Default), each set only where empty.
pub(crate) fn kube_proxy_configuration(cfg: &InitConfig) -> Mapping {
    let mut m = super::proxy_zero::with_zero_values(cfg.kube_proxy.clone().unwrap_or_default());
    m.insert("apiVersion".into(), KUBEPROXY_API_VERSION.into());
    m.insert("kind".into(), "KubeProxyConfiguration".into());
    // The wildcard of the advertise address's family.
    let bind = if cfg.advertise_address.is_ipv4() { "0.0.0.0" } else { "::" };
    default_at(&mut m, &["bindAddress"], bind.into());
    let pod_subnet = &cfg.cluster.networking.pod_subnet;
    if !pod_subnet.is_empty() {
        default_at(&mut m, &["clusterCIDR"], pod_subnet.clone().into());
    }
    default_at(&mut m, &["clientConnection", "kubeconfig"], format!("{CONFIG_DIR}/{KUBECONFIG_KEY}").into());
    // kubeadm 1.37 sets the mode kube-proxy would otherwise warn about.
    default_at(&mut m, &["mode"], "iptables".into());
    m
}

/// kubeconfig.conf: kube-proxy reaches the API server through the control-plane endpoint with
/// its ServiceAccount token and the cluster CA mounted into the Pod (kubeadm's template, which
/// has no trailing newline because it is a `|-` block).
pub fn in_cluster_kubeconfig(server: &str) -> String {
    format!(
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - cluster:\n    \
             certificate-authority: {SA_DIR}/ca.crt\n    \
             server: {server}\n  \
           name: default\n\
         contexts:\n\
         - context:\n    \
             cluster: default\n    \
             namespace: default\n    \
             user: default\n  \
           name: default\n\
         current-context: default\n\
         users:\n\
         - name: default\n  \
           user:\n    \
             tokenFile: {SA_DIR}/token"
    )
}

/// The `kube-proxy` ConfigMap. Both values lose their trailing newline, as kubeadm's `|-`
/// template does. Signed (component-config hash) only when the user gave no
/// KubeProxyConfiguration, as kubeadm does.
pub(crate) fn kube_proxy_config_map(cfg: &InitConfig) -> Result<Value, RenderError> {
    let conf = mapping_yaml(&kube_proxy_configuration(cfg))?;
    let kubeconfig = in_cluster_kubeconfig(&cfg.endpoint.url());
    let mut cm = config_map(
        NAME,
        KUBE_SYSTEM,
        &[(CONFIG_KEY, conf.trim_end_matches('\n')), (KUBECONFIG_KEY, kubeconfig.trim_end_matches('\n'))],
    );
    cm["metadata"]["labels"] = json!({"app": NAME});
    if cfg.kube_proxy.is_none() {
        sign_config_map(&mut cm);
    }
    Ok(cm)
}

/// The host's non-empty `*_proxy` variables (sorted by name) as env entries: kubeadm appends
/// them to the DaemonSet's container.
pub(crate) fn proxy_env_vars(proxy_env: &[(String, String)]) -> Vec<Value> {
    proxy_env.iter().filter(|(_, v)| !v.is_empty()).map(|(n, v)| json!({"name": n, "value": v})).collect()
}

/// The DaemonSet, as kubeadm's KubeProxyDaemonSet19 template. `proxy_env` are the host's
/// `*_proxy` variables, which kubeadm appends to the container's env.
pub fn kube_proxy_daemon_set(cfg: &InitConfig, proxy_env: &[(String, String)]) -> Value {
    let labels = json!({"k8s-app": NAME});
    let mut env = vec![json!({"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}})];
    env.extend(proxy_env_vars(proxy_env));
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"labels": labels, "name": NAME, "namespace": KUBE_SYSTEM},
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "priorityClassName": "system-node-critical",
                    "containers": [{
                        "name": NAME,
                        "image": cfg.image(NAME),
                        "imagePullPolicy": "IfNotPresent",
                        "command": [
                            "/usr/local/bin/kube-proxy",
                            format!("--config={CONFIG_DIR}/{CONFIG_KEY}"),
                            "--hostname-override=$(NODE_NAME)",
                        ],
                        "securityContext": {"privileged": true},
                        "volumeMounts": [
                            {"mountPath": CONFIG_DIR, "name": NAME},
                            {"mountPath": "/run/xtables.lock", "name": "xtables-lock", "readOnly": false},
                            {"mountPath": "/lib/modules", "name": "lib-modules", "readOnly": true},
                        ],
                        "env": env,
                    }],
                    "hostNetwork": true,
                    "serviceAccountName": NAME,
                    "volumes": [
                        {"name": NAME, "configMap": {"name": NAME}},
                        {"name": "xtables-lock", "hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"}},
                        {"name": "lib-modules", "hostPath": {"path": "/lib/modules"}},
                    ],
                    "tolerations": [{"operator": "Exists"}],
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                },
            },
        },
    })
}

/// Every kube-proxy object, dependencies first: ServiceAccount, ClusterRoleBinding
/// kubeadm:node-proxier, Role and RoleBinding kube-proxy (joiners read the ConfigMap), the
/// ConfigMap, the DaemonSet. (kubeadm creates the ConfigMap and DaemonSet first; the end state
/// is the same, and this order spares the DaemonSet's first Pods a missing ServiceAccount.)
/// Empty when `proxy.disabled`.
pub fn kube_proxy_objects(cfg: &InitConfig) -> Result<Vec<Value>, RenderError> {
    kube_proxy_objects_with_env(cfg, &[])
}

/// [`kube_proxy_objects`] with the host's proxy environment for the DaemonSet.
pub(crate) fn kube_proxy_objects_with_env(
    cfg: &InitConfig,
    proxy_env: &[(String, String)],
) -> Result<Vec<Value>, RenderError> {
    if cfg.cluster.proxy.disabled {
        return Ok(Vec::new());
    }
    Ok(vec![
        service_account(NAME, KUBE_SYSTEM),
        cluster_role_binding(
            NODE_PROXIER_BINDING,
            "system:node-proxier",
            vec![service_account_subject(NAME, KUBE_SYSTEM)],
        ),
        role(NAME, KUBE_SYSTEM, json!([get_rule("configmaps", &[NAME])])),
        role_binding(NAME, KUBE_SYSTEM, vec![group_subject(BOOTSTRAP_GROUP)]),
        kube_proxy_config_map(cfg)?,
        kube_proxy_daemon_set(cfg, proxy_env),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::COMPONENT_CONFIG_HASH_ANNOTATION;
    use crate::objects::test_support::cfg;

    fn kinds(objs: &[Value]) -> Vec<String> {
        objs.iter()
            .map(|o| format!("{}/{}", o["kind"].as_str().unwrap(), o["metadata"]["name"].as_str().unwrap()))
            .collect()
    }

    #[test]
    fn objects_in_dependency_order() {
        let objs = kube_proxy_objects(&cfg("")).unwrap();
        assert_eq!(
            kinds(&objs),
            vec![
                "ServiceAccount/kube-proxy",
                "ClusterRoleBinding/kubeadm:node-proxier",
                "Role/kube-proxy",
                "RoleBinding/kube-proxy",
                "ConfigMap/kube-proxy",
                "DaemonSet/kube-proxy",
            ]
        );
        assert_eq!(objs[1]["roleRef"]["name"], "system:node-proxier");
        assert_eq!(
            objs[1]["subjects"],
            json!([{"kind": "ServiceAccount", "name": "kube-proxy", "namespace": "kube-system"}])
        );
        assert_eq!(objs[2]["rules"][0]["resourceNames"], json!(["kube-proxy"]));
        assert_eq!(objs[3]["roleRef"]["kind"], "Role");
        assert_eq!(objs[3]["subjects"][0]["name"], BOOTSTRAP_GROUP);
    }

    #[test]
    fn disabled_gives_nothing() {
        assert!(kube_proxy_objects(&cfg("proxy:\n  disabled: true\n")).unwrap().is_empty());
    }

    #[test]
    fn config_defaults_and_kubeconfig() {
        let c = cfg("networking:\n  podSubnet: 10.244.0.0/16\n");
        let cm = kube_proxy_config_map(&c).unwrap();
        assert_eq!(cm["metadata"]["labels"]["app"], "kube-proxy");
        let conf: serde_yaml::Value = serde_yaml::from_str(cm["data"]["config.conf"].as_str().unwrap()).unwrap();
        assert_eq!(conf["apiVersion"], "kubeproxy.config.k8s.io/v1alpha1");
        assert_eq!(conf["kind"], "KubeProxyConfiguration");
        assert_eq!(conf["bindAddress"], "0.0.0.0");
        assert_eq!(conf["clusterCIDR"], "10.244.0.0/16");
        assert_eq!(conf["clientConnection"]["kubeconfig"], "/var/lib/kube-proxy/kubeconfig.conf");
        let kc = cm["data"]["kubeconfig.conf"].as_str().unwrap();
        assert!(!kc.ends_with('\n') && !cm["data"]["config.conf"].as_str().unwrap().ends_with('\n'));
        let k: serde_yaml::Value = serde_yaml::from_str(kc).unwrap();
        assert_eq!(k["clusters"][0]["cluster"]["server"], "https://10.0.0.10:6443");
        assert_eq!(
            k["clusters"][0]["cluster"]["certificate-authority"],
            "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
        );
        assert_eq!(k["users"][0]["user"]["tokenFile"], "/var/run/secrets/kubernetes.io/serviceaccount/token");
        assert_eq!(k["current-context"], "default");
        // Generated config: signed with the hash of config.conf then kubeconfig.conf.
        let ann = cm["metadata"]["annotations"][COMPONENT_CONFIG_HASH_ANNOTATION].as_str().unwrap();
        assert_eq!(ann, crate::objects::config_map_checksum(&cm));
        let no_pod_subnet = kube_proxy_configuration(&cfg(""));
        assert_eq!(no_pod_subnet["clusterCIDR"], "", "no podSubnet: Go's zero value");
    }

    /// kubeadm v1.37.2 writes the whole struct (`init phase addon kube-proxy --print-manifest`).
    #[test]
    fn config_conf_is_kubeadms_text() {
        let cm = kube_proxy_config_map(&cfg("networking:\n  podSubnet: 10.244.0.0/16\n")).unwrap();
        let conf = cm["data"]["config.conf"].as_str().unwrap();
        let want = super::super::proxy_zero::tests::KUBEADM_1_37_2_CONFIG_CONF;
        assert_eq!(conf, want);
    }

    #[test]
    fn user_config_wins_and_is_not_signed() {
        let c = cfg("networking:\n  podSubnet: 10.244.0.0/16\n---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ipvs
clusterCIDR: 10.200.0.0/16
bindAddress: 10.0.0.10
");
        let cm = kube_proxy_config_map(&c).unwrap();
        let conf: serde_yaml::Value = serde_yaml::from_str(cm["data"]["config.conf"].as_str().unwrap()).unwrap();
        assert_eq!(conf["mode"], "ipvs");
        assert_eq!(conf["clusterCIDR"], "10.200.0.0/16");
        assert_eq!(conf["bindAddress"], "10.0.0.10");
        assert_eq!(conf["clientConnection"]["kubeconfig"], "/var/lib/kube-proxy/kubeconfig.conf");
        assert!(cm["metadata"].get("annotations").is_none());
    }

    #[test]
    fn daemon_set_as_kubeadm() {
        let c = cfg("imageRepository: my.registry.example/k8s\n");
        let ds = kube_proxy_daemon_set(&c, &[("HTTPS_PROXY".into(), "http://proxy:3128".into())]);
        let pod = &ds["spec"]["template"]["spec"];
        let ctr = &pod["containers"][0];
        assert_eq!(ctr["image"], "my.registry.example/k8s/kube-proxy:v1.37.0");
        assert_eq!(
            ctr["command"],
            json!([
                "/usr/local/bin/kube-proxy",
                "--config=/var/lib/kube-proxy/config.conf",
                "--hostname-override=$(NODE_NAME)"
            ])
        );
        assert_eq!(ctr["securityContext"]["privileged"], true);
        assert_eq!(ctr["env"][1], json!({"name": "HTTPS_PROXY", "value": "http://proxy:3128"}));
        assert_eq!(pod["hostNetwork"], true);
        assert_eq!(pod["priorityClassName"], "system-node-critical");
        assert_eq!(pod["serviceAccountName"], "kube-proxy");
        assert_eq!(pod["tolerations"], json!([{"operator": "Exists"}]));
        assert_eq!(pod["nodeSelector"]["kubernetes.io/os"], "linux");
        let vols: Vec<&str> = pod["volumes"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap()).collect();
        assert_eq!(vols, vec!["kube-proxy", "xtables-lock", "lib-modules"]);
        assert_eq!(ds["spec"]["updateStrategy"]["type"], "RollingUpdate");
        assert_eq!(ds["spec"]["selector"]["matchLabels"], ds["spec"]["template"]["metadata"]["labels"]);
    }

    #[test]
    fn ipv6_bind_address() {
        let c = crate::objects::test_support::cfg_from(
            "apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration:
  name: cp-1
localAPIEndpoint:
  advertiseAddress: fd00::10
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.37.0
networking:
  serviceSubnet: fd00:96::/108
",
        );
        assert_eq!(serde_yaml::Value::Mapping(kube_proxy_configuration(&c))["bindAddress"], "::");
        let kc = in_cluster_kubeconfig(&c.endpoint.url());
        assert!(kc.contains("server: https://[fd00::10]:6443"));
    }
}
