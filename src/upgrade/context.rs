//! This control plane's configuration as kubeadm's upgrade fetches it: the cluster's
//! ClusterConfiguration (kubeadm-config), the node's name, CRI socket and API endpoint, and the
//! kubelet and kube-proxy component configs. A component config kubeadm generated (its ConfigMap's
//! signature verifies) is generated again; one a user supplied is kept, as kubeadm's
//! FetchFromCluster marks it.

use log::info;

use super::cluster::{api_endpoint, client_from, cri_socket, get_configmap, node_name};
use crate::config::InitConfig;
use crate::config::types::{ApiEndpoint, InitConfiguration, NodeRegistrationOptions, Patches};
use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::kube::Client;
use crate::paths::KUBELET_CONF;

/// What to fetch.
pub(super) struct Want<'a> {
    /// The version to render at (`None`: the cluster's `kubernetesVersion`).
    pub version: Option<String>,
    pub patches: Option<&'a str>,
    /// The kubelet and kube-proxy configs too (apply and node upload or render them; diff does not).
    pub component_configs: bool,
}

/// kubeadm-config's ClusterConfiguration text.
pub(super) fn cluster_configuration(client: &Client) -> Result<String> {
    let cm = get_configmap(client, "kubeadm-config")?;
    cm["data"]["ClusterConfiguration"].as_str().map(str::to_string).ok_or_else(|| {
        Error::cluster(
            "unexpected error when reading kubeadm-config ConfigMap: ClusterConfiguration key value pair missing",
        )
    })
}

/// This control plane as the cluster describes it, before a version is chosen.
pub(super) struct View {
    /// kubeadm-config's ClusterConfiguration, and the user-supplied component configs.
    docs_text: String,
    name: String,
    cri: String,
    endpoint: (String, u16),
    patches: Option<String>,
}

/// Reads this control plane's configuration from the cluster.
pub(super) fn fetch(fs: &NodeFs, client: &Client, want: &Want) -> Result<View> {
    let mut docs_text = cluster_configuration(client)?;
    let name = node_name(&client_from(fs, &fs.real(KUBELET_CONF.as_str()))?)?;
    let cri = cri_socket(fs, &name)?;
    let endpoint = api_endpoint(client, &name)?;
    if want.component_configs {
        for (cm, key) in [("kubelet-config", "kubelet"), ("kube-proxy", "config.conf")] {
            if let Some(user) = user_supplied(client, cm, key)? {
                info!(
                    "[upgrade] The {cm} ConfigMap has no valid component-config hash (a user supplied it): its configuration is kept"
                );
                docs_text = format!("{docs_text}\n---\n{user}");
            }
        }
    }
    Ok(View { docs_text, name, cri, endpoint, patches: want.patches.map(str::to_string) })
}

impl View {
    /// The node's name, as the API server knows its kubelet.
    pub fn node_name(&self) -> &str {
        &self.name
    }

    pub fn cri_socket(&self) -> &str {
        &self.cri
    }

    /// kubeadm-config's `kubernetesVersion`.
    pub fn cluster_version(&self) -> Result<String> {
        let docs = crate::config::parse_stored("ConfigMap kube-system/kubeadm-config", &self.docs_text)?;
        Ok(docs.cluster.map(|c| c.kubernetes_version).unwrap_or_default())
    }

    /// The configuration at `version` (`None`: the cluster's `kubernetesVersion`).
    pub fn resolve(&self, version: Option<String>) -> Result<InitConfig> {
        let source = "ConfigMap kube-system/kubeadm-config";
        let mut docs = crate::config::parse_stored(source, &self.docs_text)?;
        let cluster = docs.cluster.get_or_insert_with(Default::default);
        let version = version.unwrap_or(cluster.kubernetes_version.clone());
        if version.is_empty() {
            return Err(Error::bad_flag("missing one or more required arguments: [version]"));
        }
        crate::config::values::Version::parse(version.trim_start_matches('v'))
            .map_err(|e| Error::bad_flag(format!("the version {version:?}: {e}")))?;
        cluster.kubernetes_version = version;
        let (address, port) = self.endpoint.clone();
        docs.init = Some(InitConfiguration {
            api_version: crate::constants::KUBEADM_API_VERSION.into(),
            kind: "InitConfiguration".into(),
            node_registration: NodeRegistrationOptions {
                name: self.name.clone(),
                cri_socket: self.cri.clone(),
                taints: None,
                ..Default::default()
            },
            local_api_endpoint: ApiEndpoint { advertise_address: address, bind_port: Some(i64::from(port)) },
            patches: self.patches.clone().map(|directory| Patches { directory }),
            ..Default::default()
        });
        Ok(crate::config::resolve_init(source, docs, &crate::host::facts())?)
    }
}

/// The resolved configuration of this control plane, from the cluster, at `want.version`.
pub(super) fn control_plane_config(fs: &NodeFs, client: &Client, want: &Want) -> Result<InitConfig> {
    fetch(fs, client, want)?.resolve(want.version.clone())
}

/// A component config's text when a user supplied it (its ConfigMap's component-config hash is
/// missing or does not verify); `None` when kubeadm generated it or the ConfigMap is absent.
fn user_supplied(client: &Client, name: &str, key: &str) -> Result<Option<String>> {
    let path = format!("/api/v1/namespaces/kube-system/configmaps/{name}");
    let Some(cm) = super::cluster::get_patiently(client, &path, &format!("reading the ConfigMap kube-system/{name}"))?
    else {
        return Ok(None);
    };
    if kubeadm_generated(&cm) {
        return Ok(None);
    }
    Ok(cm["data"][key].as_str().map(str::to_string))
}

/// A component-config ConfigMap whose component-config hash annotation verifies: kubeadm (or
/// kubestrap) generated it, so upgrade may generate it again.
pub(super) fn kubeadm_generated(cm: &serde_json::Value) -> bool {
    let signed = cm["metadata"]["annotations"][crate::objects::COMPONENT_CONFIG_HASH_ANNOTATION].as_str();
    signed == Some(crate::objects::config_map_checksum(cm).as_str())
}
