//! Token discovery, pure: the bootstrap token, the detached JWS that signs `cluster-info`, the CA
//! public-key pin, and validating a fetched `kube-public/cluster-info` ConfigMap the way
//! `kubeadm join` does (kubeadm-facts §1–§4). No network and no files: the caller fetches the
//! ConfigMap (kube/) and hands the JSON here.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD as B64, URL_SAFE_NO_PAD as B64URL};
use ring::hmac;
use serde::Deserialize;
use serde_json::Value;

use crate::kubeconfig::{Credentials, Kubeconfig};
pub use crate::token::{BadToken, Token};

/// Cluster name of the TLS-bootstrap kubeconfig (`bootstrap-kubelet.conf`).
pub const TLS_BOOTSTRAP_CLUSTER: &str = "kubernetes";
/// User of the TLS-bootstrap kubeconfig; its context is `<user>@kubernetes`.
pub const TLS_BOOTSTRAP_USER: &str = "tls-bootstrap-token-user";
/// Prefix of the ConfigMap keys the bootstrap signer writes, one per signing token id.
pub(crate) const JWS_KEY_PREFIX: &str = "jws-kubeconfig-";

// ---------------------------------------------------------------------------------------------
// Token

/// Where token discovery reads the signed kubeconfig (anonymously).
pub const CLUSTER_INFO: &str = "/api/v1/namespaces/kube-public/configmaps/cluster-info";
/// Why a CA pin does not parse, or why served CA certificates do not satisfy the pins. Each
/// message names the pin or the certificate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    #[error("CA cert hash {value:?} is malformed: expected sha256:<64 hex characters>")]
    Malformed { value: String },
    #[error("CA cert hash {value:?} uses unsupported format {format:?}: only sha256 is supported")]
    UnsupportedFormat { value: String, format: String },
    #[error("CA cert hash {value:?} has {len} hex characters, want 64 (a SHA-256 is 32 bytes)")]
    WrongLength { value: String, len: usize },
    #[error("CA cert hash {value:?} is not valid hex")]
    NotHex { value: String },
    /// Phrased to follow what the certificate is ("CA certificate #2 is not ...").
    #[error("is not an X.509 certificate: {detail}")]
    NotX509 { detail: String },
    /// `index` counts from 1.
    #[error("CA certificate #{index} is not an X.509 certificate: {detail}")]
    CertNotX509 { index: usize, detail: String },
    /// No certificate matches any pin; `got` lists the certificates' own pins.
    #[error("none of the public keys {:?} are pinned", .got.join(":"))]
    NotPinned { got: Vec<String> },
}

// ---------------------------------------------------------------------------------------------
// Detached JWS (HS256), as the bootstrap signer computes it

/// The protected header, exactly `{"alg":"HS256","kid":"<id>"}` (field order matters), base64url.
fn jws_header_b64(id: &str) -> String {
    // Written out rather than serialised, so there is no serialisation error to handle; the id
    // is escaped by serde_json's Display for a string Value, which cannot fail.
    let json = format!(r#"{{"alg":"HS256","kid":{}}}"#, Value::String(id.to_string()));
    B64URL.encode(json)
}

fn hmac_key(token: &Token) -> hmac::Key {
    // The key is the secret's ASCII bytes. go-jose zero-pads keys shorter than 32 bytes, which
    // HMAC's own zero-padding to the 64-byte block makes a no-op.
    hmac::Key::new(hmac::HMAC_SHA256, token.secret.as_bytes())
}

fn signing_input(header_b64: &str, content: &str) -> String {
    format!("{header_b64}.{}", B64URL.encode(content))
}

/// The detached JWS the bootstrap signer stores under `jws-kubeconfig-<id>`:
/// `b64url(header) + ".." + b64url(HMAC-SHA256(secret, b64url(header) "." b64url(content)))`.
pub fn jws_sign(content: &str, token: &Token) -> String {
    let header = jws_header_b64(&token.id);
    let tag = hmac::sign(&hmac_key(token), signing_input(&header, content).as_bytes());
    format!("{header}..{}", B64URL.encode(tag.as_ref()))
}

/// Does `detached` sign `content` with this token? Only the exact form `jws_sign` produces is
/// accepted (same header bytes, empty payload part, canonical signature encoding); the MAC is
/// compared in constant time by `ring::hmac::verify`.
pub fn jws_verify(content: &str, token: &Token, detached: &str) -> bool {
    let mut parts = detached.split('.');
    let (Some(header), Some(payload), Some(sig), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    if !payload.is_empty() || header != jws_header_b64(&token.id) {
        return false;
    }
    // The strict decoder rejects padding and non-canonical trailing bits, so one tag has one
    // encoding; appended bytes change the length and fail the MAC check.
    let Ok(tag) = B64URL.decode(sig) else {
        return false;
    };
    hmac::verify(&hmac_key(token), signing_input(header, content).as_bytes(), &tag).is_ok()
}

// ---------------------------------------------------------------------------------------------
// CA public-key pins

/// A `sha256:<hex>` pin: SHA-256 of a certificate's DER SubjectPublicKeyInfo.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CaPin([u8; 32]);

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

impl CaPin {
    /// Parses `sha256:<64 hex>` as kubeadm does: exactly one ':', the format name compared
    /// without regard to case, upper- or lowercase hex.
    pub fn parse(s: &str) -> Result<CaPin, PinError> {
        let parts: Vec<&str> = s.split(':').collect();
        let [format, hex] = parts.as_slice() else {
            return Err(PinError::Malformed { value: s.to_string() });
        };
        if !format.eq_ignore_ascii_case("sha256") {
            return Err(PinError::UnsupportedFormat { value: s.to_string(), format: format.to_string() });
        }
        if hex.len() != 64 {
            return Err(PinError::WrongLength { value: s.to_string(), len: hex.len() });
        }
        let mut out = [0u8; 32];
        for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
            match (hex_value(pair[0]), hex_value(pair[1])) {
                (Some(hi), Some(lo)) => out[i] = hi << 4 | lo,
                _ => return Err(PinError::NotHex { value: s.to_string() }),
            }
        }
        Ok(CaPin(out))
    }

    /// The pin of a DER certificate.
    pub fn of_cert_der(der: &[u8]) -> Result<CaPin, PinError> {
        let (_, cert) =
            x509_parser::parse_x509_certificate(der).map_err(|e| PinError::NotX509 { detail: e.to_string() })?;
        Ok(CaPin::of_spki(cert.tbs_certificate.subject_pki.raw))
    }

    /// The pin of a DER SubjectPublicKeyInfo.
    pub(crate) fn of_spki(spki_der: &[u8]) -> CaPin {
        let mut pin = [0u8; 32];
        pin.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, spki_der).as_ref());
        CaPin(pin)
    }

    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for CaPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sha256:")?;
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for CaPin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CaPin({self})")
    }
}

/// Passes if any certificate matches any pin (kubeadm `CheckAny`). The error lists every
/// certificate's own pin, joined with ':' as kubeadm does.
pub fn check_any(pins: &[CaPin], certs_der: &[Vec<u8>]) -> Result<(), PinError> {
    let mut got = Vec::with_capacity(certs_der.len());
    for (i, der) in certs_der.iter().enumerate() {
        let pin = CaPin::of_cert_der(der).map_err(|e| match e {
            PinError::NotX509 { detail } => PinError::CertNotX509 { index: i + 1, detail },
            other => other,
        })?;
        if pins.contains(&pin) {
            return Ok(());
        }
        got.push(pin.to_string());
    }
    Err(PinError::NotPinned { got })
}

// ---------------------------------------------------------------------------------------------
// cluster-info validation

/// Why a token discovery attempt failed, precisely enough for an operator to act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiscoveryProblem {
    /// Network/TLS/HTTP failure, described by the caller (kube/).
    Transport(String),
    /// `kube-public/cluster-info` does not exist (404) or anonymous users may not read it.
    NoClusterInfo,
    /// cluster-info exists but carries no `jws-kubeconfig-<id>` for our token.
    NotSignedYet { token_id: String },
    /// A signature for our token id exists but does not verify.
    BadSignature { token_id: String },
    /// The ConfigMap or its kubeconfig is unusable.
    BadKubeconfig(String),
    /// No served CA certificate matches a given pin; `got` lists the served certificates' pins.
    PinMismatch { got: Vec<String> },
    /// No pin was given and CA verification was not explicitly skipped.
    NoPins { got: Vec<String> },
    /// The second (CA-verified) fetch returned a different kubeconfig than the first.
    Changed,
}

impl fmt::Display for DiscoveryProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiscoveryProblem::Transport(m) => write!(f, "cannot fetch kube-public/cluster-info: {m}"),
            DiscoveryProblem::NoClusterInfo => f.write_str(
                "the ConfigMap kube-public/cluster-info does not exist or is not readable anonymously: \
                 the control plane has not finished its bootstrap-token phase yet, or this is not a \
                 kubeadm-style cluster",
            ),
            DiscoveryProblem::NotSignedYet { token_id } => write!(
                f,
                "cluster-info has no signature for token id {token_id:?} (no key {JWS_KEY_PREFIX}{token_id}): \
                 the token is unknown to the cluster (never created, expired and cleaned up, or not \
                 allowed to sign), or the bootstrap signer in kube-controller-manager has not run yet"
            ),
            DiscoveryProblem::BadSignature { token_id } => write!(
                f,
                "the signature of cluster-info for token id {token_id:?} does not verify: the token \
                 secret is wrong, or the ConfigMap was tampered with"
            ),
            DiscoveryProblem::BadKubeconfig(m) => write!(f, "cluster-info is unusable: {m}"),
            DiscoveryProblem::PinMismatch { got } => write!(
                f,
                "the cluster's CA does not match any --discovery-token-ca-cert-hash: the served CA \
                 has {}; check the hash (`kubestrap certs ca-hash` on a control-plane node) or whether \
                 this endpoint belongs to the intended cluster",
                got.join(", ")
            ),
            DiscoveryProblem::NoPins { got } => write!(
                f,
                "no --discovery-token-ca-cert-hash was given and CA verification was not explicitly \
                 skipped; the served CA has {} (verify it out of band before pinning it)",
                got.join(", ")
            ),
            DiscoveryProblem::Changed => f.write_str(
                "cluster-info changed between the unverified and the CA-verified fetch; retrying \
                 (if it persists, something between this node and the API server rewrites responses)",
            ),
        }
    }
}

impl std::error::Error for DiscoveryProblem {}

/// What discovery yields: the API server and its CA, plus the exact signed kubeconfig string
/// (kept to compare with the second, verified fetch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterInfo {
    pub server: String,
    pub ca_pem: Vec<u8>,
    pub kubeconfig: String,
}

/// The kubeconfig inside cluster-info: one cluster named "", and `contexts: null`,
/// `users: null` (which `Kubeconfig::parse` rejects, as its lists are not optional), so it is
/// read with this lenient shape.
#[derive(Deserialize)]
struct ClusterInfoKubeconfig {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    clusters: Option<Vec<ClusterInfoNamedCluster>>,
}

#[derive(Deserialize)]
struct ClusterInfoNamedCluster {
    #[serde(default)]
    cluster: Option<ClusterInfoCluster>,
}

#[derive(Deserialize)]
struct ClusterInfoCluster {
    #[serde(default)]
    server: Option<String>,
    #[serde(rename = "certificate-authority-data", default)]
    certificate_authority_data: Option<String>,
}

fn kubeconfig_of(configmap: &Value) -> Result<&str, DiscoveryProblem> {
    match configmap.get("data").and_then(|d| d.get("kubeconfig")).and_then(Value::as_str) {
        Some(k) if !k.is_empty() => Ok(k),
        _ => Err(DiscoveryProblem::BadKubeconfig("the ConfigMap has no data.kubeconfig".into())),
    }
}

/// The DER of every certificate in cluster-info's CA data; at least one, all parseable.
fn certs_in_pem(pem: &[u8]) -> Result<Vec<Vec<u8>>, DiscoveryProblem> {
    let bad = |m: String| DiscoveryProblem::BadKubeconfig(format!("its certificate-authority-data {m}"));
    let mut out = Vec::new();
    for (i, block) in x509_parser::pem::Pem::iter_from_buffer(pem).enumerate() {
        let block = block.map_err(|e| bad(format!("PEM block #{} is malformed: {e}", i + 1)))?;
        if block.label != "CERTIFICATE" {
            continue;
        }
        x509_parser::parse_x509_certificate(&block.contents)
            .map_err(|e| bad(format!("certificate #{} is not valid X.509: {e}", i + 1)))?;
        out.push(block.contents);
    }
    if out.is_empty() {
        return Err(bad("holds no PEM CERTIFICATE".into()));
    }
    Ok(out)
}

/// Steps 3–6 of kubeadm's token discovery on a fetched `cluster-info` ConfigMap (JSON object):
/// a non-empty kubeconfig, our token's signature present and valid, exactly one cluster with a
/// server and CA data, every CA certificate parseable, and (unless skipped) a pin match.
pub fn validate_cluster_info(
    configmap: &Value,
    token: &Token,
    pins: &[CaPin],
    skip_ca_verification: bool,
) -> Result<ClusterInfo, DiscoveryProblem> {
    let kubeconfig = kubeconfig_of(configmap)?;
    let jws_key = format!("{JWS_KEY_PREFIX}{}", token.id);
    let jws = match configmap.get("data").and_then(|d| d.get(&jws_key)).and_then(Value::as_str) {
        Some(j) if !j.is_empty() => j,
        _ => return Err(DiscoveryProblem::NotSignedYet { token_id: token.id.clone() }),
    };
    if !jws_verify(kubeconfig, token, jws) {
        return Err(DiscoveryProblem::BadSignature { token_id: token.id.clone() });
    }

    let ServerAndCa { server, ca_pem, certs } = server_and_ca(kubeconfig)?;

    if !skip_ca_verification {
        let bad = DiscoveryProblem::BadKubeconfig;
        let got: Vec<CaPin> = certs
            .iter()
            .map(|der| CaPin::of_cert_der(der))
            .collect::<Result<_, _>>()
            .map_err(|e| bad(format!("a CA certificate {e}")))?;
        let got_s = || got.iter().map(CaPin::to_string).collect::<Vec<_>>();
        if pins.is_empty() {
            return Err(DiscoveryProblem::NoPins { got: got_s() });
        }
        if !got.iter().any(|p| pins.contains(p)) {
            return Err(DiscoveryProblem::PinMismatch { got: got_s() });
        }
    }

    Ok(ClusterInfo { server, ca_pem, kubeconfig: kubeconfig.to_string() })
}

/// The server, the CA data (PEM) and its certificates (DER) of cluster-info's kubeconfig, not
/// yet trusted: steps 4–5 of discovery, and what boot's check for a live cluster reads.
fn server_and_ca(kubeconfig: &str) -> Result<ServerAndCa, DiscoveryProblem> {
    let bad = DiscoveryProblem::BadKubeconfig;
    let parsed: ClusterInfoKubeconfig =
        serde_yaml::from_str(kubeconfig).map_err(|e| bad(format!("its kubeconfig is not valid YAML: {e}")))?;
    if let Some(kind) = parsed.kind.as_deref()
        && kind != "Config"
    {
        return Err(bad(format!("its kubeconfig has kind {kind:?}, not Config")));
    }
    let clusters = parsed.clusters.unwrap_or_default();
    let [named] = clusters.as_slice() else {
        return Err(bad(format!("its kubeconfig has {} clusters, want exactly one", clusters.len())));
    };
    let cluster = named.cluster.as_ref().ok_or_else(|| bad("its kubeconfig's cluster entry is empty".into()))?;
    let server = match cluster.server.as_deref() {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => return Err(bad("its kubeconfig's cluster has no server".into())),
    };
    let ca_b64 = match cluster.certificate_authority_data.as_deref() {
        Some(s) if !s.is_empty() => s,
        _ => return Err(bad("its kubeconfig's cluster has no certificate-authority-data".into())),
    };
    let ca_pem =
        B64.decode(ca_b64.trim()).map_err(|e| bad(format!("its certificate-authority-data is not base64: {e}")))?;
    let certs = certs_in_pem(&ca_pem)?;

    Ok(ServerAndCa { server, ca_pem, certs })
}

struct ServerAndCa {
    server: String,
    ca_pem: Vec<u8>,
    /// The DER of each certificate in `ca_pem`.
    certs: Vec<Vec<u8>>,
}

/// The pins of the CA certificates in a cluster-info ConfigMap, unverified (no token needed):
/// enough to tell which cluster answers, never to trust it.
pub(crate) fn cluster_info_pins(configmap: &Value) -> Result<Vec<CaPin>, DiscoveryProblem> {
    server_and_ca(kubeconfig_of(configmap)?)?
        .certs
        .iter()
        .map(|der| CaPin::of_cert_der(der))
        .collect::<Result<_, _>>()
        .map_err(|e| DiscoveryProblem::BadKubeconfig(format!("a CA certificate {e}")))
}

/// Step 7: the kubeconfig from the second, CA-verified fetch must be byte-identical.
pub(crate) fn same_kubeconfig(first: &ClusterInfo, second_cm: &Value) -> Result<(), DiscoveryProblem> {
    if kubeconfig_of(second_cm)? == first.kubeconfig { Ok(()) } else { Err(DiscoveryProblem::Changed) }
}

/// Step 8: `bootstrap-kubelet.conf` — cluster `kubernetes` (discovered server and CA), user
/// `tls-bootstrap-token-user` with the token, context `tls-bootstrap-token-user@kubernetes`.
pub fn tls_bootstrap_kubeconfig(info: &ClusterInfo, token: &Token) -> Kubeconfig {
    crate::kubeconfig::build(
        TLS_BOOTSTRAP_CLUSTER,
        &info.server,
        &info.ca_pem,
        TLS_BOOTSTRAP_USER,
        Credentials::Token(token.bearer()),
    )
}

#[cfg(test)]
mod tests;
