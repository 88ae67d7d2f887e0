//! Splits a kubeadm config file into its documents and decodes each strictly, like kubeadm's
//! SplitConfigDocuments + strict unmarshalling: a missing apiVersion/kind or a kind given twice is
//! an error; documents of unknown groups are ignored with a warning. v1beta3 documents are
//! converted to v1beta4 on the way in (see [`super::v1beta3`]), so everything after this sees
//! v1beta4 only.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::types::{ClusterConfiguration, InitConfiguration, JoinConfiguration, Timeouts};
use super::upgrade::UpgradeConfiguration;
use super::v1beta3;
use crate::constants::{KUBEADM_API_VERSION, KUBELET_API_VERSION, KUBEPROXY_API_VERSION};

/// A config file's documents, decoded.
///
/// Serializable only so a boot plan can carry them between the boot stages (see
/// `userdata::NodePlan`); user input always goes through [`parse_documents`], which checks each
/// document's apiVersion and kind.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Documents {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<InitConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterConfiguration>,
    /// KubeletConfiguration, kept as given and passed through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<serde_yaml::Mapping>,
    /// KubeProxyConfiguration, kept as given and passed through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_proxy: Option<serde_yaml::Mapping>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<JoinConfiguration>,
    /// Read only by `upgrade` ([`Reads::Upgrade`]).
    #[serde(skip)]
    pub upgrade: Option<UpgradeConfiguration>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Kinds the command does not read (see [`Reads`]), left undecoded.
    #[serde(skip)]
    pub ignored_kinds: Vec<String>,
}

#[derive(Deserialize)]
struct TypeMeta {
    #[serde(rename = "apiVersion")]
    api_version: Option<serde_yaml::Value>,
    kind: Option<serde_yaml::Value>,
}

/// Hard limit on config size: user-data is small, and this bounds memory on hostile input.
pub(crate) const MAX_CONFIG_BYTES: usize = 1 << 20;

/// Which documents a command reads. kubeadm decodes only those: `join` takes the
/// JoinConfiguration and ignores every other document with a warning, `init` every document but
/// a JoinConfiguration; a document a command never reads is not validated by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// User-data's plain documents: the role comes from which kinds are there.
    All,
    Init,
    Join,
    /// `upgrade`: the UpgradeConfiguration only.
    Upgrade,
}

/// Parses and checks user input (a file, user-data, flags' documents).
pub fn parse_documents(source: &str, text: &str) -> Result<Documents, ConfigError> {
    parse(source, text, true, Reads::All)
}

/// [`parse_documents`] for one command: documents it never reads are ignored with kubeadm's
/// warning rather than validated.
pub fn parse_documents_for(source: &str, text: &str, reads: Reads) -> Result<Documents, ConfigError> {
    parse(source, text, true, reads)
}

/// Parses config a cluster stored (the kubeadm-config ConfigMap): strict, but without the
/// checks kubeadm makes only on user input (feature gate names, httpEndpoints URLs), as
/// kubeadm reads it back on join.
pub fn parse_stored(source: &str, text: &str) -> Result<Documents, ConfigError> {
    parse(source, text, false, Reads::All)
}

fn parse(source: &str, text: &str, user_input: bool, reads: Reads) -> Result<Documents, ConfigError> {
    if text.len() > MAX_CONFIG_BYTES {
        return Err(ConfigError::file(source, format!("is {} bytes; the limit is {MAX_CONFIG_BYTES}", text.len())));
    }
    let mut d = Decoder {
        source,
        text,
        user_input,
        reads,
        docs: Documents::default(),
        moved_timeout: None,
        init_was_v1beta3: false,
    };
    let mut seen: Vec<String> = Vec::new();
    for (index, de) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let label = format!("document {}", index + 1);
        let Some((api_version, kind)) = type_meta(source, &label, de)? else { continue };
        let label = format!("{kind} ({label})");
        if seen.contains(&kind) {
            return Err(ConfigError::doc(
                source,
                &label,
                "kind",
                format!("{kind} appears twice; merge the two documents"),
            ));
        }
        seen.push(kind.clone());
        let is_join = kind == "JoinConfiguration" && api_version.starts_with("kubeadm.k8s.io/");
        let is_upgrade = kind == "UpgradeConfiguration" && api_version == KUBEADM_API_VERSION;
        let unread = match reads {
            Reads::All => false,
            Reads::Init => is_join,
            Reads::Join => !is_join,
            Reads::Upgrade => !is_upgrade,
        };
        if unread {
            // kubeadm's words for a document the command does not read.
            d.docs.warnings.push(format!(
                "{source}: ignored configuration document with GroupVersionKind {api_version}, Kind={kind}"
            ));
            d.docs.ignored_kinds.push(kind);
            continue;
        }
        d.decode(index, &label, &api_version, &kind)?;
    }
    Ok(d.finish())
}

/// A document's apiVersion and kind, or `None` for an empty document.
fn type_meta(
    source: &str,
    label: &str,
    de: serde_yaml::Deserializer<'_>,
) -> Result<Option<(String, String)>, ConfigError> {
    // Only apiVersion/kind here; the typed second pass reports everything else with its path.
    let meta = Option::<TypeMeta>::deserialize(de).map_err(|e| {
        let m = with_location(&e);
        let m =
            if m.contains("expected struct TypeMeta") { "is not a mapping with apiVersion and kind".into() } else { m };
        ConfigError::doc(source, label, "", m)
    })?;
    let Some(meta) = meta else { return Ok(None) };
    let api_version = required_string(source, label, "apiVersion", meta.api_version)?;
    let kind = required_string(source, label, "kind", meta.kind)?;
    Ok(Some((api_version, kind)))
}

/// One pass over a file's documents: what it has decoded so far.
struct Decoder<'a> {
    source: &'a str,
    text: &'a str,
    user_input: bool,
    reads: Reads,
    docs: Documents,
    /// v1beta3's apiServer.timeoutForControlPlane, bound for the InitConfiguration's timeouts.
    moved_timeout: Option<String>,
    init_was_v1beta3: bool,
}

impl Decoder<'_> {
    fn typed<T: DeserializeOwned>(&self, label: &str, index: usize) -> Result<T, ConfigError> {
        decode_typed(self.source, label, self.text, index)
    }

    fn check_cluster(&self, label: &str, cluster: &ClusterConfiguration) -> Result<(), ConfigError> {
        if self.user_input {
            super::features::check_cluster(self.source, label, cluster)?;
        }
        Ok(())
    }

    /// Decodes document `index` by its apiVersion and kind, or warns that it is ignored.
    fn decode(&mut self, index: usize, label: &str, api_version: &str, kind: &str) -> Result<(), ConfigError> {
        let source = self.source;
        let group = api_version.split('/').next().unwrap_or_default();
        match (group, api_version, kind) {
            ("kubeadm.k8s.io", _, _) => self.decode_kubeadm(index, label, api_version, kind)?,
            ("kubelet.config.k8s.io", KUBELET_API_VERSION, "KubeletConfiguration") => {
                self.docs.kubelet = Some(self.typed(label, index)?);
            }
            ("kubeproxy.config.k8s.io", KUBEPROXY_API_VERSION, "KubeProxyConfiguration") => {
                self.docs.kube_proxy = Some(self.typed(label, index)?);
            }
            ("kubelet.config.k8s.io" | "kubeproxy.config.k8s.io", _, _) => {
                return Err(ConfigError::doc(
                    source,
                    label,
                    "apiVersion",
                    format!(
                        "{api_version:?}/{kind} is not supported; use {KUBELET_API_VERSION} KubeletConfiguration or {KUBEPROXY_API_VERSION} KubeProxyConfiguration"
                    ),
                ));
            }
            _ => self.docs.warnings.push(format!(
                "{source}: ignored configuration document with GroupVersionKind {api_version}, Kind={kind}"
            )),
        }
        Ok(())
    }

    /// A document of the kubeadm.k8s.io group.
    fn decode_kubeadm(&mut self, index: usize, label: &str, api_version: &str, kind: &str) -> Result<(), ConfigError> {
        let source = self.source;
        match (api_version, kind) {
            (KUBEADM_API_VERSION, "InitConfiguration") => {
                let init: InitConfiguration = self.typed(label, index)?;
                self.docs.init = Some(init);
            }
            (KUBEADM_API_VERSION, "ClusterConfiguration") => {
                let cluster = self.typed(label, index)?;
                self.check_cluster(label, &cluster)?;
                self.docs.cluster = Some(cluster);
            }
            (KUBEADM_API_VERSION, "JoinConfiguration") => {
                let join: JoinConfiguration = self.typed(label, index)?;
                self.docs.join = Some(join);
            }
            (v1beta3::API_VERSION, "InitConfiguration" | "ClusterConfiguration" | "JoinConfiguration") => {
                self.decode_v1beta3(index, label, api_version, kind)?;
            }
            (v1beta3::API_VERSION, "ResetConfiguration") => {
                self.docs.warnings.push(format!("{source}: {label}: ignored, kubestrap reset takes flags"));
            }
            (KUBEADM_API_VERSION, "UpgradeConfiguration") if self.reads == Reads::Upgrade => {
                self.docs.upgrade = Some(self.typed(label, index)?);
            }
            (KUBEADM_API_VERSION, "UpgradeConfiguration") => {
                self.docs.warnings.push(format!("{source}: {label}: ignored, `kubestrap upgrade --config` reads it"));
            }
            (KUBEADM_API_VERSION, "ResetConfiguration") => {
                self.docs.warnings.push(format!("{source}: {label}: ignored, kubestrap reset takes flags"));
            }
            (KUBEADM_API_VERSION, _) => {
                return Err(ConfigError::doc(
                    source,
                    label,
                    "kind",
                    format!("{kind:?} is not a kubeadm {KUBEADM_API_VERSION} kind"),
                ));
            }
            (v1beta3::API_VERSION, _) => {
                return Err(ConfigError::doc(
                    source,
                    label,
                    "kind",
                    format!("{kind:?} is not a kubeadm {api_version} kind"),
                ));
            }
            _ => return Err(ConfigError::doc(source, label, "apiVersion", old_api_advice(api_version))),
        }
        Ok(())
    }

    /// A v1beta3 Init-, Cluster- or JoinConfiguration, converted to v1beta4 with a warning.
    fn decode_v1beta3(&mut self, index: usize, label: &str, api_version: &str, kind: &str) -> Result<(), ConfigError> {
        let source = self.source;
        self.docs.warnings.push(format!(
            "{source}: {label}: {api_version} is removed: kubeadm 1.31-1.36 read it with a warning and \
             kubeadm 1.37 refuses it (\"Please use kubeadm v1.36 instead\"); kubestrap still converts it. \
             `kubestrap config migrate --old-config {source}` writes the v1beta4 equivalent"
        ));
        match kind {
            "InitConfiguration" => {
                let old: v1beta3::InitConfiguration = self.typed(label, index)?;
                self.docs.init = Some(old.into_v1beta4());
                self.init_was_v1beta3 = true;
            }
            "ClusterConfiguration" => {
                let old: v1beta3::ClusterConfiguration = self.typed(label, index)?;
                let (cluster, timeout) = old.into_v1beta4();
                self.check_cluster(label, &cluster)?;
                self.docs.cluster = Some(cluster);
                self.moved_timeout = timeout;
            }
            _ => {
                let old: v1beta3::JoinConfiguration = self.typed(label, index)?;
                self.docs.join = Some(old.into_v1beta4());
            }
        }
        Ok(())
    }

    /// The documents, with what applies across them: the moved v1beta3 timeout and the join defaults.
    fn finish(mut self) -> Documents {
        let docs = &mut self.docs;
        if let Some(t) = self.moved_timeout {
            // kubeadm's conversion fills the InitConfiguration it builds (given or defaulted).
            let init = docs.init.get_or_insert_with(|| InitConfiguration {
                api_version: KUBEADM_API_VERSION.into(),
                kind: "InitConfiguration".into(),
                ..Default::default()
            });
            let timeouts = init.timeouts.get_or_insert_with(Timeouts::default);
            if self.init_was_v1beta3 || timeouts.control_plane_component_health_check.is_none() {
                timeouts.control_plane_component_health_check = Some(t);
            }
        }
        if let Some(j) = &mut docs.join {
            default_join(self.source, j, &mut docs.warnings);
        }
        self.docs
    }
}

impl Documents {
    /// `init --config F` needs an InitConfiguration or a ClusterConfiguration, as kubeadm's
    /// "no InitConfiguration or ClusterConfiguration kind was found in the configuration file".
    pub fn require_init(&self, source: &str) -> Result<(), ConfigError> {
        if self.init.is_some() || self.cluster.is_some() {
            return Ok(());
        }
        let hint = if self.join.is_some() || self.ignored_kinds.iter().any(|k| k == "JoinConfiguration") {
            " (it holds a JoinConfiguration: use it with `kubestrap join --config`)"
        } else {
            ""
        };
        Err(ConfigError::file(source, format!("has no InitConfiguration or ClusterConfiguration document{hint}")))
    }
}

/// kubeadm's advice for API versions it no longer reads.
fn old_api_advice(api_version: &str) -> String {
    let via = match api_version {
        "kubeadm.k8s.io/v1beta2" => "kubeadm 1.26 or older can migrate it to v1beta3",
        "kubeadm.k8s.io/v1beta1" => "kubeadm 1.22 or older can migrate it to v1beta2",
        _ => "an older kubeadm's `config migrate` can convert it",
    };
    format!(
        "{api_version:?} is no longer supported; kubestrap reads {KUBEADM_API_VERSION} and {} ({via}, then `kubestrap config migrate`)",
        v1beta3::API_VERSION
    )
}

/// kubeadm's static and dynamic defaults for a JoinConfiguration that are plain rewrites:
/// a CRI socket without a scheme gets `unix://` (with kubeadm's warning) and a `file://`
/// discovery URL becomes a path.
fn default_join(source: &str, j: &mut JoinConfiguration, warnings: &mut Vec<String>) {
    if let Some(w) = prefix_cri_socket(&mut j.node_registration.cri_socket) {
        warnings.push(format!("{source}: JoinConfiguration: nodeRegistration.criSocket: {w}"));
    }
    if let Some(f) = &mut j.discovery.file
        && let Some(path) = f.kube_config_path.strip_prefix("file://")
    {
        f.kube_config_path = path.to_string();
    }
}

/// kubeadm prepends `unix://` to a CRI socket given without a URL scheme, and warns. Returns the
/// warning when it did.
pub fn prefix_cri_socket(socket: &mut String) -> Option<String> {
    if socket.is_empty() || socket.contains("://") {
        return None;
    }
    let warning = format!(
        "{socket:?} has no URL scheme; using \"unix://{socket}\" (CRI endpoints without a scheme are deprecated: update the configuration)"
    );
    *socket = format!("unix://{socket}");
    Some(warning)
}

/// The ClusterConfiguration a joining node reads from the kube-system/kubeadm-config ConfigMap:
/// v1beta4 (kubeadm ≥ 1.31, kubestrap) or v1beta3 (clusters made by kubeadm 1.22-1.30).
pub fn cluster_from_configmap(text: &str) -> Result<ClusterConfiguration, ConfigError> {
    let source = "ConfigMap kube-system/kubeadm-config";
    let docs = parse_stored(source, text)?;
    docs.cluster
        .ok_or_else(|| ConfigError::file(source, "data.ClusterConfiguration holds no ClusterConfiguration".into()))
}

fn required_string(
    source: &str,
    label: &str,
    field: &str,
    v: Option<serde_yaml::Value>,
) -> Result<String, ConfigError> {
    match v {
        Some(serde_yaml::Value::String(s)) if !s.is_empty() => Ok(s),
        Some(other) => {
            Err(ConfigError::doc(source, label, field, format!("must be a non-empty string, got {}", short(&other))))
        }
        None => {
            Err(ConfigError::doc(source, label, field, "is missing; every document needs apiVersion and kind".into()))
        }
    }
}

/// Decodes document `index` again, this time into its type, so errors carry the field path
/// and the line/column of the bad value.
fn decode_typed<T: DeserializeOwned>(source: &str, label: &str, text: &str, index: usize) -> Result<T, ConfigError> {
    let vanished = || ConfigError::doc(source, label, "", "document vanished on second read".into());
    let de = serde_yaml::Deserializer::from_str(text).nth(index).ok_or_else(vanished)?;
    // A document that is no plain YAML value (a duplicate key) gets the typed decoder's message.
    if let Ok(mut value) = serde_yaml::Value::deserialize(de)
        && strip_nulls(&mut value)
    {
        // Written again without its nulls; serde_yaml's own text keeps every scalar's type, but
        // line numbers would point into this copy, so errors say the field path only.
        let text = serde_yaml::to_string(&value).map_err(|e| ConfigError::doc(source, label, "", e.to_string()))?;
        let de = serde_yaml::Deserializer::from_str(&text).next().ok_or_else(vanished)?;
        return typed_from(source, label, de, false);
    }
    let de = serde_yaml::Deserializer::from_str(text).nth(index).ok_or_else(vanished)?;
    typed_from(source, label, de, true)
}

/// kubeadm's decoder (JSON into Go structs) treats `field: null` as a field not given; so do we,
/// by dropping null-valued mapping entries at any depth. True if any was dropped.
fn strip_nulls(v: &mut serde_yaml::Value) -> bool {
    match v {
        serde_yaml::Value::Mapping(m) => {
            let before = m.len();
            m.retain(|_, v| !v.is_null());
            let mut dropped = m.len() != before;
            for (_, v) in m.iter_mut() {
                dropped |= strip_nulls(v);
            }
            dropped
        }
        serde_yaml::Value::Sequence(s) => s.iter_mut().fold(false, |d, v| strip_nulls(v) | d),
        serde_yaml::Value::Tagged(t) => strip_nulls(&mut t.value),
        _ => false,
    }
}

/// `serde_yaml::from_slice`, through the same path-tracking decoder as [`typed_from`]: the
/// config types then have one deserializer instance, not two (about 100 KB of code). The error
/// is serde_yaml's own, unchanged.
pub fn from_yaml_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, serde_yaml::Error> {
    serde_path_to_error::deserialize(serde_yaml::Deserializer::from_slice(bytes)).map_err(|e| e.into_inner())
}

fn typed_from<T: DeserializeOwned>(
    source: &str,
    label: &str,
    de: serde_yaml::Deserializer<'_>,
    located: bool,
) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        // serde_yaml already prefixes nested errors with the path; say it once.
        let msg = if located { with_location(e.inner()) } else { without_location(&e.inner().to_string()) };
        let msg = match msg.split_once(": ") {
            Some((p, rest))
                if path == p || path.starts_with(&format!("{p}.")) || path.starts_with(&format!("{p}[")) =>
            {
                rest.to_string()
            }
            _ => msg,
        };
        ConfigError::doc(source, label, &path, msg)
    })
}

fn short(v: &serde_yaml::Value) -> String {
    let s = serde_yaml::to_string(v).unwrap_or_default();
    let s = s.trim();
    if s.len() > 60 { format!("{}…", &s[..s.floor_char_boundary(60)]) } else { s.to_string() }
}

/// serde_yaml's message without its " at line L column C" (which would point into a copy).
fn without_location(m: &str) -> String {
    match m.find(" at line ") {
        Some(i) => m[..i].to_string(),
        None => m.to_string(),
    }
}

/// serde_yaml's message, with the line and column when it did not already say them.
fn with_location(e: &serde_yaml::Error) -> String {
    let m = e.to_string();
    match e.location() {
        Some(l) if !m.contains(" at line ") => format!("{m} at line {} column {}", l.line(), l.column()),
        _ => m,
    }
}
