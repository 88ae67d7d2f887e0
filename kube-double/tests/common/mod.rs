//! Shared test fixtures: a throwaway PKI made with rcgen, a server started
//! from it, and an HTTPS client (ureq, ring) that can present a client
//! certificate or a bearer token.

#![allow(dead_code)]

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use serde_json::{Value, json};
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;
use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsConfig, TlsProvider};

pub const BOOTSTRAP_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";

pub struct Pem {
    pub cert: String,
    pub key: String,
}

pub struct Pki {
    pub ca: Pem,
    pub serving: Pem,
    pub admin: Pem,
    pub node1: Pem,
    /// A client certificate from a CA the server does not trust.
    pub rogue: Pem,
}

fn dn(cn: &str, orgs: &[&str]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    for o in orgs {
        dn.push(DnType::OrganizationName, *o);
    }
    dn.push(DnType::CommonName, cn);
    dn
}

fn ca_params(cn: &str) -> CertificateParams {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name = dn(cn, &[]);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::CrlSign];
    p
}

fn leaf(issuer: &Issuer<'_, KeyPair>, cn: &str, orgs: &[&str], server: bool) -> Pem {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name = dn(cn, orgs);
    if server {
        p.subject_alt_names =
            vec![SanType::IpAddress("127.0.0.1".parse().unwrap()), SanType::DnsName("localhost".try_into().unwrap())];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    } else {
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    }
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    let cert = p.signed_by(&key, issuer).unwrap();
    // serialize_pem is PKCS#8 "PRIVATE KEY", the format kubestrap writes.
    Pem { cert: cert.pem(), key: key.serialize_pem() }
}

impl Pki {
    pub fn new() -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let ca_cert = ca_params("kubernetes").self_signed(&ca_key).unwrap();
        let ca = Pem { cert: ca_cert.pem(), key: ca_key.serialize_pem() };
        let issuer = Issuer::new(ca_params("kubernetes"), ca_key);
        let rogue_key = KeyPair::generate().unwrap();
        let rogue_issuer = Issuer::new(ca_params("rogue"), rogue_key);
        Pki {
            serving: leaf(&issuer, "kube-apiserver", &[], true),
            admin: leaf(&issuer, "admin", &["system:masters"], false),
            node1: leaf(&issuer, "system:node:n1", &["system:nodes"], false),
            rogue: leaf(&rogue_issuer, "admin", &["system:masters"], false),
            ca,
        }
    }

    /// Writes the kubeadm file layout (apiserver.crt/key, ca.crt/key).
    pub fn write_dir(&self, dir: &std::path::Path) {
        std::fs::write(dir.join("ca.crt"), &self.ca.cert).unwrap();
        std::fs::write(dir.join("ca.key"), &self.ca.key).unwrap();
        std::fs::write(dir.join("apiserver.crt"), &self.serving.cert).unwrap();
        std::fs::write(dir.join("apiserver.key"), &self.serving.key).unwrap();
    }

    pub fn config(&self) -> kube_double::Config {
        kube_double::Config {
            serving_cert_pem: self.serving.cert.clone(),
            serving_key_pem: self.serving.key.clone(),
            client_ca_pem: self.ca.cert.clone(),
            ca_key_pem: Some(self.ca.key.clone()),
            watch_timeout: Duration::from_secs(10),
            ..kube_double::Config::default()
        }
    }
}

pub struct Client {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
}

pub struct Resp {
    pub status: u16,
    pub body: Value,
}

impl Client {
    fn build(pki: &Pki, base: &str, cert: Option<&Pem>, token: Option<&str>) -> Client {
        let ca = Certificate::from_pem(pki.ca.cert.as_bytes()).unwrap();
        let client_cert = cert.map(|c| {
            ClientCert::new_with_certs(
                &[Certificate::from_pem(c.cert.as_bytes()).unwrap()],
                PrivateKey::from_pem(c.key.as_bytes()).unwrap(),
            )
        });
        let tls = TlsConfig::builder()
            .provider(TlsProvider::Rustls)
            .root_certs(RootCerts::Specific(Arc::new(vec![ca])))
            .client_cert(client_cert)
            .build();
        let agent = ureq::Agent::config_builder()
            .tls_config(tls)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        Client { agent, base: base.to_string(), token: token.map(str::to_string) }
    }

    pub fn anonymous(pki: &Pki, base: &str) -> Client {
        Self::build(pki, base, None, None)
    }

    pub fn cert(pki: &Pki, base: &str, cert: &Pem) -> Client {
        Self::build(pki, base, Some(cert), None)
    }

    pub fn token(pki: &Pki, base: &str, token: &str) -> Client {
        Self::build(pki, base, None, Some(token))
    }

    pub fn cert_and_token(pki: &Pki, base: &str, cert: &Pem, token: &str) -> Client {
        Self::build(pki, base, Some(cert), Some(token))
    }

    pub fn try_get(&self, path: &str) -> Result<u16, ureq::Error> {
        self.try_raw("GET", path, None).map(|r| r.status().as_u16())
    }

    pub fn raw(&self, method: &str, path: &str, body: Option<(&str, &Value)>) -> ureq::http::Response<ureq::Body> {
        self.try_raw(method, path, body).unwrap()
    }

    pub fn try_raw(
        &self,
        method: &str,
        path: &str,
        body: Option<(&str, &Value)>,
    ) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        let mut b = ureq::http::Request::builder().method(method).uri(format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            b = b.header("Authorization", format!("Bearer {t}"));
        }
        match body {
            Some((content_type, v)) => {
                let req = b.header("Content-Type", content_type).body(v.to_string()).unwrap();
                self.agent.run(req)
            }
            None => self.agent.run(b.body(()).unwrap()),
        }
    }

    pub fn call(&self, method: &str, path: &str, body: Option<(&str, &Value)>) -> Resp {
        let mut resp = self.raw(method, path, body);
        let status = resp.status().as_u16();
        let mut text = String::new();
        resp.body_mut().as_reader().read_to_string(&mut text).unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Resp { status, body }
    }

    pub fn get(&self, path: &str) -> Resp {
        self.call("GET", path, None)
    }

    pub fn post(&self, path: &str, body: &Value) -> Resp {
        self.call("POST", path, Some(("application/json", body)))
    }

    pub fn put(&self, path: &str, body: &Value) -> Resp {
        self.call("PUT", path, Some(("application/json", body)))
    }

    pub fn merge_patch(&self, path: &str, body: &Value) -> Resp {
        self.call("PATCH", path, Some(("application/merge-patch+json", body)))
    }

    pub fn delete(&self, path: &str) -> Resp {
        self.call("DELETE", path, None)
    }
}

pub fn b64(s: &str) -> String {
    STANDARD.encode(s)
}

pub fn unb64(s: &str) -> String {
    String::from_utf8(STANDARD.decode(s).unwrap()).unwrap()
}

/// A bootstrap-token Secret as kubeadm writes it.
pub fn token_secret(id: &str, secret: &str, expiration: Option<&str>, usages: &[&str]) -> Value {
    let mut data = json!({
        "token-id": b64(id),
        "token-secret": b64(secret),
        "auth-extra-groups": b64(BOOTSTRAP_GROUP),
    });
    if let Some(exp) = expiration {
        data["expiration"] = b64(exp).into();
    }
    for u in usages {
        data[format!("usage-bootstrap-{u}")] = b64("true").into();
    }
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("bootstrap-token-{id}"), "namespace": "kube-system"},
        "type": "bootstrap.kubernetes.io/token",
        "data": data,
    })
}

pub fn crb(name: &str, role: &str, subject_kind: &str, subject: &str) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": subject_kind, "apiGroup": "rbac.authorization.k8s.io", "name": subject}],
    })
}

/// The bindings kubeadm's bootstrap-token phase creates for TLS bootstrap.
pub fn kubeadm_csr_bindings(autoapprove: bool) -> Vec<Value> {
    let mut v = vec![crb("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", "Group", BOOTSTRAP_GROUP)];
    if autoapprove {
        v.push(crb(
            "kubeadm:node-autoapprove-bootstrap",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            "Group",
            BOOTSTRAP_GROUP,
        ));
        v.push(crb(
            "kubeadm:node-autoapprove-certificate-rotation",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            "Group",
            "system:nodes",
        ));
    }
    v
}

/// A kubelet-style client CSR object (PKCS#10 made with rcgen).
pub fn kubelet_csr(name: &str, cn: &str, orgs: &[&str], usages: &[&str]) -> Value {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name = dn(cn, orgs);
    let pem = p.serialize_request(&key).unwrap().pem().unwrap();
    json!({
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {
            "request": b64(&pem),
            "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
            "usages": usages,
            // Clients cannot choose these; the server must overwrite them.
            "username": "admin",
            "groups": ["system:masters"],
        },
    })
}

pub const USAGES3: &[&str] = &["digital signature", "key encipherment", "client auth"];
pub const USAGES2: &[&str] = &["digital signature", "client auth"];
pub const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

pub fn condition_types(csr: &Value) -> Vec<String> {
    csr["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["type"].as_str().unwrap().to_string())
        .collect()
}
