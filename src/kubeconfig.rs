//! Kubeconfig files: the clientcmd v1 `Config` shape, rendering with embedded certs, loading,
//! and the list of files a control-plane node gets.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};

/// What is wrong with a kubeconfig, phrased to follow its file name (`admin.conf has no
/// context named "x"`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeconfigError {
    #[error("is not a kubeconfig: {detail}")]
    Parse { detail: String },
    #[error("has kind {kind:?}, not Config")]
    WrongKind { kind: String },
    #[error("has no context named {name:?}")]
    NoContext { name: String },
    #[error("has no cluster named {name:?}")]
    NoCluster { name: String },
    /// Embedded data that is not base64; `field` is empty when the caller did not say which.
    #[error("{}bad base64: {detail}", field_prefix(field))]
    Base64 { field: String, detail: String },
    /// A file the kubeconfig names (client-certificate, client-key) that cannot be read.
    #[error("cannot read {path}")]
    Unreadable { path: String },
    /// Our own kubeconfig could not be turned into YAML.
    #[error("rendering the kubeconfig for context {context:?} as YAML: {detail}")]
    Render { context: String, detail: String },
}

fn field_prefix(field: &str) -> String {
    if field.is_empty() { String::new() } else { format!("{field}: ") }
}

impl KubeconfigError {
    /// Names the field a [`KubeconfigError::Base64`] came from; other errors are unchanged.
    pub(crate) fn in_field(self, name: &str) -> Self {
        match self {
            KubeconfigError::Base64 { detail, .. } => KubeconfigError::Base64 { field: name.to_string(), detail },
            other => other,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Kubeconfig {
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    #[serde(deserialize_with = "null_as_empty")]
    pub clusters: Vec<NamedCluster>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub contexts: Vec<NamedContext>,
    #[serde(rename = "current-context", default)]
    pub current_context: String,
    pub kind: String,
    /// Deprecated; client-go (v0.34+) tags it `omitzero`, so kubeadm writes none when empty.
    #[serde(default, deserialize_with = "null_as_empty", skip_serializing_if = "serde_yaml::Mapping::is_empty")]
    pub preferences: serde_yaml::Mapping,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub users: Vec<NamedUser>,
}

/// clientcmd writes `contexts: null` (e.g. in cluster-info); read it as empty.
fn null_as_empty<'de, D: serde::Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NamedCluster {
    pub cluster: Cluster,
    pub name: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Cluster {
    #[serde(rename = "certificate-authority-data", default, skip_serializing_if = "String::is_empty")]
    pub certificate_authority_data: String,
    pub server: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NamedContext {
    pub context: Context,
    pub name: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Context {
    pub cluster: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub user: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NamedUser {
    pub name: String,
    pub user: User,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct User {
    #[serde(rename = "client-certificate", default, skip_serializing_if = "String::is_empty")]
    pub client_certificate: String,
    #[serde(rename = "client-certificate-data", default, skip_serializing_if = "String::is_empty")]
    pub client_certificate_data: String,
    #[serde(rename = "client-key", default, skip_serializing_if = "String::is_empty")]
    pub client_key: String,
    #[serde(rename = "client-key-data", default, skip_serializing_if = "String::is_empty")]
    pub client_key_data: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token: String,
}

/// Client credentials to embed.
pub enum Credentials {
    Cert { cert_pem: String, key_pem: String },
    Token(String),
}

/// A kubeconfig with one cluster, one user and the context `<user>@<cluster>`.
pub fn build(cluster_name: &str, server: &str, ca_pem: &[u8], user: &str, creds: Credentials) -> Kubeconfig {
    let context = format!("{user}@{cluster_name}");
    let u = match creds {
        Credentials::Cert { cert_pem, key_pem } => User {
            client_certificate_data: B64.encode(cert_pem),
            client_key_data: B64.encode(key_pem),
            ..Default::default()
        },
        Credentials::Token(t) => User { token: t, ..Default::default() },
    };
    Kubeconfig {
        api_version: "v1".into(),
        clusters: vec![NamedCluster {
            cluster: Cluster { certificate_authority_data: B64.encode(ca_pem), server: server.into() },
            name: cluster_name.into(),
        }],
        contexts: vec![NamedContext {
            context: Context { cluster: cluster_name.into(), namespace: String::new(), user: user.into() },
            name: context.clone(),
        }],
        current_context: context,
        kind: "Config".into(),
        preferences: Default::default(),
        users: vec![NamedUser { name: user.into(), user: u }],
    }
}

impl Kubeconfig {
    /// The YAML clientcmd would write. Fails only if serde_yaml cannot represent the value,
    /// which for plain strings and maps does not happen; the error is returned, never an empty
    /// file.
    pub fn to_yaml(&self) -> Result<String, KubeconfigError> {
        serde_yaml::to_string(self)
            .map_err(|e| KubeconfigError::Render { context: self.current_context.clone(), detail: e.to_string() })
    }

    pub fn parse(text: &[u8]) -> Result<Kubeconfig, KubeconfigError> {
        let k: Kubeconfig =
            serde_yaml::from_slice(text).map_err(|e| KubeconfigError::Parse { detail: e.to_string() })?;
        if k.kind != "Config" {
            return Err(KubeconfigError::WrongKind { kind: k.kind });
        }
        Ok(k)
    }

    /// The cluster and user of the current context.
    pub fn current(&self) -> Result<(&Cluster, Option<&User>), KubeconfigError> {
        let ctx = self
            .contexts
            .iter()
            .find(|c| c.name == self.current_context)
            .ok_or_else(|| KubeconfigError::NoContext { name: self.current_context.clone() })?;
        let cluster = self
            .clusters
            .iter()
            .find(|c| c.name == ctx.context.cluster)
            .ok_or_else(|| KubeconfigError::NoCluster { name: ctx.context.cluster.clone() })?;
        let user = self.users.iter().find(|u| u.name == ctx.context.user).map(|u| &u.user);
        Ok((&cluster.cluster, user))
    }
}

pub fn decode_b64(s: &str) -> Result<Vec<u8>, KubeconfigError> {
    B64.decode(s.trim()).map_err(|e| KubeconfigError::Base64 { field: String::new(), detail: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_null_lists_as_written_by_clientcmd() {
        let k = Kubeconfig::parse(b"apiVersion: v1\nclusters:\n- cluster:\n    server: https://x:6443\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {}\nusers: null\n").unwrap();
        assert!(k.contexts.is_empty() && k.users.is_empty());
        assert_eq!(k.clusters[0].cluster.server, "https://x:6443");
        assert!(Kubeconfig::parse(b"apiVersion: v1\nkind: Config\nclusters: null\n").unwrap().clusters.is_empty());
    }

    #[test]
    fn errors_name_the_field_and_context() {
        let e = decode_b64("%%%").unwrap_err();
        assert!(e.to_string().starts_with("bad base64: "), "{e}");
        let e = e.in_field("client-key-data");
        assert!(e.to_string().starts_with("client-key-data: bad base64: "), "{e}");
        let k = Kubeconfig::parse(b"apiVersion: v1\nkind: Config\nclusters: []\ncurrent-context: admin@k\n").unwrap();
        assert_eq!(k.current().unwrap_err().to_string(), "has no context named \"admin@k\"");
        let e = Kubeconfig::parse(b"apiVersion: v1\nkind: Pod\nclusters: []\n").unwrap_err();
        assert_eq!(e, KubeconfigError::WrongKind { kind: "Pod".into() });
        assert_eq!(
            KubeconfigError::Unreadable { path: "/x/client.key".into() }.to_string(),
            "cannot read /x/client.key"
        );
    }
}
