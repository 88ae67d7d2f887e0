//! rustls server configuration: the given serving certificate, and optional
//! client certificates verified against the client CA (like the real
//! server's `--client-ca-file`, where a certificate is never required).

use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::io;
use std::sync::Arc;

fn invalid(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{what}: {e}"))
}

pub fn parse_certs(pem: &str, what: &str) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs =
        CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<Vec<_>, _>>().map_err(|e| invalid(what, e))?;
    if certs.is_empty() {
        return Err(invalid(what, "no CERTIFICATE block"));
    }
    Ok(certs)
}

pub fn server_config(cert_pem: &str, key_pem: &str, client_ca_pem: &str) -> io::Result<Arc<ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = parse_certs(cert_pem, "serving certificate")?;
    // Accepts PKCS#8, PKCS#1 and SEC1 blocks alike.
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| invalid("serving key", e))?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in parse_certs(client_ca_pem, "client CA")? {
        roots.add(ca).map_err(|e| invalid("client CA", e))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| invalid("client verifier", e))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("TLS versions", e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| invalid("serving certificate/key", e))?;
    // Only HTTP/1.1 is spoken; advertising it makes ALPN clients that
    // prefer h2 (Go's client, curl) fall back instead of failing.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
