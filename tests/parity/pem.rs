//! Facts about certificates and keys that must match kubeadm's: everything but serials, key
//! material and exact timestamps (validity is compared as a duration, plus how far notBefore
//! lies before the run started).

use std::io::Write;
use std::process::{Command, Stdio};
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::objects::{oid_registry, oid2sn};
use x509_parser::oid_registry::Oid;
use x509_parser::prelude::{FromDer, X509Certificate};

/// (field, value) pairs, in a fixed order.
pub type Fields = Vec<(String, String)>;

fn oid_name(oid: &Oid) -> String {
    oid2sn(oid, oid_registry()).map(str::to_string).unwrap_or_else(|_| oid.to_id_string())
}

/// Rounds seconds to whole minutes, shown as e.g. `8760h0m`.
fn minutes(secs: i64) -> String {
    let m = (secs as f64 / 60.0).round() as i64;
    format!("{}h{}m", m / 60, m % 60)
}

/// The facts of one DER certificate; `started` is the Unix time the writer was started at.
pub fn cert(der: &[u8], started: i64) -> Fields {
    let (_, c) = X509Certificate::from_der(der).expect("parse certificate");
    let v = c.validity();
    let (nb, na) = (v.not_before.timestamp(), v.not_after.timestamp());
    let mut f: Fields = vec![
        ("subject".into(), c.subject().to_string()),
        ("issuer".into(), c.issuer().to_string()),
        ("signature".into(), oid_name(&c.signature_algorithm.algorithm)),
        ("validity".into(), minutes(na - nb)),
        ("notBefore before start".into(), minutes(started - nb)),
    ];
    let key = c.public_key();
    let size = key.parsed().map(|k| k.key_size()).unwrap_or(0);
    let curve = key.algorithm.parameters.as_ref().and_then(|p| p.as_oid().ok()).map(|o| oid_name(&o));
    f.push(("key".into(), format!("{} {size} {}", oid_name(&key.algorithm.algorithm), curve.unwrap_or_default())));
    let mut exts: Vec<String> =
        c.extensions().iter().map(|e| format!("{}{}", oid_name(&e.oid), if e.critical { "!" } else { "" })).collect();
    exts.sort();
    f.push(("extensions (! critical)".into(), exts.join(" ")));
    for e in c.extensions() {
        let (name, value) = match e.parsed_extension() {
            ParsedExtension::KeyUsage(k) => ("keyUsage", k.to_string()),
            ParsedExtension::ExtendedKeyUsage(k) => ("extKeyUsage", eku(k)),
            ParsedExtension::BasicConstraints(b) => {
                ("basicConstraints", format!("CA:{} {:?}", b.ca, b.path_len_constraint))
            }
            ParsedExtension::SubjectAlternativeName(s) => {
                ("SANs", s.general_names.iter().map(san).collect::<Vec<_>>().join(" "))
            }
            _ => continue,
        };
        f.push((name.into(), value));
    }
    f
}

fn eku(k: &x509_parser::extensions::ExtendedKeyUsage) -> String {
    let flags = [
        (k.any, "any"),
        (k.server_auth, "serverAuth"),
        (k.client_auth, "clientAuth"),
        (k.code_signing, "codeSigning"),
        (k.email_protection, "emailProtection"),
        (k.time_stamping, "timeStamping"),
        (k.ocsp_signing, "ocspSigning"),
    ];
    let mut out: Vec<String> = flags.iter().filter(|(on, _)| *on).map(|(_, n)| n.to_string()).collect();
    out.extend(k.other.iter().map(oid_name));
    out.join(" ")
}

fn san(n: &GeneralName) -> String {
    match n {
        GeneralName::IPAddress(b) if b.len() == 4 => {
            format!("IP:{}", std::net::Ipv4Addr::from(<[u8; 4]>::try_from(*b).unwrap()))
        }
        GeneralName::IPAddress(b) if b.len() == 16 => {
            format!("IP:{}", std::net::Ipv6Addr::from(<[u8; 16]>::try_from(*b).unwrap()))
        }
        other => other.to_string(),
    }
}

/// Facts of a PEM file: each block's label, then the certificate's facts or the key's type and
/// size (from `openssl pkey`, never its material).
pub fn pem(text: &str, started: i64) -> Fields {
    let mut f = Fields::new();
    for (i, pem) in x509_parser::pem::Pem::iter_from_buffer(text.as_bytes()).enumerate() {
        let pem = pem.expect("parse PEM");
        f.push((format!("pem[{i}]"), pem.label.clone()));
        if pem.label == "CERTIFICATE" {
            f.extend(cert(&pem.contents, started));
        } else {
            f.push(("key".into(), key(text, pem.label.contains("PUBLIC"))));
        }
    }
    f
}

/// The type and size lines of `openssl pkey -text`.
fn key(text: &str, public: bool) -> String {
    let mut cmd = Command::new("openssl");
    cmd.args(["pkey", "-noout", "-text"]).args(public.then_some("-pubin")).stdin(Stdio::piped());
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run openssl");
    child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("write to openssl");
    let done = child.wait_with_output().expect("openssl");
    assert!(done.status.success(), "openssl pkey: {}", String::from_utf8_lossy(&done.stderr));
    let out = String::from_utf8_lossy(&done.stdout);
    let keep = ["Private-Key", "Public-Key", "ASN1 OID", "NIST CURVE"];
    out.lines().filter(|l| keep.iter().any(|k| l.starts_with(k))).collect::<Vec<_>>().join("; ")
}
