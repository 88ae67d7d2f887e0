//! Cross-checks the PKI kubestrap writes against the real `openssl` CLI: chains, subjects,
//! extensions, validity, key types and file modes of every certificate in kubeadm's table
//! (kubeadm-facts.md section 7), the client certificates inside the kubeconfigs, and the CA
//! pin (section 3) against the openssl pipeline from the kubeadm docs.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::needs::{Need, need};
use crate::common::{
    BASE_CONFIG, Scratch, ca_hash, ca_hash_of_root, capture, fixture_path, kubestrap, mode, require_tool, sh,
};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;

const DAY: i64 = 24 * 3600;
const BACKDATE: i64 = 5 * 60;
const LEAF_VALIDITY: i64 = 365 * DAY;
const CA_VALIDITY: i64 = 3650 * DAY;
const NODE: &str = "cp-1";
const ADVERTISE: &str = "10.0.0.10";

const SERVER_AUTH: &str = "TLS Web Server Authentication";
const CLIENT_AUTH: &str = "TLS Web Client Authentication";

const EXTERNAL_ETCD: &str = "etcd: {external: {endpoints: [https://10.0.0.50:2379], caFile: /etc/etcd/ca.crt, certFile: /etc/etcd/c.crt, keyFile: /etc/etcd/c.key}}\n";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Eku {
    /// A CA: no ExtendedKeyUsage at all.
    Ca,
    Server,
    Client,
    ServerAndClient,
}

impl Eku {
    /// openssl's names for the EKUs, in the order Go writes them.
    fn names(self) -> Vec<&'static str> {
        match self {
            Eku::Ca => vec![],
            Eku::Server => vec![SERVER_AUTH],
            Eku::Client => vec![CLIENT_AUTH],
            Eku::ServerAndClient => vec![SERVER_AUTH, CLIENT_AUTH],
        }
    }
    /// `openssl verify -purpose` values the certificate must pass.
    fn purposes(self) -> Vec<&'static str> {
        match self {
            Eku::Ca => vec![],
            Eku::Server => vec!["sslserver"],
            Eku::Client => vec!["sslclient"],
            Eku::ServerAndClient => vec!["sslserver", "sslclient"],
        }
    }
}

/// One row of kubeadm's certificate table.
struct Row {
    name: &'static str,
    ca: Option<&'static str>,
    cn: &'static str,
    o: Option<&'static str>,
    eku: Eku,
    /// Signed by (or is) the etcd CA: not made when etcd is external.
    etcd_tree: bool,
}

const fn row(
    name: &'static str,
    ca: Option<&'static str>,
    cn: &'static str,
    o: Option<&'static str>,
    eku: Eku,
    etcd_tree: bool,
) -> Row {
    Row { name, ca, cn, o, eku, etcd_tree }
}

const TABLE: &[Row] = &[
    row("ca", None, "kubernetes", None, Eku::Ca, false),
    row("apiserver", Some("ca"), "kube-apiserver", None, Eku::Server, false),
    // No O since kubeadm 1.37: RBAC reaches it through kubeadm:apiserver-kubelet-client.
    row("apiserver-kubelet-client", Some("ca"), "kube-apiserver-kubelet-client", None, Eku::Client, false),
    row("front-proxy-ca", None, "front-proxy-ca", None, Eku::Ca, false),
    row("front-proxy-client", Some("front-proxy-ca"), "front-proxy-client", None, Eku::Client, false),
    row("etcd/ca", None, "etcd-ca", None, Eku::Ca, true),
    row("etcd/server", Some("etcd/ca"), NODE, None, Eku::ServerAndClient, true),
    row("etcd/peer", Some("etcd/ca"), NODE, None, Eku::ServerAndClient, true),
    row("etcd/healthcheck-client", Some("etcd/ca"), "kube-etcd-healthcheck-client", None, Eku::Client, true),
    row("apiserver-etcd-client", Some("etcd/ca"), "kube-apiserver-etcd-client", None, Eku::Client, true),
];

/// The client certificates embedded in the kubeconfigs: file, CN, O.
const KUBECONFIGS: &[(&str, &str, Option<&str>)] = &[
    ("admin.conf", "kubernetes-admin", Some("kubeadm:cluster-admins")),
    ("super-admin.conf", "kubernetes-super-admin", Some("system:masters")),
    ("kubelet.conf", "system:node:cp-1", Some("system:nodes")),
    ("controller-manager.conf", "system:kube-controller-manager", None),
    ("scheduler.conf", "system:kube-scheduler", None),
];

#[derive(Clone, Copy, Debug)]
enum Alg {
    EcdsaP256,
    EcdsaP384,
    Rsa(u32),
}

impl Alg {
    /// The ClusterConfiguration line selecting it (empty for kubestrap's default, ECDSA-P256).
    fn config_line(self) -> String {
        match self {
            Alg::EcdsaP256 => String::new(),
            Alg::EcdsaP384 => "encryptionAlgorithm: ECDSA-P384\n".into(),
            Alg::Rsa(bits) => format!("encryptionAlgorithm: RSA-{bits}\n"),
        }
    }
    /// Lines `openssl ... -text` prints for a public key of this type.
    fn key_text(self) -> Vec<String> {
        match self {
            Alg::EcdsaP256 => vec!["Public-Key: (256 bit)".into(), "NIST CURVE: P-256".into()],
            Alg::EcdsaP384 => vec!["Public-Key: (384 bit)".into(), "NIST CURVE: P-384".into()],
            Alg::Rsa(bits) => vec![format!("Public-Key: ({bits} bit)")],
        }
    }
    /// The signature algorithm Go's x509 picks for a CA key of this type.
    fn signature(self) -> &'static str {
        match self {
            Alg::EcdsaP256 => "ecdsa-with-SHA256",
            Alg::EcdsaP384 => "ecdsa-with-SHA384",
            Alg::Rsa(_) => "sha256WithRSAEncryption",
        }
    }
    fn is_rsa(self) -> bool {
        matches!(self, Alg::Rsa(_))
    }
}

/// Expected SANs: DNS names (kubeadm sorts them) and IPs (kubeadm keeps their order).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Sans {
    dns: Vec<String>,
    ips: Vec<IpAddr>,
}

fn sans_of(dns: &[&str], ips: &[&str]) -> Sans {
    let mut dns: Vec<String> = dns.iter().map(|d| d.to_string()).collect();
    dns.sort();
    Sans { dns, ips: ips.iter().map(|i| i.parse().expect("test IP")).collect() }
}

fn default_apiserver_sans() -> Sans {
    sans_of(
        &[NODE, "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"],
        &["10.96.0.1", ADVERTISE],
    )
}

fn etcd_sans() -> Sans {
    sans_of(&[NODE, "localhost"], &[ADVERTISE, "127.0.0.1", "::1"])
}

// ---------------------------------------------------------------------------------------------
// openssl and shell helpers

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs() as i64
}

/// Runs openssl; returns (success, stdout, stderr).
fn openssl_try(args: &[&str]) -> (bool, String, String) {
    let (code, out, err) = capture(Command::new("openssl").args(args));
    (code == 0, out, err)
}

/// Runs openssl, which must succeed; returns stdout.
fn openssl(args: &[&str]) -> String {
    let (ok, out, err) = openssl_try(args);
    assert!(ok, "openssl {args:?} failed:\n{out}{err}");
    out
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// `openssl x509 -noout -in path <args>`.
fn x509(path: &Path, args: &[&str]) -> String {
    let mut all = vec!["x509", "-noout", "-in", p(path)];
    all.extend_from_slice(args);
    openssl(&all)
}

/// Subject attributes as sorted (type, value) pairs, from the RFC 2253 form.
fn subject(path: &Path) -> Vec<(String, String)> {
    let line = x509(path, &["-subject", "-nameopt", "RFC2253"]);
    let rdns =
        line.trim().strip_prefix("subject=").unwrap_or_else(|| panic!("{}: odd subject line {line:?}", path.display()));
    let mut out: Vec<(String, String)> = rdns
        .split(',')
        .map(|rdn| {
            let (k, v) = rdn.split_once('=').unwrap_or_else(|| panic!("{}: odd RDN {rdn:?}", path.display()));
            (k.to_string(), v.to_string())
        })
        .collect();
    out.sort();
    out
}

fn expected_subject(cn: &str, o: Option<&str>) -> Vec<(String, String)> {
    let mut v = vec![("CN".to_string(), cn.to_string())];
    if let Some(o) = o {
        v.push(("O".to_string(), o.to_string()));
    }
    v.sort();
    v
}

#[derive(Debug)]
struct Ext {
    critical: bool,
    value: String,
}

/// The extensions kubeadm's certificates carry, keyed by openssl's name ("Key Usage", ...).
/// Absent ones are missing from the map.
fn extensions(path: &Path) -> BTreeMap<String, Ext> {
    let text = x509(
        path,
        &[
            "-ext",
            "subjectAltName,keyUsage,extendedKeyUsage,basicConstraints,subjectKeyIdentifier,authorityKeyIdentifier",
        ],
    );
    let mut map = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if line.starts_with(char::is_whitespace) {
            let name = current.as_ref().unwrap_or_else(|| panic!("{}: value before a header", path.display()));
            let ext: &mut Ext = map.get_mut(name).expect("header seen");
            if !ext.value.is_empty() {
                ext.value.push('\n');
            }
            ext.value.push_str(line.trim());
        } else if let Some(header) = line.strip_prefix("X509v3 ") {
            let (name, rest) =
                header.split_once(':').unwrap_or_else(|| panic!("{}: odd header {line:?}", path.display()));
            let critical = rest.trim() == "critical";
            map.insert(name.to_string(), Ext { critical, value: String::new() });
            current = Some(name.to_string());
        } else if !line.trim().is_empty() {
            panic!("{}: unexpected openssl output {line:?}", path.display());
        }
    }
    map
}

/// SANs as openssl prints them, DNS names and IPs each in certificate order.
fn parse_sans(path: &Path, value: &str) -> Sans {
    let mut s = Sans { dns: vec![], ips: vec![] };
    for entry in value.split(", ") {
        if let Some(d) = entry.strip_prefix("DNS:") {
            s.dns.push(d.to_string());
        } else if let Some(ip) = entry.strip_prefix("IP Address:") {
            s.ips.push(ip.parse().unwrap_or_else(|_| panic!("{}: bad IP SAN {entry:?}", path.display())));
        } else {
            panic!("{}: unexpected SAN {entry:?}", path.display());
        }
    }
    s
}

/// Seconds since the epoch of a date as openssl prints it ("Nov 21 12:29:24 2026 GMT").
fn epoch(date: &str) -> i64 {
    let (code, out, err) = sh(&format!("date -u -d '{date}' +%s"));
    assert_eq!(code, 0, "date could not parse {date:?}: {err}");
    out.trim().parse().expect("date prints an integer")
}

/// (notBefore, notAfter) in epoch seconds.
fn dates(path: &Path) -> (i64, i64) {
    let out = x509(path, &["-startdate", "-enddate"]);
    let get = |key: &str| {
        let line = out
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("{}: no {key} in {out:?}", path.display()));
        epoch(line.trim())
    };
    (get("notBefore="), get("notAfter="))
}

/// The PEM public key of a private key file, as openssl derives it.
fn key_pubkey(key: &Path) -> String {
    openssl(&["pkey", "-in", p(key), "-pubout"])
}

fn cert_pubkey(cert: &Path) -> String {
    x509(cert, &["-pubkey"])
}

/// `openssl verify` with strict X.509 checks; `purpose` is e.g. "sslserver".
fn verify(ca: &Path, cert: &Path, purpose: Option<&str>) -> Result<(), String> {
    let mut args = vec!["verify", "-x509_strict"];
    if let Some(purpose) = purpose {
        args.extend_from_slice(&["-purpose", purpose]);
    }
    args.extend_from_slice(&["-CAfile", p(ca), p(cert)]);
    let (ok, out, err) = openssl_try(&args);
    if ok && out.trim() == format!("{}: OK", cert.display()) { Ok(()) } else { Err(format!("{out}{err}")) }
}

/// Interval (epoch seconds) in which kubestrap ran; its start time lies inside.
struct Window(i64, i64);

/// notBefore = start - 5 min and notAfter - notBefore = validity + 5 min.
fn check_validity(cert: &Path, validity: i64, ran: &Window) {
    let (not_before, not_after) = dates(cert);
    assert_eq!(not_after - not_before, validity + BACKDATE, "{}: notAfter - notBefore", cert.display());
    assert!(
        (ran.0 - BACKDATE - 1..=ran.1 - BACKDATE + 1).contains(&not_before),
        "{}: notBefore {not_before} is not the start time ({}..{}) minus 5 minutes",
        cert.display(),
        ran.0,
        ran.1
    );
}

fn check_key_type(cert: &Path, alg: Alg) {
    let text = x509(cert, &["-text"]);
    for want in alg.key_text() {
        assert!(text.contains(&want), "{}: expected {want:?} ({alg:?}) in:\n{text}", cert.display());
    }
    let sig = format!("Signature Algorithm: {}", alg.signature());
    assert!(text.contains(&sig), "{}: expected {sig:?} in:\n{text}", cert.display());
}

// ---------------------------------------------------------------------------------------------
// Checks over a written node root

fn crt(s: &Scratch, name: &str) -> PathBuf {
    s.pki(&format!("{name}.crt"))
}

fn key(s: &Scratch, name: &str) -> PathBuf {
    s.pki(&format!("{name}.key"))
}

/// Every check on one row of the certificate table.
fn check_cert(s: &Scratch, r: &Row, alg: Alg, ran: &Window, apiserver_sans: &Sans) {
    let cert = crt(s, r.name);
    let key_file = key(s, r.name);
    let what = cert.display().to_string();
    let is_ca = r.ca.is_none();

    // Chain: leaves verify against their CA for their purposes and against no other CA.
    match r.ca {
        None => verify(&cert, &cert, None).unwrap_or_else(|e| panic!("{what}: self-signed CA does not verify: {e}")),
        Some(ca) => {
            for purpose in r.eku.purposes() {
                verify(&crt(s, ca), &cert, Some(purpose))
                    .unwrap_or_else(|e| panic!("{what}: does not verify against {ca}.crt for {purpose}: {e}"));
            }
            for other in TABLE.iter().filter(|o| o.ca.is_none() && Some(o.name) != r.ca) {
                let other_crt = crt(s, other.name);
                if other_crt.exists() {
                    assert!(
                        verify(&other_crt, &cert, None).is_err(),
                        "{what}: unexpectedly verifies against {}.crt",
                        other.name
                    );
                }
            }
        }
    }

    assert_eq!(subject(&cert), expected_subject(r.cn, r.o), "{what}: subject");

    let ext = extensions(&cert);
    let ku = ext.get("Key Usage").unwrap_or_else(|| panic!("{what}: no Key Usage"));
    let want_ku = if is_ca {
        "Digital Signature, Key Encipherment, Certificate Sign"
    } else {
        "Digital Signature, Key Encipherment"
    };
    assert_eq!(ku.value, want_ku, "{what}: Key Usage");
    assert!(ku.critical, "{what}: Key Usage must be critical (as Go writes it)");

    let bc = ext.get("Basic Constraints").unwrap_or_else(|| panic!("{what}: no Basic Constraints"));
    assert_eq!(bc.value, if is_ca { "CA:TRUE" } else { "CA:FALSE" }, "{what}: Basic Constraints");
    assert!(bc.critical, "{what}: Basic Constraints must be critical");

    check_key_ids(&what, &ext, r.ca.map(|ca| crt(s, ca)).as_deref());

    let eku: Vec<String> =
        ext.get("Extended Key Usage").map(|e| e.value.split(", ").map(str::to_string).collect()).unwrap_or_default();
    assert_eq!(eku, r.eku.names(), "{what}: Extended Key Usage");

    let want_sans = match r.name {
        _ if is_ca => Some(sans_of(&[r.cn], &[])),
        "apiserver" => Some(apiserver_sans.clone()),
        "etcd/server" | "etcd/peer" => Some(etcd_sans()),
        _ => None,
    };
    let got_sans = ext.get("Subject Alternative Name").map(|e| parse_sans(&cert, &e.value));
    assert_eq!(got_sans, want_sans, "{what}: Subject Alternative Name");

    check_validity(&cert, if is_ca { CA_VALIDITY } else { LEAF_VALIDITY }, ran);
    check_key_type(&cert, alg);

    assert_eq!(key_pubkey(&key_file), cert_pubkey(&cert), "{what}: the private key does not match the certificate");
    assert_eq!(mode(&key_file), 0o600, "{}: mode", key_file.display());
    assert_eq!(mode(&cert), 0o644, "{what}: mode");
}

/// Go's x509.CreateCertificate, as kubeadm calls it: a CA gets a subjectKeyIdentifier and, being
/// self-signed, no authorityKeyIdentifier; a leaf (no SubjectKeyId in kubeadm's template, not a CA)
/// gets no subjectKeyIdentifier and an authorityKeyIdentifier equal to its CA's SKI.
fn check_key_ids(what: &str, ext: &BTreeMap<String, Ext>, ca: Option<&Path>) {
    let ski = ext.get("Subject Key Identifier");
    let aki = ext.get("Authority Key Identifier").map(|e| e.value.trim_start_matches("keyid:").to_string());
    match ca {
        None => {
            assert!(ski.is_some_and(|e| !e.value.is_empty() && !e.critical), "{what}: a CA has a subjectKeyIdentifier");
            assert_eq!(aki, None, "{what}: a self-signed CA has no authorityKeyIdentifier");
        }
        Some(ca) => {
            assert!(ski.is_none(), "{what}: kubeadm's leaves have no subjectKeyIdentifier");
            let ca_ski = extensions(ca).get("Subject Key Identifier").map(|e| e.value.clone());
            assert!(ca_ski.is_some(), "{}: no subjectKeyIdentifier", ca.display());
            assert_eq!(aki, ca_ski, "{what}: authorityKeyIdentifier is not the CA's subjectKeyIdentifier");
        }
    }
}

/// The table rows, the etcd ones only with local etcd; with external etcd they must be absent.
fn check_table(s: &Scratch, alg: Alg, ran: &Window, apiserver_sans: &Sans, local_etcd: bool) {
    for r in TABLE {
        if r.etcd_tree && !local_etcd {
            for f in [crt(s, r.name), key(s, r.name)] {
                assert!(!f.exists(), "{} must not be made with external etcd", f.display());
            }
            continue;
        }
        check_cert(s, r, alg, ran, apiserver_sans);
    }
}

/// sa.key / sa.pub: a key pair of the configured type; sa.pub is its PKIX public key.
fn check_sa(s: &Scratch, alg: Alg) {
    let sa_key = s.pki("sa.key");
    let sa_pub = s.pki("sa.pub");
    let public = std::fs::read_to_string(&sa_pub).expect("read sa.pub");
    assert!(public.starts_with("-----BEGIN PUBLIC KEY-----"), "sa.pub is not a PKIX PUBLIC KEY:\n{public}");
    assert_eq!(key_pubkey(&sa_key), public, "sa.pub is not sa.key's public key");
    let text = openssl(&["pkey", "-pubin", "-in", p(&sa_pub), "-noout", "-text"]);
    for want in alg.key_text() {
        assert!(text.contains(&want), "sa.pub: expected {want:?} in:\n{text}");
    }
    assert_eq!(mode(&sa_key), 0o600, "sa.key mode");
    // kubeadm writes sa.pub with keyutil.WriteKey: 0600, like the key.
    assert_eq!(mode(&sa_pub), 0o600, "sa.pub mode");
}

fn yaml_str<'a>(v: &'a serde_yaml::Value, path: &[&str], file: &str) -> &'a str {
    let mut cur = v;
    for k in path {
        cur = match k.parse::<usize>() {
            Ok(i) => &cur[i],
            Err(_) => &cur[*k],
        };
    }
    cur.as_str().unwrap_or_else(|| panic!("{file}: no string at {}", path.join(".")))
}

/// Decodes a base64 field of a kubeconfig into a file in the scratch dir.
fn decode_to(s: &Scratch, b64: &str, name: &str) -> PathBuf {
    let bytes = B64.decode(b64.trim()).expect("valid base64");
    let out = s.dir.path().join(name);
    std::fs::write(&out, bytes).expect("write decoded");
    out
}

/// The client certificate and key inside each kubeconfig.
fn check_kubeconfigs(s: &Scratch, alg: Alg, ran: &Window) {
    let ca = s.pki("ca.crt");
    for &(file, cn, o) in KUBECONFIGS {
        let path = s.path(&format!("/etc/kubernetes/{file}"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let v: serde_yaml::Value = serde_yaml::from_str(&text).expect("kubeconfig is YAML");
        let cert = decode_to(
            s,
            yaml_str(&v, &["users", "0", "user", "client-certificate-data"], file),
            &format!("{file}.crt"),
        );
        let key_file =
            decode_to(s, yaml_str(&v, &["users", "0", "user", "client-key-data"], file), &format!("{file}.key"));
        let ca_data = decode_to(
            s,
            yaml_str(&v, &["clusters", "0", "cluster", "certificate-authority-data"], file),
            &format!("{file}.ca.crt"),
        );
        assert_eq!(
            std::fs::read(&ca_data).unwrap(),
            std::fs::read(&ca).unwrap(),
            "{file}: certificate-authority-data is not ca.crt"
        );

        verify(&ca, &cert, Some("sslclient"))
            .unwrap_or_else(|e| panic!("{file}: client cert does not verify against ca.crt: {e}"));
        assert_eq!(subject(&cert), expected_subject(cn, o), "{file}: subject");
        let ext = extensions(&cert);
        check_key_ids(file, &ext, Some(&ca));
        assert_eq!(
            ext.get("Extended Key Usage").map(|e| e.value.as_str()),
            Some(CLIENT_AUTH),
            "{file}: Extended Key Usage"
        );
        assert_eq!(
            ext.get("Basic Constraints").map(|e| e.value.as_str()),
            Some("CA:FALSE"),
            "{file}: Basic Constraints"
        );
        check_validity(&cert, LEAF_VALIDITY, ran);
        check_key_type(&cert, alg);
        assert_eq!(
            key_pubkey(&key_file),
            cert_pubkey(&cert),
            "{file}: client-key-data does not match client-certificate-data"
        );
        assert_eq!(mode(&path), 0o600, "{file}: mode");
    }
}

/// `kubestrap certs ca-hash` against the kubeadm docs' pipeline (`openssl rsa` for RSA keys,
/// `openssl pkey` for EC keys, which `openssl rsa` cannot read).
fn openssl_pin(cert: &Path, alg: Alg) -> String {
    let tool = if alg.is_rsa() { "rsa" } else { "pkey" };
    let (code, out, err) = sh(&format!(
        "set -o pipefail; openssl x509 -pubkey -in '{}' | openssl {tool} -pubin -outform der 2>/dev/null | openssl dgst -sha256 -hex | sed 's/^.* //'",
        cert.display()
    ));
    assert_eq!(code, 0, "openssl pin pipeline failed: {err}");
    let hex = out.trim();
    assert_eq!(hex.len(), 64, "pipeline printed {out:?}");
    format!("sha256:{hex}")
}

fn check_ca_hash(s: &Scratch, alg: Alg) {
    let ca = s.pki("ca.crt");
    let want = openssl_pin(&ca, alg);
    assert_eq!(ca_hash(&ca), want, "ca-hash of ca.crt ({alg:?})");
    // Without a file, ca-hash reads <root>/etc/kubernetes/pki/ca.crt.
    assert_eq!(ca_hash_of_root(&s.root()), want, "ca-hash --root");
}

fn scratch_for(alg: Alg, extra: &str) -> Scratch {
    require_tool("openssl");
    Scratch::new(&format!("{BASE_CONFIG}{}{extra}", alg.config_line()))
}

/// Full `init`, then everything: the table, sa, the kubeconfigs' client certs, the pin.
fn full_init_check(alg: Alg) {
    need!(Need::tool("openssl"));
    let s = scratch_for(alg, "");
    let t0 = now();
    s.init(&[]).ok();
    let ran = Window(t0, now());
    check_table(&s, alg, &ran, &default_apiserver_sans(), true);
    check_sa(&s, alg);
    check_kubeconfigs(&s, alg, &ran);
    check_ca_hash(&s, alg);
}

/// Only `init phase certs`, then the table and sa.
fn certs_phase_check(alg: Alg, extra: &str, local_etcd: bool) {
    need!(Need::tool("openssl"));
    let s = scratch_for(alg, extra);
    let t0 = now();
    s.phase("certs").ok();
    let ran = Window(t0, now());
    check_table(&s, alg, &ran, &default_apiserver_sans(), local_etcd);
    check_sa(&s, alg);
    check_ca_hash(&s, alg);
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn default_ecdsa_p256_init_matches_kubeadm_table() {
    full_init_check(Alg::EcdsaP256);
}

#[test]
fn rsa_2048_init_matches_kubeadm_table() {
    full_init_check(Alg::Rsa(2048));
}

#[test]
fn apiserver_sans_include_control_plane_endpoint_and_cert_sans() {
    need!(Need::tool("openssl"));
    let alg = Alg::EcdsaP256;
    let s = scratch_for(
        alg,
        "controlPlaneEndpoint: lb.example.com:6443\napiServer: {certSANs: [1.2.3.4, extra.example.com]}\n",
    );
    let t0 = now();
    s.phase("certs").ok();
    let ran = Window(t0, now());
    let mut want = default_apiserver_sans();
    want.dns.extend(["lb.example.com".to_string(), "extra.example.com".to_string()]);
    want.dns.sort();
    want.ips.push("1.2.3.4".parse().unwrap());
    check_table(&s, alg, &ran, &want, true);
}

#[test]
fn ca_hash_matches_pin_test_vectors() {
    need!(Need::tool("openssl"));
    for (file, pin) in [
        ("pubkeypin-testCert.pem", "sha256:345959acb2c3b2feb87d281961c893f62a314207ef02599f1cc4a5fb255480b3"),
        ("pubkeypin-testCert2.pem", "sha256:d1ef16989563fe7775f81a7dc55ce16a467ca9baedae2d081cb0a068b6a81971"),
    ] {
        let path = fixture_path(file);
        assert_eq!(ca_hash(&path), pin, "{file}");
        // The vectors are RSA-2048: the docs' `openssl rsa` pipeline agrees.
        assert_eq!(openssl_pin(&path, Alg::Rsa(2048)), pin, "{file} via openssl");
    }
}

#[test]
fn ca_hash_of_a_non_certificate_fails_naming_the_file() {
    need!(Need::tool("openssl"));
    let s = Scratch::new(BASE_CONFIG);
    let text = s.dir.path().join("not-a-cert.txt");
    std::fs::write(&text, "hello, I am not a certificate\n").unwrap();
    let key_pem = s.dir.path().join("a-private-key.pem");
    openssl(&["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", p(&key_pem)]);
    for file in [&text, &key_pem] {
        let run = kubestrap(&["certs", "ca-hash", p(file)]);
        assert_ne!(run.code(), 0, "{}: ca-hash must fail", file.display());
        assert!(run.stderr().contains(p(file)), "the error must name {}:\n{}", file.display(), run.stderr());
        assert!(!run.stdout().contains("sha256:"), "no hash may be printed for {}: {}", file.display(), run.stdout());
    }
}

#[test]
fn ecdsa_p384_certs_phase() {
    certs_phase_check(Alg::EcdsaP384, "", true);
}

#[test]
fn rsa_3072_certs_phase() {
    certs_phase_check(Alg::Rsa(3072), "", true);
}

#[test]
fn rsa_4096_certs_phase_with_external_etcd() {
    certs_phase_check(Alg::Rsa(4096), EXTERNAL_ETCD, false);
}
