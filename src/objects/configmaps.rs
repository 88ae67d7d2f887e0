//! The ConfigMaps init uploads: `kube-public/cluster-info` (§4), `kube-system/kubeadm-config`
//! and `kube-system/kubelet-config` (§6, §11).

use serde_json::Value;

use super::{KUBE_PUBLIC, KUBE_SYSTEM, RenderError, b64, config_map, sign_config_map, to_yaml};
use crate::config::InitConfig;

pub const CLUSTER_INFO: &str = "cluster-info";
pub(crate) const KUBEADM_CONFIG: &str = "kubeadm-config";
pub(crate) const KUBELET_CONFIG: &str = "kubelet-config";

/// The cluster-info kubeconfig: one cluster named "" and nothing else. Written out by hand so the
/// text is what clientcmd.Write gives for such a Config (sorted keys; `contexts` and `users` are
/// nil slices, hence `null`; no `preferences`, `omitzero` since client-go v0.34). The server is
/// https://<IP or DNS name>:<port> and the CA data is base64, so both are plain YAML scalars.
pub(crate) fn cluster_info_kubeconfig(server: &str, ca_pem: &[u8]) -> String {
    format!(
        "apiVersion: v1\n\
         clusters:\n\
         - cluster:\n    \
             certificate-authority-data: {}\n    \
             server: {server}\n  \
           name: \"\"\n\
         contexts: null\n\
         current-context: \"\"\n\
         kind: Config\n\
         users: null\n",
        b64(ca_pem)
    )
}

/// `kube-public/cluster-info` with `data.kubeconfig` (the bootstrap signer adds the
/// `jws-kubeconfig-<id>` keys later). Also returns the kubeconfig text.
pub fn cluster_info(cfg: &InitConfig, ca_pem: &[u8]) -> (Value, String) {
    let kubeconfig = cluster_info_kubeconfig(&cfg.endpoint.url(), ca_pem);
    (config_map(CLUSTER_INFO, KUBE_PUBLIC, &[("kubeconfig", &kubeconfig)]), kubeconfig)
}

/// The ClusterConfiguration as uploaded: kubeadm marshals the defaulted v1beta4 object with its
/// apiVersion/kind and sorted keys, without component configs (those have their own ConfigMaps).
pub(crate) fn cluster_configuration_yaml(cfg: &InitConfig) -> Result<String, RenderError> {
    let v = serde_json::to_value(&cfg.cluster)
        .map_err(|e| RenderError { what: "the ClusterConfiguration".into(), detail: e.to_string() })?;
    to_yaml(&v)
}

/// `kube-system/kubeadm-config` with `data.ClusterConfiguration`. kubeadm does not sign this one.
pub fn kubeadm_config(cfg: &InitConfig) -> Result<Value, RenderError> {
    Ok(config_map(KUBEADM_CONFIG, KUBE_SYSTEM, &[("ClusterConfiguration", &cluster_configuration_yaml(cfg)?)]))
}

/// `kube-system/kubelet-config` with `data.kubelet`. As kubeadm's CreateConfigMap, it carries
/// the component-config hash annotation only when kubeadm generated the config, i.e. the user
/// gave no KubeletConfiguration document.
pub fn kubelet_config_map(cfg: &InitConfig) -> Result<Value, RenderError> {
    Ok(kubelet_config_map_from(cfg, &super::kubelet::config_yaml(cfg)?))
}

/// Like [`kubelet_config_map`] with the config text already rendered (e.g. by
/// `kubelet::config_yaml_with` on a systemd-resolved node), so config.yaml and the ConfigMap agree.
pub(crate) fn kubelet_config_map_from(cfg: &InitConfig, kubelet_yaml: &str) -> Value {
    let mut cm = config_map(KUBELET_CONFIG, KUBE_SYSTEM, &[("kubelet", kubelet_yaml)]);
    if cfg.kubelet.is_none() {
        sign_config_map(&mut cm);
    }
    cm
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::test_support::cfg;
    use crate::objects::{COMPONENT_CONFIG_HASH_ANNOTATION, config_map_checksum};

    const CA: &[u8] = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    #[test]
    fn cluster_info_has_one_unnamed_cluster_only() {
        let c = cfg("");
        let (cm, text) = cluster_info(&c, CA);
        assert_eq!(cm["metadata"]["name"], "cluster-info");
        assert_eq!(cm["metadata"]["namespace"], "kube-public");
        assert_eq!(cm["data"]["kubeconfig"], text.as_str());
        assert_eq!(cm["data"].as_object().unwrap().len(), 1);
        assert!(cm["metadata"].get("annotations").is_none());

        // Kubeconfig::parse rejects the null lists (discovery parses cluster-info on its own),
        // so check the shape as plain YAML.
        let y: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        let clusters = y["clusters"].as_sequence().unwrap();
        assert_eq!(clusters.len(), 1);
        assert_eq!(clusters[0]["name"], "");
        assert_eq!(clusters[0]["cluster"]["server"], "https://10.0.0.10:6443");
        let ca = clusters[0]["cluster"]["certificate-authority-data"].as_str().unwrap();
        assert_eq!(crate::kubeconfig::decode_b64(ca).unwrap(), CA);
        assert!(y["users"].is_null() && y["contexts"].is_null(), "nil slices, as clientcmd writes them");
        assert_eq!(y["current-context"], "");
        assert_eq!(y["kind"], "Config");
        assert_eq!(y["apiVersion"], "v1");
    }

    #[test]
    fn cluster_info_uses_control_plane_endpoint() {
        let c = cfg("controlPlaneEndpoint: api.example.test:8443\n");
        let (_, text) = cluster_info(&c, CA);
        assert!(text.contains("    server: https://api.example.test:8443\n"), "{text}");
        let c = cfg("controlPlaneEndpoint: \"[fd00::1]:6443\"\n");
        let (_, text) = cluster_info(&c, CA);
        let y: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(y["clusters"][0]["cluster"]["server"], "https://[fd00::1]:6443");
    }

    #[test]
    fn kubeadm_config_holds_the_cluster_configuration() {
        let c = cfg("imageRepository: my.registry.example/k8s\nnetworking:\n  podSubnet: 10.244.0.0/16\n");
        let cm = kubeadm_config(&c).unwrap();
        assert_eq!(cm["metadata"]["name"], "kubeadm-config");
        assert_eq!(cm["metadata"]["namespace"], "kube-system");
        assert!(cm["metadata"].get("annotations").is_none(), "kubeadm does not sign kubeadm-config");
        let text = cm["data"]["ClusterConfiguration"].as_str().unwrap();
        let y: serde_yaml::Value = serde_yaml::from_str(text).unwrap();
        assert_eq!(y["apiVersion"], "kubeadm.k8s.io/v1beta4");
        assert_eq!(y["kind"], "ClusterConfiguration");
        assert_eq!(y["kubernetesVersion"], "v1.37.0");
        assert_eq!(y["imageRepository"], "my.registry.example/k8s");
        assert_eq!(y["networking"]["podSubnet"], "10.244.0.0/16");
        assert_eq!(y["networking"]["serviceSubnet"], "10.96.0.0/12");
        assert_eq!(y["networking"]["dnsDomain"], "cluster.local");
        assert_eq!(y["etcd"]["local"]["dataDir"], "/var/lib/etcd");
        assert_eq!(y["clusterName"], "kubernetes");
        // Round-trips into the typed config (strict: no unknown fields).
        let back: crate::config::types::ClusterConfiguration = serde_yaml::from_str(text).unwrap();
        assert_eq!(back, c.cluster);
        assert!(text.starts_with("apiServer: {}\napiVersion: kubeadm.k8s.io/v1beta4\n"), "sorted keys:\n{text}");
    }

    #[test]
    fn external_etcd_http_endpoints_default_to_endpoints() {
        // v1beta4 SetDefaults_ExternalEtcd: the uploaded config carries httpEndpoints = endpoints.
        let eps = "etcd:\n  external:\n    endpoints: [https://10.0.0.50:2379, https://10.0.0.51:2379]\n";
        let tls = "    caFile: /etc/etcd/ca.crt\n    certFile: /etc/etcd/c.crt\n    keyFile: /etc/etcd/c.key\n";
        let c = cfg(&format!("{eps}{tls}"));
        let text = cluster_configuration_yaml(&c).unwrap();
        let y: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        let ext = &y["etcd"]["external"];
        assert_eq!(ext["httpEndpoints"], ext["endpoints"], "{text}");
        assert_eq!(ext["httpEndpoints"][1], "https://10.0.0.51:2379", "{text}");
        // Given ones are kept.
        let c = cfg(&format!("{eps}    httpEndpoints: [http://10.0.0.50:2381]\n{tls}"));
        let text = cluster_configuration_yaml(&c).unwrap();
        let y: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(
            y["etcd"]["external"]["httpEndpoints"],
            serde_yaml::from_str::<serde_yaml::Value>("[http://10.0.0.50:2381]").unwrap()
        );
        // Local etcd: no external section at all.
        let text = cluster_configuration_yaml(&cfg("")).unwrap();
        assert!(!text.contains("httpEndpoints"), "{text}");
    }

    #[test]
    fn kubelet_config_map_signed_only_when_generated() {
        let c = cfg("");
        let cm = kubelet_config_map(&c).unwrap();
        assert_eq!(cm["metadata"]["name"], "kubelet-config");
        assert_eq!(cm["metadata"]["namespace"], "kube-system");
        let text = cm["data"]["kubelet"].as_str().unwrap();
        assert_eq!(text, crate::objects::kubelet::config_yaml(&c).unwrap());
        // sha256 of the single data value.
        let expected = {
            use sha2::{Digest, Sha256};
            let d = Sha256::digest(text.as_bytes());
            format!("sha256:{}", d.iter().map(|b| format!("{b:02x}")).collect::<String>())
        };
        assert_eq!(cm["metadata"]["annotations"][COMPONENT_CONFIG_HASH_ANNOTATION], expected.as_str());
        assert_eq!(config_map_checksum(&cm), expected);

        let user = cfg("---\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 20\n");
        let cm = kubelet_config_map(&user).unwrap();
        assert!(cm["metadata"].get("annotations").is_none(), "user-supplied configs are not signed");
        assert!(cm["data"]["kubelet"].as_str().unwrap().contains("maxPods: 20"));
    }
}
