//! The kubelet's client-certificate request, pure: the PKCS#10 request for
//! `system:node:<name>`, the CSR object's deterministic name, the `certificates.k8s.io/v1`
//! object, and reading the issued certificate back from its status (kubeadm-facts §9).

use base64::Engine;
use base64::engine::general_purpose::{STANDARD as B64, URL_SAFE_NO_PAD as B64URL};
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};
use serde_json::{Value, json};
use x509_parser::prelude::FromDer;

/// Organization of every node client certificate.
pub(crate) const NODES_GROUP: &str = "system:nodes";
/// Prefix of a node client certificate's CN; the node name follows.
pub(crate) const NODE_CN_PREFIX: &str = "system:node:";
/// The signer that issues kubelet client certificates.
pub const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The usages the kubelet requests for an ECDSA (any non-RSA) key, in its order: a real kubelet
/// v1.37's client certificate has no "key encipherment" (tests/real/join_parity.rs).
pub const KUBELET_CLIENT_USAGES: [&str; 2] = ["digital signature", "client auth"];
/// The kubelet's usages for an RSA key.
pub(crate) const KUBELET_CLIENT_USAGES_RSA: [&str; 3] = ["digital signature", "key encipherment", "client auth"];

/// The usages the kubelet would request with `key` (its bootstrap's getUsages).
pub(crate) fn kubelet_client_usages(key: &KeyPair) -> &'static [&'static str] {
    let rsa = [&rcgen::PKCS_RSA_SHA256, &rcgen::PKCS_RSA_SHA384, &rcgen::PKCS_RSA_SHA512];
    if rsa.contains(&key.algorithm()) { &KUBELET_CLIENT_USAGES_RSA } else { &KUBELET_CLIENT_USAGES }
}
/// Prefix of the CSR object name the kubelet uses.
pub(crate) const NODE_CSR_PREFIX: &str = "node-csr-";

/// Why a node certificate request could not be made, or what its status says went wrong.
/// Every variant names the request (its CN or its object name).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsrError {
    #[error("the node name is empty")]
    EmptyNodeName,
    /// rcgen/x509-parser failed while `step` ("creating", "encoding", "re-reading") the request.
    #[error("{step} the certificate request for {cn}: {detail}")]
    Request { step: &'static str, cn: String, detail: String },
    #[error("certificate signing request {name} was denied: {reason}: {message}")]
    Denied { name: String, reason: String, message: String },
    #[error("certificate signing request {name} failed: {reason}: {message}")]
    Failed { name: String, reason: String, message: String },
    #[error("certificate signing request {name}: status.certificate is not base64: {detail}")]
    NotBase64 { name: String, detail: String },
    /// `block` counts from 1.
    #[error("certificate signing request {name}: PEM block #{block} is malformed: {detail}")]
    BadPem { name: String, block: usize, detail: String },
    #[error("certificate signing request {name}: certificate #{block} is not valid X.509: {detail}")]
    BadCertificate { name: String, block: usize, detail: String },
    #[error("certificate signing request {name}: status.certificate holds no PEM CERTIFICATE")]
    NoCertificate { name: String },
    #[error("certificate signing request {name}: status.certificate is not text")]
    NotText { name: String },
}

/// The kubelet's `digestedName`: `node-csr-` + base64url-no-pad(SHA-512/256(stream)), where
/// the stream is, for the PKIX-DER public key, the CN, each O and each usage in order,
/// base64url-no-pad(field) followed by '|'.
pub(crate) fn digested_name(spki_der: &[u8], cn: &str, orgs: &[&str], usages: &[&str]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA512_256);
    let fields = [spki_der, cn.as_bytes()]
        .into_iter()
        .chain(orgs.iter().map(|o| o.as_bytes()))
        .chain(usages.iter().map(|u| u.as_bytes()));
    for field in fields {
        ctx.update(B64URL.encode(field).as_bytes());
        ctx.update(b"|");
    }
    format!("{NODE_CSR_PREFIX}{}", B64URL.encode(ctx.finish().as_ref()))
}

/// A PKCS#10 request with subject `O=system:nodes, CN=system:node:<node_name>` and no SANs or
/// extensions, signed by `key`, and the CSR object name the kubelet would give it (with
/// [`kubelet_client_usages`]). Returns (PEM "CERTIFICATE REQUEST", object name).
pub fn node_csr(node_name: &str, key: &KeyPair) -> Result<(String, String), CsrError> {
    if node_name.is_empty() {
        return Err(CsrError::EmptyNodeName);
    }
    let cn = format!("{NODE_CN_PREFIX}{node_name}");
    let mut params = CertificateParams::default();
    // Replace rcgen's default CN; O before CN, as Go's pkix.Name orders them.
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, NODES_GROUP);
    dn.push(DnType::CommonName, cn.as_str());
    params.distinguished_name = dn;
    let failed = |step: &'static str, e: &dyn std::fmt::Display| CsrError::Request {
        step,
        cn: cn.clone(),
        detail: e.to_string(),
    };
    let csr = params.serialize_request(key).map_err(|e| failed("creating", &e))?;
    let pem = csr.pem().map_err(|e| failed("encoding", &e))?;
    // Digest the public key exactly as it sits in the request.
    let (_, parsed) = x509_parser::certification_request::X509CertificationRequest::from_der(csr.der())
        .map_err(|e| failed("re-reading", &e))?;
    let spki = parsed.certification_request_info.subject_pki.raw;
    let name = digested_name(spki, &cn, &[NODES_GROUP], kubelet_client_usages(key));
    Ok((pem, name))
}

/// The `certificates.k8s.io/v1` CertificateSigningRequest object to POST.
pub(crate) fn csr_object(name: &str, pem: &str, usages: &[&str]) -> Value {
    json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": { "name": name },
        "spec": {
            "request": B64.encode(pem),
            "signerName": KUBELET_CLIENT_SIGNER,
            "usages": usages,
        },
    })
}

/// Reads a CSR object's status: `Ok(None)` while pending (or approved but not yet issued),
/// `Err` naming the reason and message if Denied or Failed, `Ok(Some(pem))` once
/// `status.certificate` holds a PEM certificate chain.
pub fn certificate_from_status(csr: &Value) -> Result<Option<String>, CsrError> {
    let name = csr.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("(unnamed)");
    let status = csr.get("status");
    let conditions = status.and_then(|s| s.get("conditions")).and_then(Value::as_array);
    for c in conditions.into_iter().flatten() {
        let kind = c.get("type").and_then(Value::as_str).unwrap_or_default();
        // v1 conditions always carry a status; treat a missing one as True, as older objects did.
        let active = c.get("status").and_then(Value::as_str).unwrap_or("True") != "False";
        if active && (kind == "Denied" || kind == "Failed") {
            let name = name.to_string();
            let reason = c.get("reason").and_then(Value::as_str).unwrap_or("(no reason)").to_string();
            let message = c.get("message").and_then(Value::as_str).unwrap_or("(no message)").to_string();
            return Err(if kind == "Denied" {
                CsrError::Denied { name, reason, message }
            } else {
                CsrError::Failed { name, reason, message }
            });
        }
    }
    let Some(b64) = status.and_then(|s| s.get("certificate")).and_then(Value::as_str).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let name = name.to_string();
    let bytes = B64.decode(b64).map_err(|e| CsrError::NotBase64 { name: name.clone(), detail: e.to_string() })?;
    let mut certs = 0;
    for (i, block) in x509_parser::pem::Pem::iter_from_buffer(&bytes).enumerate() {
        let block = block.map_err(|e| CsrError::BadPem { name: name.clone(), block: i + 1, detail: e.to_string() })?;
        if block.label == "CERTIFICATE" {
            x509_parser::parse_x509_certificate(&block.contents).map_err(|e| CsrError::BadCertificate {
                name: name.clone(),
                block: i + 1,
                detail: e.to_string(),
            })?;
            certs += 1;
        }
    }
    if certs == 0 {
        return Err(CsrError::NoCertificate { name });
    }
    String::from_utf8(bytes).map(Some).map_err(|_| CsrError::NotText { name })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::PublicKeyData;
    use sha2::{Digest, Sha512_256};
    use x509_parser::extensions::ParsedExtension;

    const CERT: &str = include_str!("../tests/fixtures/pubkeypin-testCert.pem");

    fn parse_pem(pem: &str) -> Vec<u8> {
        let (_, p) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
        assert_eq!(p.label, "CERTIFICATE REQUEST");
        p.contents
    }

    /// The kubelet's digest, written out independently: sha2's SHA-512/256 over one string.
    fn expected_name(spki: &[u8], cn: &str) -> String {
        let e = |b: &[u8]| B64URL.encode(b);
        let stream = format!(
            "{}|{}|{}|{}|{}|",
            e(spki),
            e(cn.as_bytes()),
            e(b"system:nodes"),
            e(b"digital signature"),
            e(b"client auth")
        );
        format!("node-csr-{}", B64URL.encode(Sha512_256::digest(stream.as_bytes())))
    }

    #[test]
    fn node_csr_request_has_subject_and_no_sans() {
        for alg in [&rcgen::PKCS_ECDSA_P256_SHA256, &rcgen::PKCS_ECDSA_P384_SHA384, &rcgen::PKCS_ED25519] {
            let key = KeyPair::generate_for(alg).unwrap();
            let (pem, _) = node_csr("worker-1", &key).unwrap();
            let der = parse_pem(&pem);
            let (rest, req) = x509_parser::certification_request::X509CertificationRequest::from_der(&der).unwrap();
            assert!(rest.is_empty());
            req.verify_signature().unwrap();
            let info = &req.certification_request_info;
            assert_eq!(info.subject.to_string(), "O=system:nodes, CN=system:node:worker-1");
            let orgs: Vec<_> = info.subject.iter_organization().map(|o| o.as_str().unwrap()).collect();
            assert_eq!(orgs, ["system:nodes"]);
            let cns: Vec<_> = info.subject.iter_common_name().map(|o| o.as_str().unwrap()).collect();
            assert_eq!(cns, ["system:node:worker-1"]);
            assert_eq!(info.subject_pki.raw, key.subject_public_key_info().as_slice());
            let sans = req
                .requested_extensions()
                .into_iter()
                .flatten()
                .filter(|e| matches!(e, ParsedExtension::SubjectAlternativeName(_)))
                .count();
            assert_eq!(sans, 0);
            assert!(info.attributes().is_empty(), "no extension request at all");
        }
    }

    #[test]
    fn node_csr_name_matches_independent_digest() {
        let key = KeyPair::generate().unwrap();
        let (pem1, name1) = node_csr("worker-1", &key).unwrap();
        let (pem2, name2) = node_csr("worker-1", &key).unwrap();
        let want = expected_name(&key.subject_public_key_info(), "system:node:worker-1");
        assert_eq!(name1, want);
        // Deterministic per key and node, though each request's signature differs.
        assert_ne!(pem1, pem2);
        assert_eq!(name2, want);
        assert!(name1.len() == "node-csr-".len() + 43, "{name1}");
        let (_, other_node) = node_csr("worker-2", &key).unwrap();
        let (_, other_key) = node_csr("worker-1", &KeyPair::generate().unwrap()).unwrap();
        assert_ne!(other_node, want);
        assert_ne!(other_key, want);
    }

    #[test]
    fn digest_fields_are_delimited() {
        let a = digested_name(b"k", "ab", &["c"], &[]);
        let b = digested_name(b"k", "a", &["bc"], &[]);
        assert_ne!(a, b);
        // The stream is a flat list of fields (as in the kubelet): where the O list ends and the
        // usages begin is not encoded, so only the concatenated field list matters.
        assert_eq!(digested_name(b"k", "a", &["b"], &["x"]), digested_name(b"k", "a", &["b", "x"], &[]));
    }

    #[test]
    fn node_csr_rejects_empty_name() {
        assert_eq!(node_csr("", &KeyPair::generate().unwrap()), Err(CsrError::EmptyNodeName));
    }

    #[test]
    fn rsa_keys_ask_for_key_encipherment_too() {
        let rsa = crate::pki::keys::generate(crate::config::KeyAlgorithm::Rsa(2048)).unwrap();
        assert_eq!(kubelet_client_usages(&rsa), KUBELET_CLIENT_USAGES_RSA);
        assert_eq!(kubelet_client_usages(&KeyPair::generate().unwrap()), KUBELET_CLIENT_USAGES);
    }

    #[test]
    fn csr_object_shape() {
        let key = KeyPair::generate().unwrap();
        let (pem, name) = node_csr("n1", &key).unwrap();
        let o = csr_object(&name, &pem, &KUBELET_CLIENT_USAGES);
        assert_eq!(o["apiVersion"], "certificates.k8s.io/v1");
        assert_eq!(o["kind"], "CertificateSigningRequest");
        assert_eq!(o["metadata"]["name"], name.as_str());
        assert_eq!(o["spec"]["signerName"], "kubernetes.io/kube-apiserver-client-kubelet");
        assert_eq!(o["spec"]["usages"], json!(["digital signature", "client auth"]));
        assert_eq!(B64.decode(o["spec"]["request"].as_str().unwrap()).unwrap(), pem.as_bytes());
        assert!(o["spec"].get("expirationSeconds").is_none());
    }

    fn with_status(status: Value) -> Value {
        json!({"metadata": {"name": "node-csr-x"}, "status": status})
    }

    #[test]
    fn status_pending_and_approved_without_certificate() {
        assert_eq!(certificate_from_status(&json!({"metadata": {"name": "a"}})), Ok(None));
        assert_eq!(certificate_from_status(&with_status(json!({}))), Ok(None));
        let approved = json!({"conditions": [{"type": "Approved", "status": "True", "reason": "AutoApproved"}]});
        assert_eq!(certificate_from_status(&with_status(approved)), Ok(None));
        let empty = json!({"certificate": "", "conditions": [{"type": "Approved", "status": "True"}]});
        assert_eq!(certificate_from_status(&with_status(empty)), Ok(None));
        let inactive = json!({"conditions": [{"type": "Denied", "status": "False", "reason": "X"}]});
        assert_eq!(certificate_from_status(&with_status(inactive)), Ok(None));
    }

    #[test]
    fn status_denied_or_failed_names_reason_and_message() {
        let denied = json!({"conditions": [
            {"type": "Denied", "status": "True", "reason": "NotMine", "message": "go away"}]});
        let err = certificate_from_status(&with_status(denied)).unwrap_err().to_string();
        assert!(err.contains("node-csr-x") && err.contains("denied"), "{err}");
        assert!(err.contains("NotMine") && err.contains("go away"), "{err}");
        let failed = json!({"certificate": "", "conditions": [
            {"type": "Approved", "status": "True"},
            {"type": "Failed", "status": "True", "reason": "SignerValidationFailure",
             "message": "usages did not match"}]});
        let err = certificate_from_status(&with_status(failed)).unwrap_err().to_string();
        assert!(err.contains("failed") && err.contains("SignerValidationFailure") && err.contains("usages"), "{err}");
    }

    #[test]
    fn status_certificate_issued() {
        let issued = json!({"certificate": B64.encode(CERT),
                            "conditions": [{"type": "Approved", "status": "True"}]});
        assert_eq!(certificate_from_status(&with_status(issued)).unwrap().as_deref(), Some(CERT));
        for bad in [json!("%%%"), json!(B64.encode("hello")), json!(B64.encode(CERT.replace("MII", "MIX")))] {
            let err = certificate_from_status(&with_status(json!({"certificate": bad}))).unwrap_err();
            assert!(err.to_string().starts_with("certificate signing request node-csr-x: "), "{err}");
        }
    }
}
