//! Cross-checks discovery and CSR code against independent implementations in Python:
//! jwcrypto for the detached HS256 JWS, `cryptography` for the CSR, its kubelet object name
//! and the CA pin. The helper is tests/cluster/jws_interop.py.

use crate::common::needs::{Need, need};
use crate::common::*;
use kubestrap::csr::{KUBELET_CLIENT_USAGES, node_csr};
use kubestrap::discovery::{CaPin, Token, jws_sign, jws_verify};
use rcgen::PublicKeyData;
use serde_json::{Value, json};

/// A kubeconfig-like payload as cluster-info carries it (trailing newline included).
const KUBECONFIG: &str = fixture!("cluster-info/kubeconfig.yaml");

fn python(mode: &str, input: &Value) -> Value {
    require_tool("python3");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("input.json");
    std::fs::write(&path, serde_json::to_vec(input).unwrap()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cluster/jws_interop.py");
    let (code, out, err) = sh(&format!("python3 '{script}' {mode} '{}'", path.display()));
    assert_eq!(code, 0, "python {mode} failed (needs jwcrypto and cryptography):\n{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("python {mode} printed non-JSON ({e}): {out}"))
}

fn token() -> Token {
    Token::parse(TOKEN).unwrap()
}

#[test]
fn jwcrypto_verifies_our_detached_jws() {
    need!(Need::python(&["jwcrypto", "cryptography"]));
    let t = token();
    let detached = jws_sign(KUBECONFIG, &t);
    let input = json!({"content": KUBECONFIG, "token_id": "abcdef", "secret": t.secret(), "detached": detached});
    let out = python("verify", &input);
    assert_eq!(out["valid"], true, "{out}");
    assert_eq!(out["header"], json!({"alg": "HS256", "kid": "abcdef"}));
    assert_eq!(out["header_raw"], r#"{"alg":"HS256","kid":"abcdef"}"#);
    // Negative controls: the Python side does reject a wrong secret and other content.
    let mut wrong = input.clone();
    wrong["secret"] = json!("0123456789abcdee");
    assert_eq!(python("verify", &wrong)["valid"], false);
    let mut other = input;
    other["content"] = json!(KUBECONFIG.replace("10.0.0.1", "10.0.0.2"));
    assert_eq!(python("verify", &other)["valid"], false);
}

#[test]
fn we_verify_a_jwcrypto_signed_jws() {
    need!(Need::python(&["jwcrypto", "cryptography"]));
    let t = token();
    let out = python("sign", &json!({"content": KUBECONFIG, "token_id": "abcdef", "secret": t.secret()}));
    let detached = out["detached"].as_str().unwrap();
    assert!(jws_verify(KUBECONFIG, &t, detached), "{detached}");
    // HMAC is deterministic: byte-identical to ours.
    assert_eq!(detached, jws_sign(KUBECONFIG, &t));
    assert!(!jws_verify(KUBECONFIG, &Token::parse("abcdef.0123456789abcdee").unwrap(), detached));
    assert!(!jws_verify(&format!("{KUBECONFIG} "), &t, detached));
}

#[test]
fn cryptography_reads_our_csr_and_agrees_on_its_name() {
    need!(Need::python(&["jwcrypto", "cryptography"]));
    let key = rcgen::KeyPair::generate().unwrap();
    let (pem, name) = node_csr("worker-7", &key).unwrap();
    let out = python("csr", &json!({"pem": pem}));
    assert_eq!(out["signature_valid"], true, "{out}");
    assert_eq!(out["cn"], json!(["system:node:worker-7"]));
    assert_eq!(out["o"], json!(["system:nodes"]));
    assert_eq!(out["extensions"], json!([]), "no SANs or other extensions");
    let spki_hex: String = key.subject_public_key_info().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(out["spki_hex"], spki_hex.as_str());
    assert_eq!(KUBELET_CLIENT_USAGES, ["digital signature", "client auth"]);
    assert_eq!(out["name"], name.as_str());
}

#[test]
fn cryptography_agrees_on_ca_pins() {
    need!(Need::python(&["jwcrypto", "cryptography"]));
    let fixture = fixture!("pubkeypin-testCert.pem").to_string();
    let generated = {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap().pem()
    };
    for pem in [fixture, generated] {
        let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
        let ours = CaPin::of_cert_der(&block.contents).unwrap().to_string();
        let out = python("pin", &json!({"pem": pem}));
        assert_eq!(out["pin"], ours.as_str());
    }
}
