//! The `upload-certs` phase (after upload-config, as kubeadm): the shared CAs and sa pair, sealed
//! under the certificate key, in the `kubeadm-certs` Secret, owned by a 2 h proxy token, plus the
//! Role/RoleBinding that lets a joining control plane's bootstrap token read it.

use log::info;

use super::InitContext;
use crate::config::types::BootstrapToken;
use crate::config::values::CertificateKey;
use crate::error::{Error, Result};
use crate::kube::Created;
use crate::objects;
use crate::paths::GENERATED_CERTIFICATE_KEY;
use crate::pki::copycerts;

/// `--upload-certs`, `--certificate-key`, `--skip-certificate-key-print`.
#[derive(Debug, Default, Clone)]
pub struct UploadCerts {
    pub enabled: bool,
    /// `--certificate-key` (`init phase upload-certs` only: init's flag is in the config).
    pub certificate_key: Option<CertificateKey>,
    pub skip_key_print: bool,
}

/// The key to seal with: `--certificate-key`, else InitConfiguration.certificateKey, else one
/// generated once and kept (0600) so a rerun and show-join-command use the same one.
pub(super) fn certificate_key(ctx: &InitContext) -> Result<CertificateKey> {
    if let Some(k) = ctx.upload.certificate_key.as_ref().or(ctx.cfg.certificate_key.as_ref()) {
        return Ok(k.clone());
    }
    if let Some(b) = ctx.node.fs.read(&GENERATED_CERTIFICATE_KEY)?
        && let Ok(k) = CertificateKey::parse(&String::from_utf8_lossy(&b))
    {
        return Ok(k);
    }
    let k = CertificateKey::generate()?;
    ctx.node.fs.write(&GENERATED_CERTIFICATE_KEY, k.to_hex().as_bytes())?;
    ctx.node.fs.commit()?;
    Ok(k)
}

pub fn run(ctx: &InitContext) -> Result<()> {
    if !ctx.upload.enabled {
        info!("[upload-certs] Skipping phase. Please see --upload-certs");
        return Ok(());
    }
    let key = ctx.certificate_key()?;
    let client = ctx.admin()?;
    let mut entries = Vec::new();
    for t in copycerts::files_to_transfer(&ctx.cfg) {
        // A file that does not exist travels as an empty value, as with kubeadm.
        let blob = match ctx.node.fs.read(&t.path)? {
            Some(bytes) => key.seal(&bytes)?,
            None => Vec::new(),
        };
        entries.push((t.key, blob));
    }
    let proxy = BootstrapToken {
        token: crate::token::generate()?,
        description: copycerts::PROXY_TOKEN_DESCRIPTION.into(),
        ttl: Some(copycerts::PROXY_TOKEN_TTL.into()),
        expires: None,
        usages: Vec::new(),
        groups: Vec::new(),
    };
    let token_secret = objects::tokens::token_secret(&proxy, time::OffsetDateTime::now_utc())?;
    let owner = token_secret["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let uid = match client.create(&token_secret)? {
        Created::New(obj) => obj["metadata"]["uid"].as_str().map(str::to_string),
        Created::Exists => None,
    }
    .ok_or_else(|| Error::cluster(format!("the API server returned no uid for Secret kube-system/{owner}")))?;
    info!("[upload-certs] Storing the certificates in Secret \"kubeadm-certs\" in the \"kube-system\" Namespace");
    ctx.apply(client, "upload-certs", &objects::kubeadm_certs::secret(&entries, &owner, &uid))?;
    for o in objects::rbac::kubeadm_certs_rbac() {
        ctx.apply(client, "upload-certs", &o)?;
    }
    if ctx.dry_run_api.is_some() {
        // stdout carries the JSON plan; the key itself is never logged.
        info!("[dry-run] Would print the certificate key");
    } else if !ctx.upload.skip_key_print {
        // stdout, as kubeadm: the operator asked for it; it is never logged.
        println!("[upload-certs] Using certificate key:\n{}", key.to_hex());
    }
    Ok(())
}
