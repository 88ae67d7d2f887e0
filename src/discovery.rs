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
use sha2::{Digest, Sha256};

pub use crate::config::values::{BadToken, Token};
use crate::kubeconfig::{Credentials, Kubeconfig};

/// Cluster name of the TLS-bootstrap kubeconfig (`bootstrap-kubelet.conf`).
pub const TLS_BOOTSTRAP_CLUSTER: &str = "kubernetes";
/// User of the TLS-bootstrap kubeconfig; its context is `<user>@kubernetes`.
pub const TLS_BOOTSTRAP_USER: &str = "tls-bootstrap-token-user";
/// Prefix of the ConfigMap keys the bootstrap signer writes, one per signing token id.
pub const JWS_KEY_PREFIX: &str = "jws-kubeconfig-";

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
    pub fn of_spki(spki_der: &[u8]) -> CaPin {
        CaPin(Sha256::digest(spki_der).into())
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
pub fn cluster_info_pins(configmap: &Value) -> Result<Vec<CaPin>, DiscoveryProblem> {
    server_and_ca(kubeconfig_of(configmap)?)?
        .certs
        .iter()
        .map(|der| CaPin::of_cert_der(der))
        .collect::<Result<_, _>>()
        .map_err(|e| DiscoveryProblem::BadKubeconfig(format!("a CA certificate {e}")))
}

/// Step 7: the kubeconfig from the second, CA-verified fetch must be byte-identical.
pub fn same_kubeconfig(first: &ClusterInfo, second_cm: &Value) -> Result<(), DiscoveryProblem> {
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
mod tests {
    use super::*;
    use serde_json::json;

    const VECTORS: &str = include_str!("../tests/fixtures/test-vectors.json");
    const CERT1: &str = include_str!("../tests/fixtures/pubkeypin-testCert.pem");
    const CERT2: &str = include_str!("../tests/fixtures/pubkeypin-testCert2.pem");
    const PIN1: &str = "sha256:345959acb2c3b2feb87d281961c893f62a314207ef02599f1cc4a5fb255480b3";
    const PIN2: &str = "sha256:d1ef16989563fe7775f81a7dc55ce16a467ca9baedae2d081cb0a068b6a81971";

    /// Test vectors use ids/secrets outside the token format (e.g. "joshua", an empty secret).
    fn raw_token(id: &str, secret: &str) -> Token {
        Token { id: id.into(), secret: secret.into() }
    }

    fn token() -> Token {
        Token::parse("abcdef.0123456789abcdef").unwrap()
    }

    fn der_of(pem: &str) -> Vec<u8> {
        let (_, p) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
        p.contents
    }

    /// A kubeconfig shaped like clientcmd.Write's output for cluster-info.
    fn ci_kubeconfig(server: &str, ca_pem: &str) -> String {
        format!(
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {}\n    server: {server}\n  \
             name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {{}}\nusers: null\n",
            B64.encode(ca_pem)
        )
    }

    fn configmap(kubeconfig: &str, signers: &[&Token]) -> Value {
        let mut data = serde_json::Map::new();
        data.insert("kubeconfig".into(), json!(kubeconfig));
        for t in signers {
            data.insert(format!("jws-kubeconfig-{}", t.id), json!(jws_sign(kubeconfig, t)));
        }
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "cluster-info", "namespace": "kube-public"}, "data": data})
    }

    fn good_cm() -> (String, Value) {
        let kc = ci_kubeconfig("https://10.0.0.10:6443", CERT1);
        let cm = configmap(&kc, &[&token()]);
        (kc, cm)
    }

    fn pin1() -> Vec<CaPin> {
        vec![CaPin::parse(PIN1).unwrap()]
    }

    // --- tokens

    #[test]
    fn token_parse_accepts_the_format() {
        let t = Token::parse("abcdef.0123456789abcdef").unwrap();
        assert_eq!(t.id(), "abcdef");
        assert_eq!(t.secret(), "0123456789abcdef");
        assert_eq!(t.bearer(), "abcdef.0123456789abcdef");
    }

    #[test]
    fn token_parse_errors_never_contain_the_secret() {
        let secret = "0123456789abcdeZ";
        for bad in [
            format!("abcdef.{secret}"),
            format!("ABCDEF.{secret}"),
            format!("abcdef{secret}"),
            format!("abcdef.{secret}x"),
            format!("abcdef.{secret}\n"),
            format!("abc.{secret}"),
            format!("{secret}.abcdef"),
            "abcdef.0123456789abcde".to_string(),
            String::new(),
        ] {
            let err = Token::parse(&bad).unwrap_err().to_string();
            assert!(!err.contains(secret) && !err.contains("0123456789abcde"), "{err}");
            assert!(err.contains("6 characters"), "{err}");
        }
        assert_eq!(Token::parse("abcdef.0123456789abcdef\n").unwrap_err(), BadToken::Whitespace);
        let e = Token::parse("abcdef.0123").unwrap_err();
        assert_eq!(e, BadToken::BadSecret { id: "abcdef".into(), chars: 4 });
        assert!(
            e.to_string().starts_with("the secret of token \"abcdef\" (after the '.') is malformed (4 characters)")
        );
    }

    #[test]
    fn token_debug_redacts_the_secret() {
        let d = format!("{:?}", token());
        assert!(d.contains("abcdef") && d.contains("redacted"), "{d}");
        assert!(!d.contains("0123456789abcdef"), "{d}");
    }

    // --- JWS

    #[test]
    fn jws_vectors_from_test_vectors_json() {
        let v: Value = serde_json::from_str(VECTORS).unwrap();
        let mut checked = 0;
        for case in v["jws_detached_hs256"].as_array().unwrap() {
            let t = raw_token(case["token_id"].as_str().unwrap(), case["token_secret"].as_str().unwrap());
            let content = case["content"].as_str().unwrap();
            if let Some(want) = case["expected"].as_str() {
                assert_eq!(jws_sign(content, &t), want, "{}", case["origin"]);
                assert!(jws_verify(content, &t, want), "{}", case["origin"]);
                if let Some(h) = case["protected_header_b64"].as_str() {
                    assert!(want.starts_with(&format!("{h}..")));
                }
                checked += 1;
            }
            if let Some(bad) = case["must_not_validate"].as_str() {
                assert!(!jws_verify(content, &t, bad), "{}", case["origin"]);
                checked += 1;
            }
        }
        assert_eq!(checked, 7);
    }

    #[test]
    fn jws_rejects_foo_appended() {
        let t = raw_token("joshua", "my voice is my passcode");
        let content = "Hello from the other side. I must have called a thousand times.";
        let good = "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..VShe2taLd-YTrmWuRkcL_8QTNDHYxQIEBsAYYiIj1_8";
        assert!(jws_verify(content, &t, good));
        assert!(!jws_verify(content, &t, &format!("{good}foo")));
    }

    #[test]
    fn jws_header_is_exact() {
        let sig = jws_sign("x", &raw_token("joshua", "s"));
        assert!(sig.starts_with("eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9.."), "{sig}");
        let header = B64URL.decode(sig.split('.').next().unwrap()).unwrap();
        assert_eq!(header, br#"{"alg":"HS256","kid":"joshua"}"#);
    }

    #[test]
    fn jws_verify_rejects_every_other_form() {
        let t = token();
        let content = "apiVersion: v1\n";
        let good = jws_sign(content, &t);
        assert!(jws_verify(content, &t, &good));
        let (header, sig) = good.split_once("..").unwrap();
        let other_header = B64URL.encode(r#"{"alg":"HS256", "kid":"abcdef"}"#);
        let none_header = B64URL.encode(r#"{"alg":"none","kid":"abcdef"}"#);
        let attached = format!("{header}.{}.{sig}", B64URL.encode(content));
        let padded = format!("{good}=");
        let mut flipped = good.clone().into_bytes();
        let last = flipped.len() - 1;
        flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
        let flipped = String::from_utf8(flipped).unwrap();
        for bad in [
            format!("{other_header}..{sig}"),
            format!("{none_header}.."),
            format!("{header}.."),
            attached,
            padded,
            flipped,
            format!("{header}...{sig}"),
            format!("{header}.{sig}"),
            format!(" {good}"),
            sig.to_string(),
            String::new(),
        ] {
            assert!(!jws_verify(content, &t, &bad), "accepted {bad:?}");
        }
        // Wrong secret, other id, other content.
        assert!(!jws_verify(content, &Token::parse("abcdef.0123456789abcdee").unwrap(), &good));
        assert!(!jws_verify(content, &Token::parse("abcdeg.0123456789abcdef").unwrap(), &good));
        assert!(!jws_verify("apiVersion: v1", &t, &good));
    }

    // --- pins

    #[test]
    fn pin_vectors() {
        assert_eq!(CaPin::of_cert_der(&der_of(CERT1)).unwrap().to_string(), PIN1);
        assert_eq!(CaPin::of_cert_der(&der_of(CERT2)).unwrap().to_string(), PIN2);
        assert!(CaPin::of_cert_der(b"not a cert").is_err());
    }

    #[test]
    fn pin_parse_accepts_and_rejects_as_kubeadm() {
        let p = CaPin::parse(PIN1).unwrap();
        assert_eq!(p.to_string(), PIN1);
        let upper = "SHA256:345959ACB2C3B2FEB87D281961C893F62A314207EF02599F1CC4A5FB255480B3";
        assert_eq!(CaPin::parse(upper).unwrap(), p);
        assert_eq!(CaPin::parse(&PIN1.replace("sha256", "Sha256")).unwrap(), p);
        let hash = PIN1.strip_prefix("sha256:").unwrap();
        for (bad, why) in [
            ("xyz".to_string(), "malformed"),
            ("sha256:xyz".to_string(), "hex characters"),
            ("0011223344".to_string(), "malformed"),
            ("sha256:0011223344".to_string(), "hex characters"),
            (format!("sha256:{hash}{hash}"), "hex characters"),
            (hash.to_string(), "malformed"),
            (format!("md5:{hash}"), "unsupported format"),
            (format!("sha256:{hash}:x"), "malformed"),
            (format!("sha256:{}g", &hash[..63]), "not valid hex"),
            (format!("sha256: {}", &hash[..63]), "not valid hex"),
            (String::new(), "malformed"),
        ] {
            let err = CaPin::parse(&bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad:?}: {err}");
            assert!(err.starts_with(&format!("CA cert hash {bad:?} ")), "{err}");
        }
    }

    #[test]
    fn check_any_passes_on_any_match_and_lists_pins_otherwise() {
        let c1 = der_of(CERT1);
        let c2 = der_of(CERT2);
        let p1 = CaPin::parse(PIN1).unwrap();
        let p2 = CaPin::parse(PIN2).unwrap();
        let both = vec![c1, c2];
        let (only1, only2) = (&both[..1], &both[1..]);
        check_any(&[p1], only1).unwrap();
        check_any(&[p1], &[both[1].clone(), both[0].clone()]).unwrap();
        check_any(&[p2, p1], only2).unwrap();
        let err = check_any(&[p1], only2).unwrap_err().to_string();
        assert!(err.contains(PIN2) && !err.contains(PIN1), "{err}");
        let err = check_any(&[], &both).unwrap_err().to_string();
        assert!(err.contains(&format!("{PIN1}:{PIN2}")), "{err}");
        let err = check_any(&[p1], &[both[1].clone(), b"junk".to_vec()]).unwrap_err().to_string();
        assert!(err.starts_with("CA certificate #2 is not an X.509 certificate"), "{err}");
    }

    // --- cluster-info

    #[test]
    fn cluster_info_good() {
        let (kc, cm) = good_cm();
        let info = validate_cluster_info(&cm, &token(), &pin1(), false).unwrap();
        assert_eq!(info.server, "https://10.0.0.10:6443");
        assert_eq!(info.ca_pem, CERT1.as_bytes());
        assert_eq!(info.kubeconfig, kc);
        // Several signers: only ours matters.
        let other = Token::parse("zzzzzz.zzzzzzzzzzzzzzzz").unwrap();
        let cm = configmap(&kc, &[&other, &token()]);
        validate_cluster_info(&cm, &token(), &pin1(), false).unwrap();
    }

    #[test]
    fn cluster_info_unsigned() {
        let (kc, _) = good_cm();
        let other = Token::parse("zzzzzz.zzzzzzzzzzzzzzzz").unwrap();
        for cm in [configmap(&kc, &[]), configmap(&kc, &[&other])] {
            let err = validate_cluster_info(&cm, &token(), &pin1(), false).unwrap_err();
            assert_eq!(err, DiscoveryProblem::NotSignedYet { token_id: "abcdef".into() });
            assert!(err.to_string().contains("jws-kubeconfig-abcdef"), "{err}");
        }
        let mut cm = configmap(&kc, &[]);
        cm["data"]["jws-kubeconfig-abcdef"] = json!("");
        assert!(matches!(
            validate_cluster_info(&cm, &token(), &pin1(), false),
            Err(DiscoveryProblem::NotSignedYet { .. })
        ));
    }

    #[test]
    fn cluster_info_tampered() {
        let (kc, mut cm) = good_cm();
        // Tampered signature.
        let sig = cm["data"]["jws-kubeconfig-abcdef"].as_str().unwrap().to_string();
        let mut cm_sig = cm.clone();
        cm_sig["data"]["jws-kubeconfig-abcdef"] = json!(format!("{}A", &sig[..sig.len() - 1]));
        let err = validate_cluster_info(&cm_sig, &token(), &pin1(), false).unwrap_err();
        assert_eq!(err, DiscoveryProblem::BadSignature { token_id: "abcdef".into() });
        assert!(err.to_string().contains("secret is wrong"), "{err}");
        // Tampered content (server swapped), signature kept.
        cm["data"]["kubeconfig"] = json!(kc.replace("10.0.0.10", "10.6.6.6"));
        assert!(matches!(
            validate_cluster_info(&cm, &token(), &pin1(), false),
            Err(DiscoveryProblem::BadSignature { .. })
        ));
    }

    #[test]
    fn cluster_info_wrong_secret() {
        let (_, cm) = good_cm();
        let wrong = Token::parse("abcdef.0123456789abcdee").unwrap();
        assert_eq!(
            validate_cluster_info(&cm, &wrong, &pin1(), false).unwrap_err(),
            DiscoveryProblem::BadSignature { token_id: "abcdef".into() }
        );
    }

    #[test]
    fn cluster_info_pin_mismatch_lists_the_served_pin() {
        let (_, cm) = good_cm();
        let err = validate_cluster_info(&cm, &token(), &[CaPin::parse(PIN2).unwrap()], false).unwrap_err();
        assert_eq!(err, DiscoveryProblem::PinMismatch { got: vec![PIN1.to_string()] });
        assert!(err.to_string().contains(PIN1), "{err}");
        // No pins at all, without the explicit skip: refused, naming the served pin.
        let err = validate_cluster_info(&cm, &token(), &[], false).unwrap_err();
        assert_eq!(err, DiscoveryProblem::NoPins { got: vec![PIN1.to_string()] });
    }

    #[test]
    fn cluster_info_bundle_matches_on_any_cert() {
        let kc = ci_kubeconfig("https://cp.example:6443", &format!("{CERT2}{CERT1}"));
        let cm = configmap(&kc, &[&token()]);
        validate_cluster_info(&cm, &token(), &pin1(), false).unwrap();
        let err = validate_cluster_info(&cm, &token(), &[CaPin([7; 32])], false).unwrap_err();
        assert_eq!(err, DiscoveryProblem::PinMismatch { got: vec![PIN2.to_string(), PIN1.to_string()] });
    }

    #[test]
    fn cluster_info_skip_ca_verification() {
        let (_, cm) = good_cm();
        let info = validate_cluster_info(&cm, &token(), &[], true).unwrap();
        assert_eq!(info.ca_pem, CERT1.as_bytes());
        validate_cluster_info(&cm, &token(), &[CaPin::parse(PIN2).unwrap()], true).unwrap();
        // Skipping the pin never skips the signature.
        let wrong = Token::parse("abcdef.0123456789abcdee").unwrap();
        assert!(matches!(validate_cluster_info(&cm, &wrong, &[], true), Err(DiscoveryProblem::BadSignature { .. })));
    }

    #[test]
    fn cluster_info_two_clusters() {
        let one = ci_kubeconfig("https://a:6443", CERT1);
        let (head, tail) = one.split_once("contexts:").unwrap();
        let cluster = head.strip_prefix("apiVersion: v1\nclusters:\n").unwrap().replace("name: \"\"", "name: b");
        let two = format!("{head}{cluster}contexts:{tail}");
        let cm = configmap(&two, &[&token()]);
        let err = validate_cluster_info(&cm, &token(), &pin1(), false).unwrap_err();
        assert!(matches!(&err, DiscoveryProblem::BadKubeconfig(m) if m.contains("2 clusters")), "{err}");
        // And none.
        let none = "apiVersion: v1\nclusters: null\nkind: Config\n";
        let err = validate_cluster_info(&configmap(none, &[&token()]), &token(), &pin1(), false).unwrap_err();
        assert!(matches!(&err, DiscoveryProblem::BadKubeconfig(m) if m.contains("0 clusters")), "{err}");
    }

    #[test]
    fn cluster_info_garbage_kubeconfig() {
        let cases = [
            ("{{{ not yaml", "not valid YAML"),
            ("apiVersion: v1\nkind: Pod\nclusters: []\n", "kind \"Pod\""),
            (
                "apiVersion: v1\nkind: Config\nclusters:\n- name: x\n  cluster:\n    server: https://a\n",
                "no certificate-authority-data",
            ),
            (
                "apiVersion: v1\nkind: Config\nclusters:\n- name: x\n  cluster:\n    certificate-authority-data: AAAA\n",
                "no server",
            ),
            (
                "kind: Config\nclusters:\n- name: x\n  cluster:\n    server: https://a\n    certificate-authority-data: '%%%'\n",
                "not base64",
            ),
        ];
        for (kc, want) in cases {
            let err = validate_cluster_info(&configmap(kc, &[&token()]), &token(), &pin1(), false).unwrap_err();
            assert!(matches!(&err, DiscoveryProblem::BadKubeconfig(m) if m.contains(want)), "{kc:?}: {err}");
        }
        // CA data that is base64 but not a certificate.
        let kc = ci_kubeconfig("https://a:6443", "hello");
        let err = validate_cluster_info(&configmap(&kc, &[&token()]), &token(), &[], true).unwrap_err();
        assert!(matches!(&err, DiscoveryProblem::BadKubeconfig(m) if m.contains("no PEM CERTIFICATE")), "{err}");
        let broken = CERT1.replace("MII", "MIX");
        let kc = ci_kubeconfig("https://a:6443", &broken);
        assert!(matches!(
            validate_cluster_info(&configmap(&kc, &[&token()]), &token(), &[], true),
            Err(DiscoveryProblem::BadKubeconfig(_))
        ));
        // No kubeconfig key at all.
        let cm = json!({"data": {"jws-kubeconfig-abcdef": "x"}});
        assert!(matches!(
            validate_cluster_info(&cm, &token(), &pin1(), false),
            Err(DiscoveryProblem::BadKubeconfig(_))
        ));
        assert!(matches!(
            validate_cluster_info(&json!({}), &token(), &pin1(), false),
            Err(DiscoveryProblem::BadKubeconfig(_))
        ));
    }

    #[test]
    fn second_fetch_must_be_identical() {
        let (kc, cm) = good_cm();
        let info = validate_cluster_info(&cm, &token(), &pin1(), false).unwrap();
        same_kubeconfig(&info, &cm).unwrap();
        // Signatures may change between fetches; only the kubeconfig counts.
        let other = Token::parse("zzzzzz.zzzzzzzzzzzzzzzz").unwrap();
        same_kubeconfig(&info, &configmap(&kc, &[&other])).unwrap();
        for changed in [format!("{kc}\n"), kc.replace("10.0.0.10", "10.0.0.11")] {
            assert_eq!(same_kubeconfig(&info, &configmap(&changed, &[&token()])), Err(DiscoveryProblem::Changed));
        }
        assert!(same_kubeconfig(&info, &json!({})).is_err());
    }

    #[test]
    fn tls_bootstrap_kubeconfig_shape() {
        let (_, cm) = good_cm();
        let info = validate_cluster_info(&cm, &token(), &pin1(), false).unwrap();
        let k = tls_bootstrap_kubeconfig(&info, &token());
        assert_eq!(k.current_context, "tls-bootstrap-token-user@kubernetes");
        let (cluster, user) = k.current().unwrap();
        assert_eq!(cluster.server, "https://10.0.0.10:6443");
        assert_eq!(B64.decode(&cluster.certificate_authority_data).unwrap(), CERT1.as_bytes());
        assert_eq!(user.unwrap().token, "abcdef.0123456789abcdef");
        assert_eq!(k.clusters[0].name, "kubernetes");
        assert_eq!(k.users[0].name, "tls-bootstrap-token-user");
        // It round-trips through our own loader.
        assert_eq!(Kubeconfig::parse(k.to_yaml().unwrap().as_bytes()).unwrap(), k);
    }

    #[test]
    fn problems_read_as_advice() {
        for p in [
            DiscoveryProblem::Transport("connection refused".into()),
            DiscoveryProblem::NoClusterInfo,
            DiscoveryProblem::Changed,
        ] {
            assert!(p.to_string().contains("cluster-info"), "{p}");
        }
    }
}
