//! The certificate key's AES-GCM against Python's `cryptography`, both ways, and the
//! certificate-key command. kubeadm-certs itself, on the real API server, is tested in
//! tests/real/ha_checks.rs.

use crate::common::*;

use crate::common::needs::{Need, need};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kubestrap::config::values::CertificateKey;

/// AES-256-GCM in Python: `open HEXKEY B64BLOB` prints the plaintext as base64;
/// `seal HEXKEY B64PLAIN` prints nonce‖ct‖tag as base64.
const PY: &str = r#"
import base64, os, sys
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
mode, key, data = sys.argv[1], bytes.fromhex(sys.argv[2]), base64.b64decode(sys.argv[3])
g = AESGCM(key)
if mode == "open":
    print(base64.b64encode(g.decrypt(data[:12], data[12:], None)).decode())
else:
    n = os.urandom(12)
    print(base64.b64encode(n + g.encrypt(n, data, None)).decode())
"#;

fn python(mode: &str, key: &str, data: &str) -> String {
    let (code, out, err) = capture(std::process::Command::new("python3").args(["-c", PY, mode, key, data]));
    assert_eq!(code, 0, "{err}");
    out.trim().to_string()
}

#[test]
fn python_opens_our_blobs_and_we_open_pythons() {
    need!(Need::python(&["cryptography"]));
    let key = CertificateKey::generate().unwrap();
    let hex = key.to_hex();
    let ours = key.seal(b"from kubestrap").unwrap();
    assert_eq!(STANDARD.decode(python("open", &hex, &STANDARD.encode(&ours))).unwrap(), b"from kubestrap");
    let theirs = STANDARD.decode(python("seal", &hex, &STANDARD.encode(b"from python"))).unwrap();
    assert_eq!(key.open(&theirs, "python").unwrap(), b"from python");
    assert!(CertificateKey::generate().unwrap().open(&theirs, "python").is_err());
}

#[test]
fn certificate_key_command_prints_a_fresh_key() {
    let a = kubestrap(&["certs", "certificate-key"]).ok().stdout();
    let b = kubestrap(&["certs", "certificate-key"]).ok().stdout();
    assert_eq!(a.trim().len(), 64);
    assert!(CertificateKey::parse(a.trim()).is_ok());
    assert_ne!(a, b);
}
