//! User-data → what this node does: `init` with kubeadm config text, or `join` with a
//! JoinConfiguration. The schema is in docs/user-data.md.
//!
//! Formats: kubeadm v1beta4 documents unchanged; `#cloud-config` with a `kubestrap:` mapping (the
//! shorthand, optionally with embedded kubeadm documents under `kubeadm:`); either of them
//! gzip-compressed. The `kubestrap.*` credentials override the same fields, and meta-data's
//! local-hostname names the node unless the user-data does. Token values never appear in errors
//! or notices.

use std::io::Read;

use serde::Deserialize;
use serde_yaml::{Mapping, Value};

use super::types::{
    BootstrapToken, BootstrapTokenDiscovery, ClusterConfiguration, InitConfiguration, JoinConfiguration,
};
use super::values::is_dns1123_subdomain;
use super::{ConfigError, Documents, parse_documents};
use crate::constants::KUBEADM_API_VERSION;
use crate::datasource::{CRED_CA_CERT_HASH, CRED_TOKEN, CRED_USER_DATA, Gathered};

/// The largest user-data accepted, before and after gzip decompression (bounds zip bombs).
pub const MAX_USER_DATA_BYTES: usize = 1 << 20;
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// What the node will do.
// Built once per boot and moved, never stored in bulk: the size difference does not matter, and
// a plain field keeps matching simple.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum NodePlan {
    /// Control plane: kubeadm v1beta4 YAML documents to feed [`parse_documents`].
    Init { config_text: String },
    /// Worker.
    Join { join: JoinConfiguration },
}

/// A plan and the notices (ignored keys, overridden values) the operator should see.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub plan: NodePlan,
    pub notices: Vec<String>,
}

/// Plans the node from what the datasource gathered; notices are logged as warnings.
pub fn plan(g: &Gathered) -> Result<NodePlan, ConfigError> {
    let p = plan_detailed(g)?;
    for n in &p.notices {
        log::warn!("{n}");
    }
    Ok(p.plan)
}

/// The `kubestrap:` mapping of `#cloud-config` user-data. Unknown keys are errors.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Shorthand {
    role: Option<String>,
    /// A Value so that a wrongly typed token is never echoed by a decode error.
    token: Option<Value>,
    control_plane_endpoint: Option<String>,
    #[serde(default)]
    ca_cert_hashes: Vec<String>,
    node_name: Option<String>,
    kubernetes_version: Option<String>,
    pod_subnet: Option<String>,
    service_subnet: Option<String>,
    #[serde(default, rename = "certSANs")]
    cert_sans: Vec<String>,
    advertise_address: Option<String>,
    /// Embedded kubeadm config: a string of YAML documents, one document, or a list of them.
    kubeadm: Option<Value>,
    #[serde(default)]
    allow_private_keys: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    ControlPlane,
    Worker,
}

/// [`plan`], returning the notices instead of logging them.
pub fn plan_detailed(g: &Gathered) -> Result<Planned, ConfigError> {
    let mut notices = Vec::new();
    let (raw, src, from_credential) = match g.credentials.get(CRED_USER_DATA) {
        Some(c) => {
            if g.user_data.is_some() && g.source != "credentials" {
                notices.push(format!("credential {CRED_USER_DATA} replaces the user-data from {}", g.source));
            }
            (c.as_slice(), format!("credential {CRED_USER_DATA}"), true)
        }
        None => match &g.user_data {
            Some(u) => (u.as_slice(), format!("user-data ({})", g.source), false),
            None => {
                return Err(ConfigError::file(
                    &format!("user-data ({})", g.source),
                    "is missing: pass kubeadm config documents or #cloud-config with a kubestrap: key (see docs/user-data.md)"
                        .into(),
                ));
            }
        },
    };
    let text = decode(&src, raw)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    if text.trim().is_empty() {
        return Err(ConfigError::file(&src, "is empty".into()));
    }
    check_format(&src, text)?;

    let is_cloud_config = text.trim_start().lines().next().is_some_and(|l| l.trim_end() == "#cloud-config");
    let (docs, sh) = if is_cloud_config {
        let (docs, sh) = cloud_config(&src, text, from_credential, &mut notices)?;
        (docs, Some(sh))
    } else {
        refuse_private_keys(&src, text, from_credential, false)?;
        (parse_documents(&src, text)?, None)
    };
    notices.extend(docs.warnings.iter().cloned());

    let has_init = docs.init.is_some() || docs.cluster.is_some();
    let has_join = docs.join.is_some();
    if has_init && has_join {
        return Err(ConfigError::file(
            &src,
            "holds both InitConfiguration/ClusterConfiguration and JoinConfiguration; a node either inits (control plane) or joins (worker): keep one".into(),
        ));
    }
    let role = match sh.as_ref().and_then(|s| s.role.as_deref()) {
        Some("control-plane") => Role::ControlPlane,
        Some("worker") => Role::Worker,
        Some(other) => {
            return Err(ConfigError::doc(
                &src,
                "kubestrap",
                "role",
                format!("{other:?} must be control-plane or worker"),
            ));
        }
        None if has_init => Role::ControlPlane,
        None if has_join => Role::Worker,
        None if sh.is_some() => {
            return Err(ConfigError::doc(
                &src,
                "kubestrap",
                "role",
                "is missing: set control-plane or worker (or embed kubeadm documents under kubeadm:)".into(),
            ));
        }
        None => {
            return Err(ConfigError::file(
                &src,
                "has no InitConfiguration, ClusterConfiguration or JoinConfiguration document, so the node's role is unknown".into(),
            ));
        }
    };
    if role == Role::Worker && has_init {
        return Err(ConfigError::doc(
            &src,
            "kubestrap",
            "role",
            "is worker but kubestrap.kubeadm holds an InitConfiguration/ClusterConfiguration".into(),
        ));
    }
    if role == Role::ControlPlane && has_join {
        return Err(ConfigError::doc(
            &src,
            "kubestrap",
            "role",
            "is control-plane but kubestrap.kubeadm holds a JoinConfiguration".into(),
        ));
    }

    let sh = sh.unwrap_or_default();
    let token = Overrides::read(&src, g, &sh, &mut notices)?;
    let plan = match role {
        Role::ControlPlane => init_plan(&src, docs, &sh, &token, g, &mut notices)?,
        Role::Worker => join_plan(&src, docs, &sh, is_cloud_config, &token, g, &mut notices)?,
    };
    Ok(Planned { plan, notices })
}

/// Un-gzips (bounded) and checks UTF-8.
fn decode(src: &str, raw: &[u8]) -> Result<String, ConfigError> {
    if raw.len() > MAX_USER_DATA_BYTES {
        return Err(ConfigError::file(src, format!("is {} bytes; the limit is {MAX_USER_DATA_BYTES}", raw.len())));
    }
    let bytes = if raw.starts_with(&GZIP_MAGIC) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(raw)
            .take(MAX_USER_DATA_BYTES as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| ConfigError::file(src, format!("is gzip-compressed but does not decompress: {e}")))?;
        if out.len() > MAX_USER_DATA_BYTES {
            return Err(ConfigError::file(
                src,
                format!("decompresses to more than {MAX_USER_DATA_BYTES} bytes (the limit); refusing it"),
            ));
        }
        out
    } else {
        raw.to_vec()
    };
    String::from_utf8(bytes).map_err(|e| {
        ConfigError::file(src, format!("is not UTF-8 text (byte {}) nor gzip", e.utf8_error().valid_up_to()))
    })
}

/// Other cloud-init user-data formats: say so instead of a YAML error.
fn check_format(src: &str, text: &str) -> Result<(), ConfigError> {
    let first = text.trim_start().lines().next().unwrap_or_default();
    let kind = if first.starts_with("#!") {
        "a shell script"
    } else if first.starts_with("#cloud-config-archive") {
        "a cloud-config archive"
    } else if first.starts_with("#include") {
        "an #include list"
    } else if first.starts_with("#cloud-boothook") || first.starts_with("#part-handler") {
        "a cloud-init boothook/part-handler"
    } else if first.starts_with("## template:") {
        "a Jinja template"
    } else if first.to_ascii_lowercase().starts_with("content-type:") || first.starts_with("MIME-Version:") {
        "MIME multipart"
    } else {
        return Ok(());
    };
    Err(ConfigError::file(
        src,
        format!(
            "is {kind}, which kubestrap does not run; use kubeadm config documents or #cloud-config with a kubestrap: key"
        ),
    ))
}

/// Finds a PEM private key anywhere in the text (also inside JSON/YAML strings); the 1-based line.
fn private_key_line(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find("-----BEGIN ") {
        let start = from + i;
        let rest = &text[start + "-----BEGIN ".len()..];
        if let Some(end) = rest.find("-----")
            && rest[..end].ends_with("PRIVATE KEY")
            && end <= 64
        {
            return Some(text[..start].matches('\n').count() + 1);
        }
        from = start + 1;
    }
    None
}

fn refuse_private_keys(src: &str, text: &str, from_credential: bool, allowed: bool) -> Result<(), ConfigError> {
    // Credentials are readable by root only, so the reason for refusing does not apply to them.
    if from_credential || allowed {
        return Ok(());
    }
    match private_key_line(text) {
        Some(line) => Err(ConfigError::file(
            src,
            format!(
                "carries a private key (a -----BEGIN ... PRIVATE KEY----- block at line {line}); refusing it because \
                 user-data is readable by every process on many clouds (IMDS, the seed disk). Pass keys as systemd \
                 credentials or bake them into the image, or set kubestrap: {{allowPrivateKeys: true}} to accept the risk"
            ),
        )),
        None => Ok(()),
    }
}

/// Parses `#cloud-config`: the kubestrap mapping (strict), embedded kubeadm documents, and a
/// notice for every other top-level key.
fn cloud_config(
    src: &str,
    text: &str,
    from_credential: bool,
    notices: &mut Vec<String>,
) -> Result<(Documents, Shorthand), ConfigError> {
    let top: Value = serde_yaml::from_str(text).map_err(|e| ConfigError::file(src, format!("#cloud-config: {e}")))?;
    let top = match top {
        Value::Mapping(m) => m,
        Value::Null => Mapping::new(),
        _ => return Err(ConfigError::file(src, "#cloud-config is not a YAML mapping".into())),
    };
    let ks = top.get("kubestrap").cloned();
    let allowed = ks.as_ref().and_then(|k| k.get("allowPrivateKeys")).and_then(Value::as_bool).unwrap_or(false);
    refuse_private_keys(src, text, from_credential, allowed)?;
    for k in top.keys() {
        match k.as_str() {
            Some("kubestrap") => {}
            Some(name) => {
                notices.push(format!("{src}: cloud-config key {name:?} ignored: kubestrap reads only kubestrap:"))
            }
            None => notices.push(format!("{src}: non-string cloud-config key ignored")),
        }
    }
    let ks = match ks {
        Some(Value::Null) => Some(Value::Mapping(Mapping::new())),
        other => other,
    };
    let Some(ks) = ks else {
        return Err(ConfigError::file(
            src,
            "is #cloud-config without a kubestrap: key; kubestrap needs at least kubestrap: {role: ...} (see docs/user-data.md)".into(),
        ));
    };
    let sh: Shorthand = serde_path_to_error::deserialize(ks).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        ConfigError::doc(src, "kubestrap", &path, e.inner().to_string())
    })?;
    if sh.allow_private_keys && private_key_line(text).is_some() {
        notices.push(format!("{src}: carries a private key, accepted because kubestrap.allowPrivateKeys is true"));
    }
    let docs = match &sh.kubeadm {
        None => Documents::default(),
        Some(v) => {
            let embedded = embedded_text(src, v)?;
            parse_documents(&format!("{src}: kubestrap.kubeadm"), &embedded)?
        }
    };
    Ok((docs, sh))
}

fn embedded_text(src: &str, v: &Value) -> Result<String, ConfigError> {
    let ser =
        |d: &Value| serde_yaml::to_string(d).map_err(|e| ConfigError::doc(src, "kubestrap", "kubeadm", e.to_string()));
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Mapping(_) => ser(v),
        Value::Sequence(items) => Ok(items.iter().map(ser).collect::<Result<Vec<_>, _>>()?.join("---\n")),
        _ => Err(ConfigError::doc(
            src,
            "kubestrap",
            "kubeadm",
            "must be a string of kubeadm YAML documents, one document, or a list of documents".into(),
        )),
    }
}

/// The token and CA hashes after applying credentials.
struct Overrides {
    /// The effective token, if any (credential over user-data). Never printed.
    token: Option<String>,
    /// Where the token came from, for errors.
    token_origin: String,
    /// CA hashes from the credential, if given (they replace user-data's).
    ca_hashes: Option<Vec<String>>,
}

impl Overrides {
    fn read(src: &str, g: &Gathered, sh: &Shorthand, notices: &mut Vec<String>) -> Result<Overrides, ConfigError> {
        let mut token = match &sh.token {
            None => None,
            Some(Value::String(s)) => Some(s.trim().to_string()),
            Some(_) => {
                return Err(ConfigError::doc(src, "kubestrap", "token", "must be a string (value hidden)".into()));
            }
        };
        let mut token_origin = "kubestrap.token in the user-data".to_string();
        if let Some(c) = g.credentials.get(CRED_TOKEN) {
            let origin = format!("credential {CRED_TOKEN}");
            let t = std::str::from_utf8(c)
                .map_err(|_| ConfigError::file(&origin, "is not UTF-8 text (value hidden)".into()))?
                .trim()
                .to_string();
            if token.is_some() {
                notices.push(format!("credential {CRED_TOKEN} overrides kubestrap.token from the user-data"));
            }
            token = Some(t);
            token_origin = origin;
        }
        if let Some(t) = &token
            && !crate::token::is_valid_token(t)
        {
            let msg = "bad token format (value hidden): expected [a-z0-9]{6}.[a-z0-9]{16}, e.g. from `kubestrap token generate`"
                .to_string();
            return Err(if g.credentials.contains_key(CRED_TOKEN) {
                ConfigError::file(&token_origin, msg)
            } else {
                ConfigError::doc(src, "kubestrap", "token", msg)
            });
        }
        let ca_hashes = match g.credentials.get(CRED_CA_CERT_HASH) {
            None => None,
            Some(c) => {
                let origin = format!("credential {CRED_CA_CERT_HASH}");
                let s = std::str::from_utf8(c).map_err(|_| ConfigError::file(&origin, "is not UTF-8 text".into()))?;
                let list: Vec<String> = s
                    .split(|c: char| c.is_whitespace() || c == ',')
                    .filter(|h| !h.is_empty())
                    .map(String::from)
                    .collect();
                if list.is_empty() {
                    return Err(ConfigError::file(&origin, "is empty; expected sha256:<64 hex>".into()));
                }
                for h in &list {
                    crate::discovery::CaPin::parse(h).map_err(|m| ConfigError::file(&origin, m.to_string()))?;
                }
                Some(list)
            }
        };
        Ok(Overrides { token, token_origin, ca_hashes })
    }
}

/// Sets a string field from the shorthand unless embedded kubeadm config already gave another value.
fn set_field(
    src: &str,
    key: &str,
    value: &Option<String>,
    target: &mut String,
    doc_path: &str,
) -> Result<(), ConfigError> {
    let Some(v) = value else { return Ok(()) };
    if target.is_empty() || target == v {
        *target = v.clone();
        Ok(())
    } else {
        Err(ConfigError::doc(
            src,
            "kubestrap",
            key,
            format!("{v:?} disagrees with {doc_path} {target:?} in kubestrap.kubeadm; set it in one place"),
        ))
    }
}

/// Node name: as given, else meta-data's local-hostname (lowercased); validated as RFC 1123.
fn node_name(src: &str, name: &mut String, g: &Gathered, doc: &str) -> Result<(), ConfigError> {
    if name.is_empty() {
        if let Some(h) = g.meta.local_hostname.as_deref().map(str::trim).filter(|h| !h.is_empty()) {
            let lower = h.to_lowercase();
            if !is_dns1123_subdomain(&lower) {
                return Err(ConfigError::file(
                    &format!("meta-data ({})", g.source),
                    format!(
                        "local-hostname {h:?} is not a valid node name (lowercase RFC 1123 subdomain: a-z, 0-9, '-', '.'); set kubestrap.nodeName"
                    ),
                ));
            }
            *name = lower;
        }
        return Ok(());
    }
    if !is_dns1123_subdomain(name) {
        return Err(ConfigError::doc(
            src,
            doc,
            "nodeRegistration.name",
            format!("{name:?} is not a valid node name (lowercase RFC 1123 subdomain: a-z, 0-9, '-', '.')"),
        ));
    }
    Ok(())
}

fn not_for(role: &str, what: &[(&str, bool)], src: &str, notices: &mut Vec<String>) {
    for (key, set) in what {
        if *set {
            notices.push(format!("{src}: kubestrap.{key} ignored: it does not apply to a {role}"));
        }
    }
}

fn init_plan(
    src: &str,
    mut docs: Documents,
    sh: &Shorthand,
    ov: &Overrides,
    g: &Gathered,
    notices: &mut Vec<String>,
) -> Result<NodePlan, ConfigError> {
    let mut init = docs.init.take().unwrap_or_else(|| InitConfiguration {
        api_version: KUBEADM_API_VERSION.into(),
        kind: "InitConfiguration".into(),
        ..Default::default()
    });
    let wants_cluster = sh.kubernetes_version.is_some()
        || sh.control_plane_endpoint.is_some()
        || sh.pod_subnet.is_some()
        || sh.service_subnet.is_some()
        || !sh.cert_sans.is_empty();
    let mut cluster = docs.cluster.take();
    if wants_cluster && cluster.is_none() {
        cluster = Some(ClusterConfiguration {
            api_version: KUBEADM_API_VERSION.into(),
            kind: "ClusterConfiguration".into(),
            ..Default::default()
        });
    }
    set_field(src, "nodeName", &sh.node_name, &mut init.node_registration.name, "nodeRegistration.name")?;
    set_field(
        src,
        "advertiseAddress",
        &sh.advertise_address,
        &mut init.local_api_endpoint.advertise_address,
        "localAPIEndpoint.advertiseAddress",
    )?;
    if let Some(c) = cluster.as_mut() {
        set_field(src, "kubernetesVersion", &sh.kubernetes_version, &mut c.kubernetes_version, "kubernetesVersion")?;
        set_field(
            src,
            "controlPlaneEndpoint",
            &sh.control_plane_endpoint,
            &mut c.control_plane_endpoint,
            "controlPlaneEndpoint",
        )?;
        set_field(src, "podSubnet", &sh.pod_subnet, &mut c.networking.pod_subnet, "networking.podSubnet")?;
        set_field(
            src,
            "serviceSubnet",
            &sh.service_subnet,
            &mut c.networking.service_subnet,
            "networking.serviceSubnet",
        )?;
        for san in &sh.cert_sans {
            if !c.api_server.cert_sans.contains(san) {
                c.api_server.cert_sans.push(san.clone());
            }
        }
    }
    not_for("control-plane", &[("caCertHashes", !sh.ca_cert_hashes.is_empty())], src, notices);
    if ov.ca_hashes.is_some() {
        notices.push(format!("credential {CRED_CA_CERT_HASH} ignored: a control plane does not pin a CA"));
    }
    // The effective token (credential over user-data) becomes the first bootstrap token.
    if let Some(t) = &ov.token {
        let from_credential = g.credentials.contains_key(CRED_TOKEN);
        match init.bootstrap_tokens.first_mut() {
            None => init.bootstrap_tokens.push(BootstrapToken { token: t.clone(), ..Default::default() }),
            Some(first) if first.token == *t => {}
            Some(_) if !from_credential => {
                return Err(ConfigError::doc(
                    src,
                    "kubestrap",
                    "token",
                    "disagrees with bootstrapTokens[0].token in kubestrap.kubeadm (values hidden); set it in one place"
                        .into(),
                ));
            }
            Some(first) => {
                first.token = t.clone();
                notices.push(format!("{}: replaces bootstrapTokens[0].token", ov.token_origin));
            }
        }
    }
    node_name(src, &mut init.node_registration.name, g, "InitConfiguration")?;

    let mut parts = vec![yaml(src, &init)?];
    if let Some(c) = &cluster {
        parts.push(yaml(src, c)?);
    }
    if let Some(k) = &docs.kubelet {
        parts.push(yaml(src, k)?);
    }
    if let Some(k) = &docs.kube_proxy {
        parts.push(yaml(src, k)?);
    }
    let config_text = parts.join("---\n");
    // What we hand on must load; fail here, naming the user-data, rather than later.
    parse_documents(src, &config_text)?;
    Ok(NodePlan::Init { config_text })
}

fn yaml<T: serde::Serialize>(src: &str, v: &T) -> Result<String, ConfigError> {
    serde_yaml::to_string(v).map_err(|e| ConfigError::file(src, format!("rendering kubeadm config: {e}")))
}

fn join_plan(
    src: &str,
    mut docs: Documents,
    sh: &Shorthand,
    shorthand: bool,
    ov: &Overrides,
    g: &Gathered,
    notices: &mut Vec<String>,
) -> Result<NodePlan, ConfigError> {
    let mut join = docs.join.take().unwrap_or_else(|| JoinConfiguration {
        api_version: KUBEADM_API_VERSION.into(),
        kind: "JoinConfiguration".into(),
        ..Default::default()
    });
    if docs.kubelet.is_some() || docs.kube_proxy.is_some() {
        notices.push(format!(
            "{src}: KubeletConfiguration/KubeProxyConfiguration ignored on a worker: it takes the cluster's kubelet-config"
        ));
    }
    not_for(
        "worker",
        &[
            ("kubernetesVersion", sh.kubernetes_version.is_some()),
            ("podSubnet", sh.pod_subnet.is_some()),
            ("serviceSubnet", sh.service_subnet.is_some()),
            ("certSANs", !sh.cert_sans.is_empty()),
            ("advertiseAddress", sh.advertise_address.is_some()),
        ],
        src,
        notices,
    );
    set_field(src, "nodeName", &sh.node_name, &mut join.node_registration.name, "nodeRegistration.name")?;
    let d = &mut join.discovery;
    let shorthand_discovery = sh.control_plane_endpoint.is_some() || !sh.ca_cert_hashes.is_empty();
    if d.file.is_none() && (d.bootstrap_token.is_some() || ov.token.is_some() || shorthand_discovery) {
        let bt = d.bootstrap_token.get_or_insert_with(BootstrapTokenDiscovery::default);
        set_field(
            src,
            "controlPlaneEndpoint",
            &sh.control_plane_endpoint,
            &mut bt.api_server_endpoint,
            "discovery.bootstrapToken.apiServerEndpoint",
        )?;
        if !sh.ca_cert_hashes.is_empty() {
            if !bt.ca_cert_hashes.is_empty() && bt.ca_cert_hashes != sh.ca_cert_hashes {
                return Err(ConfigError::doc(
                    src,
                    "kubestrap",
                    "caCertHashes",
                    "disagrees with discovery.bootstrapToken.caCertHashes in kubestrap.kubeadm; set it in one place"
                        .into(),
                ));
            }
            bt.ca_cert_hashes = sh.ca_cert_hashes.clone();
        }
        if let Some(h) = &ov.ca_hashes {
            if !bt.ca_cert_hashes.is_empty() && bt.ca_cert_hashes != *h {
                notices.push(format!("credential {CRED_CA_CERT_HASH} replaces the caCertHashes from the user-data"));
            }
            bt.ca_cert_hashes = h.clone();
        }
        if let Some(t) = &ov.token {
            if !bt.token.is_empty() && bt.token != *t {
                if !g.credentials.contains_key(CRED_TOKEN) {
                    return Err(ConfigError::doc(
                        src,
                        "kubestrap",
                        "token",
                        "disagrees with discovery.bootstrapToken.token in kubestrap.kubeadm (values hidden); set it in one place"
                            .into(),
                    ));
                }
                notices.push(format!("{}: replaces discovery.bootstrapToken.token", ov.token_origin));
            }
            bt.token = t.clone();
            if !d.tls_bootstrap_token.is_empty() {
                d.tls_bootstrap_token = t.clone();
            }
        }
    } else if let Some(t) = &ov.token {
        // File discovery: the token is the TLS bootstrap token.
        d.tls_bootstrap_token = t.clone();
        if ov.ca_hashes.is_some() {
            notices.push(format!("credential {CRED_CA_CERT_HASH} ignored: discovery is by file"));
        }
    }
    node_name(src, &mut join.node_registration.name, g, "JoinConfiguration")?;
    validate_join(src, &join, shorthand)?;
    Ok(NodePlan::Join { join })
}

fn validate_join(src: &str, join: &JoinConfiguration, shorthand: bool) -> Result<(), ConfigError> {
    let d = &join.discovery;
    let doc = if shorthand { "kubestrap" } else { "JoinConfiguration" };
    // Name the field the way the user wrote it: the shorthand key or the kubeadm path.
    let hint = |short: &str, long: &str| if shorthand { short.to_string() } else { long.to_string() };
    if join.control_plane.is_some() {
        return Err(ConfigError::doc(src, doc, "controlPlane", "kubestrap joins workers only".into()));
    }
    match (&d.bootstrap_token, &d.file) {
        (None, None) => Err(ConfigError::doc(
            src,
            doc,
            &hint("token", "discovery"),
            "is missing: a worker needs a bootstrap token and the control plane's endpoint and CA hash \
             (or file discovery); the token may also come as the kubestrap.token credential"
                .into(),
        )),
        (Some(_), Some(_)) => {
            Err(ConfigError::doc(src, doc, "discovery", "set either bootstrapToken or file, not both".into()))
        }
        (None, Some(_)) => Ok(()),
        (Some(bt), None) => {
            if bt.token.is_empty() {
                return Err(ConfigError::doc(
                    src,
                    doc,
                    &hint("token", "discovery.bootstrapToken.token"),
                    "is missing; pass it in the user-data or as the kubestrap.token credential".into(),
                ));
            }
            if !crate::token::is_valid_token(&bt.token) {
                return Err(ConfigError::doc(
                    src,
                    doc,
                    &hint("token", "discovery.bootstrapToken.token"),
                    "bad token format (value hidden): expected [a-z0-9]{6}.[a-z0-9]{16}".into(),
                ));
            }
            if bt.api_server_endpoint.is_empty() {
                return Err(ConfigError::doc(
                    src,
                    doc,
                    &hint("controlPlaneEndpoint", "discovery.bootstrapToken.apiServerEndpoint"),
                    "is missing: the worker needs the API server's host:port".into(),
                ));
            }
            if bt.ca_cert_hashes.is_empty() && !bt.unsafe_skip_ca_verification {
                return Err(ConfigError::doc(
                    src,
                    doc,
                    &hint("caCertHashes", "discovery.bootstrapToken.caCertHashes"),
                    "is empty: pin the cluster CA (`kubestrap certs ca-hash` on the control plane prints it), \
                     here or as the kubestrap.ca-cert-hash credential"
                        .into(),
                ));
            }
            for (i, h) in bt.ca_cert_hashes.iter().enumerate() {
                crate::discovery::CaPin::parse(h).map_err(|m| {
                    ConfigError::doc(
                        src,
                        doc,
                        &format!("{}[{i}]", hint("caCertHashes", "discovery.bootstrapToken.caCertHashes")),
                        m.to_string(),
                    )
                })?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::config::{HostFacts, resolve_init};

    const TOKEN: &str = "abcdef.0123456789abcdef";
    const TOKEN2: &str = "zyxwvu.fedcba9876543210";
    const HASH: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000001";
    const HASH2: &str = "sha256:00000000000000000000000000000000000000000000000000000000000000ff";

    fn gathered(user_data: &str) -> Gathered {
        Gathered { source: "nocloud".into(), user_data: Some(user_data.as_bytes().to_vec()), ..Default::default() }
    }

    fn host() -> HostFacts {
        HostFacts { hostname: "fallback".into(), default_address: Some("10.0.0.5".parse().unwrap()) }
    }

    fn gz(b: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    fn init_text(p: Planned) -> String {
        match p.plan {
            NodePlan::Init { config_text } => config_text,
            other => panic!("expected init, got {other:?}"),
        }
    }

    fn join_of(p: Planned) -> JoinConfiguration {
        match p.plan {
            NodePlan::Join { join } => join,
            other => panic!("expected join, got {other:?}"),
        }
    }

    fn cp_cloud_config() -> String {
        format!(
            "#cloud-config\nkubestrap:\n  role: control-plane\n  token: {TOKEN}\n  kubernetesVersion: v1.36.2\n  \
             podSubnet: 10.244.0.0/16\n  serviceSubnet: 10.96.0.0/12\n  certSANs: [api.example.com]\n  \
             advertiseAddress: 10.0.0.10\n  controlPlaneEndpoint: api.example.com:6443\n"
        )
    }

    fn worker_cloud_config() -> String {
        format!(
            "#cloud-config\nkubestrap:\n  role: worker\n  token: {TOKEN}\n  controlPlaneEndpoint: 10.0.0.10:6443\n  \
             caCertHashes: [{HASH}]\n"
        )
    }

    const KUBEADM_INIT: &str = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nlocalAPIEndpoint:\n  advertiseAddress: 10.0.0.10\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nnetworking:\n  podSubnet: 10.244.0.0/16\n---\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 50\n";

    fn kubeadm_join() -> String {
        format!(
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    token: {TOKEN}\n    \
             apiServerEndpoint: 10.0.0.10:6443\n    caCertHashes: [{HASH}]\n"
        )
    }

    #[test]
    fn userdata_kubeadm_init_documents_load_and_resolve() {
        let text = init_text(plan_detailed(&gathered(KUBEADM_INIT)).unwrap());
        let docs = parse_documents("t", &text).unwrap();
        assert_eq!(docs.cluster.as_ref().unwrap().networking.pod_subnet, "10.244.0.0/16");
        assert_eq!(docs.kubelet.as_ref().unwrap().get("maxPods").and_then(Value::as_u64), Some(50));
        let cfg = resolve_init("t", docs, &host()).unwrap();
        assert_eq!(cfg.advertise_address.to_string(), "10.0.0.10");
        assert_eq!(cfg.node_name, "fallback");
    }

    #[test]
    fn userdata_kubeadm_join_document_is_join() {
        let j = join_of(plan_detailed(&gathered(&kubeadm_join())).unwrap());
        let bt = j.discovery.bootstrap_token.unwrap();
        assert_eq!((bt.token.as_str(), bt.api_server_endpoint.as_str()), (TOKEN, "10.0.0.10:6443"));
        assert_eq!(bt.ca_cert_hashes, vec![HASH.to_string()]);
    }

    #[test]
    fn userdata_cloud_config_control_plane_generates_loadable_documents() {
        let p = plan_detailed(&gathered(&cp_cloud_config())).unwrap();
        assert!(p.notices.is_empty(), "{:?}", p.notices);
        let text = init_text(p);
        let docs = parse_documents("t", &text).unwrap();
        let init = docs.init.as_ref().unwrap();
        assert_eq!(init.bootstrap_tokens[0].token, TOKEN);
        assert_eq!(init.local_api_endpoint.advertise_address, "10.0.0.10");
        let c = docs.cluster.as_ref().unwrap();
        assert_eq!(c.kubernetes_version, "v1.36.2");
        assert_eq!(c.control_plane_endpoint, "api.example.com:6443");
        assert_eq!(c.networking.service_subnet, "10.96.0.0/12");
        assert_eq!(c.api_server.cert_sans, vec!["api.example.com".to_string()]);
        let cfg = resolve_init("t", docs, &host()).unwrap();
        assert_eq!(cfg.endpoint.host, "api.example.com");
        assert_eq!(cfg.version.image_tag(), "v1.36.2");
    }

    #[test]
    fn userdata_cloud_config_worker_builds_join_configuration() {
        let mut g = gathered(&worker_cloud_config());
        g.meta.local_hostname = Some("Worker-1.Example.internal".into());
        let j = join_of(plan_detailed(&g).unwrap());
        assert_eq!(j.api_version, KUBEADM_API_VERSION);
        assert_eq!(j.kind, "JoinConfiguration");
        assert_eq!(j.node_registration.name, "worker-1.example.internal");
        let bt = j.discovery.bootstrap_token.unwrap();
        assert_eq!(bt.token, TOKEN);
        assert_eq!(bt.api_server_endpoint, "10.0.0.10:6443");
        assert_eq!(bt.ca_cert_hashes, vec![HASH.to_string()]);
    }

    #[test]
    fn userdata_ignored_cloud_config_keys_are_listed() {
        let ud = format!("{}packages: [vim]\nruncmd: [ls]\nwrite_files: []\n", worker_cloud_config());
        let p = plan_detailed(&gathered(&ud)).unwrap();
        for k in ["packages", "runcmd", "write_files"] {
            assert!(p.notices.iter().any(|n| n.contains(&format!("{k:?} ignored"))), "{k}: {:?}", p.notices);
        }
        let ud = format!("{}  podSubnet: 10.1.0.0/16\n", worker_cloud_config());
        let p = plan_detailed(&gathered(&ud)).unwrap();
        assert!(p.notices.iter().any(|n| n.contains("kubestrap.podSubnet ignored")), "{:?}", p.notices);
    }

    #[test]
    fn userdata_unknown_kubestrap_key_is_an_error_naming_it() {
        let ud = format!("{}  podCidr: 10.1.0.0/16\n", cp_cloud_config());
        let e = plan_detailed(&gathered(&ud)).unwrap_err();
        assert_eq!(e.source, "user-data (nocloud)");
        assert!(e.to_string().contains("podCidr"), "{e}");
        let e = plan_detailed(&gathered("#cloud-config\nkubestrap:\n  role: master\n")).unwrap_err();
        assert!(e.to_string().contains("role") && e.to_string().contains("\"master\""), "{e}");
        let e = plan_detailed(&gathered("#cloud-config\nkubestrap: {token: abc}\n")).unwrap_err();
        assert!(e.to_string().contains("role: is missing"), "{e}");
        let e = plan_detailed(&gathered("#cloud-config\nkubestrap:\n")).unwrap_err();
        assert!(e.to_string().contains("role: is missing"), "{e}");
        let e = plan_detailed(&gathered("#cloud-config\npackages: [vim]\n")).unwrap_err();
        assert!(e.to_string().contains("without a kubestrap: key"), "{e}");
    }

    #[test]
    fn userdata_gzip_of_both_formats() {
        let mut g = gathered("");
        g.user_data = Some(gz(worker_cloud_config().as_bytes()));
        assert!(matches!(plan_detailed(&g).unwrap().plan, NodePlan::Join { .. }));
        g.user_data = Some(gz(KUBEADM_INIT.as_bytes()));
        assert!(matches!(plan_detailed(&g).unwrap().plan, NodePlan::Init { .. }));
        g.user_data = Some(vec![0x1f, 0x8b, 0, 1, 2, 3]);
        assert!(plan_detailed(&g).unwrap_err().to_string().contains("does not decompress"));
    }

    #[test]
    fn userdata_gzip_bomb_is_capped() {
        // 8 MiB of comment lines compress to a few KiB.
        let mut big = worker_cloud_config().into_bytes();
        big.extend(std::iter::repeat_n(b"# padding padding padding padding\n".as_slice(), 8 << 15).flatten());
        let packed = gz(&big);
        assert!(packed.len() < 200_000, "{}", packed.len());
        let mut g = gathered("");
        g.user_data = Some(packed);
        let e = plan_detailed(&g).unwrap_err().to_string();
        assert!(e.contains("decompresses to more than 1048576 bytes"), "{e}");
        // Just under the cap is fine.
        let mut ok = worker_cloud_config().into_bytes();
        ok.resize(MAX_USER_DATA_BYTES - 10, b'\n');
        g.user_data = Some(gz(&ok));
        plan_detailed(&g).unwrap();
    }

    #[test]
    fn userdata_credentials_override_user_data_fields() {
        let mut g = gathered(&worker_cloud_config());
        g.credentials.insert(CRED_TOKEN.into(), format!("{TOKEN2}\n").into_bytes());
        g.credentials.insert(CRED_CA_CERT_HASH.into(), format!("{HASH2}\n").into_bytes());
        let p = plan_detailed(&g).unwrap();
        assert!(p.notices.iter().any(|n| n.contains("overrides kubestrap.token")), "{:?}", p.notices);
        assert!(p.notices.iter().all(|n| !n.contains(TOKEN) && !n.contains(TOKEN2)), "{:?}", p.notices);
        let bt = join_of(p).discovery.bootstrap_token.unwrap();
        assert_eq!(bt.token, TOKEN2);
        assert_eq!(bt.ca_cert_hashes, vec![HASH2.to_string()]);

        // kubeadm documents too, and a worker without any token in user-data.
        let ud = "#cloud-config\nkubestrap:\n  role: worker\n  controlPlaneEndpoint: 10.0.0.10:6443\n";
        let mut g = gathered(ud);
        g.credentials.insert(CRED_TOKEN.into(), TOKEN2.as_bytes().to_vec());
        g.credentials.insert(CRED_CA_CERT_HASH.into(), format!("{HASH} {HASH2}").into_bytes());
        let bt = join_of(plan_detailed(&g).unwrap()).discovery.bootstrap_token.unwrap();
        assert_eq!((bt.token.as_str(), bt.ca_cert_hashes.len()), (TOKEN2, 2));

        let mut g = gathered(KUBEADM_INIT);
        g.credentials.insert(CRED_TOKEN.into(), TOKEN2.as_bytes().to_vec());
        let docs = parse_documents("t", &init_text(plan_detailed(&g).unwrap())).unwrap();
        assert_eq!(docs.init.unwrap().bootstrap_tokens[0].token, TOKEN2);

        // kubestrap.user-data replaces the user-data itself.
        let mut g = gathered(KUBEADM_INIT);
        g.credentials.insert(CRED_USER_DATA.into(), worker_cloud_config().into_bytes());
        let p = plan_detailed(&g).unwrap();
        assert!(p.notices.iter().any(|n| n.contains("replaces the user-data from nocloud")), "{:?}", p.notices);
        assert!(matches!(p.plan, NodePlan::Join { .. }));
    }

    #[test]
    fn userdata_token_never_appears_in_errors() {
        let secret = "abcdef.0123456789abcdeX";
        let ud = worker_cloud_config().replace(TOKEN, secret);
        let e = plan_detailed(&gathered(&ud)).unwrap_err().to_string();
        assert!(e.contains("value hidden") && !e.contains("0123456789"), "{e}");
        let e = plan_detailed(&gathered("#cloud-config\nkubestrap:\n  role: worker\n  token: 123456.0123456789\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("token") && !e.contains("0123456789"), "{e}");
        let mut g = gathered(&worker_cloud_config());
        g.credentials.insert(CRED_TOKEN.into(), b"BAD.TOKEN-secretvalue".to_vec());
        let e = plan_detailed(&g).unwrap_err();
        assert_eq!(e.source, "credential kubestrap.token");
        assert!(!e.to_string().contains("secretvalue"), "{e}");
    }

    #[test]
    fn userdata_private_keys_refused_unless_allowed() {
        let key = "-----BEGIN EC PRIVATE KEY-----\n    MHcCAQEE\n    -----END EC PRIVATE KEY-----\n";
        let ud = format!("{}write_files:\n- path: /etc/k.key\n  content: |\n    {key}", worker_cloud_config());
        let e = plan_detailed(&gathered(&ud)).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("private key") && m.contains("line 10") && m.contains("allowPrivateKeys"), "{m}");
        assert!(!m.contains("MHcCAQEE"), "{m}");
        assert_eq!(crate::error::Error::from(e).kind.exit_code(), 2);
        // A key inside a JSON-style one-line string is found too.
        assert_eq!(private_key_line("a\nb: \"-----BEGIN PRIVATE KEY-----\\nMII\""), Some(2));
        assert_eq!(private_key_line("-----BEGIN CERTIFICATE-----\n"), None);
        // Opt-in.
        let ud = ud.replace("  role: worker\n", "  role: worker\n  allowPrivateKeys: true\n");
        let p = plan_detailed(&gathered(&ud)).unwrap();
        assert!(p.notices.iter().any(|n| n.contains("private key, accepted")), "{:?}", p.notices);
        // kubeadm documents cannot opt in.
        let kd = format!("{}{}", kubeadm_join(), key.lines().map(|l| format!("# {}\n", l.trim())).collect::<String>());
        assert!(plan_detailed(&gathered(&kd)).unwrap_err().to_string().contains("private key"));
        // A credential is not world-readable: accepted.
        let mut g = gathered("");
        g.credentials.insert(CRED_USER_DATA.into(), kd.into_bytes());
        plan_detailed(&g).unwrap();
    }

    #[test]
    fn userdata_node_name_from_meta_data_unless_set() {
        let mut g = gathered(&cp_cloud_config());
        g.meta.local_hostname = Some("CP-0".into());
        let docs = parse_documents("t", &init_text(plan_detailed(&g).unwrap())).unwrap();
        assert_eq!(docs.init.unwrap().node_registration.name, "cp-0");

        g.user_data = Some(format!("{}  nodeName: explicit\n", cp_cloud_config()).into_bytes());
        let docs = parse_documents("t", &init_text(plan_detailed(&g).unwrap())).unwrap();
        assert_eq!(docs.init.unwrap().node_registration.name, "explicit");

        g.user_data = Some(cp_cloud_config().into_bytes());
        g.meta.local_hostname = Some("bad_name".into());
        let e = plan_detailed(&g).unwrap_err();
        assert_eq!(e.source, "meta-data (nocloud)");
        assert!(e.to_string().contains("\"bad_name\""), "{e}");

        g.user_data = Some(format!("{}  nodeName: Bad_Name\n", cp_cloud_config()).into_bytes());
        assert!(plan_detailed(&g).unwrap_err().to_string().contains("nodeRegistration.name"));
    }

    #[test]
    fn userdata_embedded_kubeadm_string_and_documents() {
        let ud = String::from(
            "#cloud-config\nkubestrap:\n  role: control-plane\n  podSubnet: 10.244.0.0/16\n  kubeadm: |\n    \
             apiVersion: kubeadm.k8s.io/v1beta4\n    kind: ClusterConfiguration\n    clusterName: prod\n",
        );
        let docs = parse_documents("t", &init_text(plan_detailed(&gathered(&ud)).unwrap())).unwrap();
        let c = docs.cluster.unwrap();
        assert_eq!((c.cluster_name.as_str(), c.networking.pod_subnet.as_str()), ("prod", "10.244.0.0/16"));

        let ud = format!(
            "#cloud-config\nkubestrap:\n  token: {TOKEN}\n  kubeadm:\n  - apiVersion: kubeadm.k8s.io/v1beta4\n    \
             kind: JoinConfiguration\n    discovery:\n      bootstrapToken:\n        apiServerEndpoint: cp:6443\n        \
             unsafeSkipCAVerification: true\n"
        );
        let bt = join_of(plan_detailed(&gathered(&ud)).unwrap()).discovery.bootstrap_token.unwrap();
        assert_eq!((bt.token.as_str(), bt.api_server_endpoint.as_str()), (TOKEN, "cp:6443"));

        let ud = String::from(
            "#cloud-config\nkubestrap:\n  role: control-plane\n  podSubnet: 10.1.0.0/16\n  kubeadm:\n    \
             apiVersion: kubeadm.k8s.io/v1beta4\n    kind: ClusterConfiguration\n    networking: {podSubnet: 10.2.0.0/16}\n",
        );
        let e = plan_detailed(&gathered(&ud)).unwrap_err().to_string();
        assert!(e.contains("podSubnet") && e.contains("disagrees"), "{e}");

        let ud = "#cloud-config\nkubestrap:\n  role: worker\n  kubeadm: {apiVersion: kubeadm.k8s.io/v1beta4, kind: InitConfiguration}\n";
        assert!(plan_detailed(&gathered(ud)).unwrap_err().to_string().contains("is worker but"));
    }

    #[test]
    fn userdata_role_and_format_errors() {
        let both = format!("{KUBEADM_INIT}---\n{}", kubeadm_join());
        assert!(plan_detailed(&gathered(&both)).unwrap_err().to_string().contains("either inits"));
        let only_kubelet = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
        assert!(plan_detailed(&gathered(only_kubelet)).unwrap_err().to_string().contains("role is unknown"));
        assert!(plan_detailed(&gathered("#!/bin/sh\necho hi\n")).unwrap_err().to_string().contains("shell script"));
        assert!(plan_detailed(&gathered("  \n")).unwrap_err().to_string().contains("is empty"));
        let mut g = gathered("");
        g.user_data = None;
        assert!(plan_detailed(&g).unwrap_err().to_string().contains("is missing"));
        g.user_data = Some(vec![0xff, 0xfe, 0x00]);
        assert!(plan_detailed(&g).unwrap_err().to_string().contains("not UTF-8"));
        // A worker needs the CA pin.
        let ud =
            format!("#cloud-config\nkubestrap:\n  role: worker\n  token: {TOKEN}\n  controlPlaneEndpoint: cp:6443\n");
        let e = plan_detailed(&gathered(&ud)).unwrap_err().to_string();
        assert!(e.contains("caCertHashes: is empty"), "{e}");
        let ud =
            "#cloud-config\nkubestrap:\n  role: worker\n  controlPlaneEndpoint: cp:6443\n  caCertHashes: [sha256:00]\n";
        let e = plan_detailed(&gathered(ud)).unwrap_err().to_string();
        assert!(e.contains("token: is missing"), "{e}");
    }
}
