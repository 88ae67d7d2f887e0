//! init's kubelet-finalize phase (kubeadm 1.37's `enable-client-cert-rotation`): once the kubelet
//! has stored its client certificate in its rotating pair, kubelet.conf names that pair instead
//! of embedding init's certificate, so the kubelet's own rotation keeps the node's identity alive
//! past a year; then the kubelet restarts to read it.

use log::{debug, info};

use super::InitContext;
use crate::error::{Error, Result};
use crate::kubeconfig::Kubeconfig;
use crate::paths::{KUBELET_CONF, KUBELET_PKI_DIR};

pub fn enable_client_cert_rotation(ctx: &InitContext) -> Result<()> {
    let fs = &ctx.node.fs;
    // kubeletExtraArgs' --cert-dir, as kubeadm reads it, else the kubelet's default.
    let extra = &ctx.cfg.init.node_registration.kubelet_extra_args;
    let dir = crate::manifests::pod::last_arg(extra, "cert-dir").unwrap_or(KUBELET_PKI_DIR);
    let pem = format!("{}/kubelet-client-current.pem", dir.trim_end_matches('/'));
    if fs.read_following_link(&pem)?.is_none() {
        debug!("[kubelet-finalize] Assuming that kubelet client certificate rotation is disabled: no {pem}");
        return Ok(());
    }
    let conf = KUBELET_CONF;
    let path = conf.as_str();
    info!("[kubelet-finalize] Updating {path:?} to point to a rotatable kubelet client certificate and key");
    let bytes =
        fs.read(path)?.ok_or_else(|| Error::bad_file(format!("{path} is missing: run the kubeconfig phase")))?;
    let mut kc = Kubeconfig::parse(&bytes).map_err(|e| Error::bad_file(format!("{path}: {e}")))?;
    point_at(&mut kc, &pem).map_err(|e| Error::bad_file(format!("{path}: {e}")))?;
    let yaml = kc.to_yaml().map_err(|e| Error::internal(format!("{path}: {e}")))?;
    fs.write(&KUBELET_CONF, yaml.as_bytes())?;
    fs.commit()?;
    if ctx.node.live {
        crate::systemd::restart_kubelet();
    }
    Ok(())
}

/// The current context's user takes its certificate and key from `pem` (one file holds both);
/// the rest of the file (names, server, CA) stays as init wrote it, as with kubeadm.
fn point_at(kc: &mut Kubeconfig, pem: &str) -> std::result::Result<(), String> {
    let ctx = kc.contexts.iter().find(|c| c.name == kc.current_context);
    let user = ctx.map(|c| c.context.user.clone()).filter(|u| !u.is_empty()).ok_or_else(|| {
        format!(
            "the current context {:?} is missing or names no user; run the kubeconfig phase again",
            kc.current_context
        )
    })?;
    let u = kc
        .users
        .iter_mut()
        .find(|u| u.name == user)
        .ok_or_else(|| format!("no credentials for the user {user:?}; run the kubeconfig phase again"))?;
    u.user.client_certificate_data.clear();
    u.user.client_key_data.clear();
    u.user.client_certificate = pem.into();
    u.user.client_key = pem.into();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubeconfig::{Credentials, build};

    #[test]
    fn keeps_the_names_and_swaps_the_embedded_pair_for_the_rotating_file() {
        let creds = Credentials::Cert { cert_pem: "CERT".into(), key_pem: "KEY".into() };
        let mut kc = build("kubernetes", "https://10.0.0.1:6443", b"CA", "system:node:cp-1", creds);
        let before = kc.clone();
        point_at(&mut kc, "/var/lib/kubelet/pki/kubelet-client-current.pem").unwrap();
        let u = &kc.users[0].user;
        assert_eq!((u.client_certificate_data.as_str(), u.client_key_data.as_str()), ("", ""));
        assert_eq!(u.client_certificate, "/var/lib/kubelet/pki/kubelet-client-current.pem");
        assert_eq!(u.client_key, u.client_certificate);
        assert_eq!(
            (&kc.clusters, &kc.contexts, &kc.current_context),
            (&before.clusters, &before.contexts, &before.current_context)
        );
        let text = kc.to_yaml().unwrap();
        assert!(text.contains("client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem"), "{text}");
        assert!(!text.contains("client-certificate-data"), "{text}");
    }

    #[test]
    fn a_kubeconfig_without_its_user_is_named_not_rewritten() {
        let mut kc = build("kubernetes", "https://x:6443", b"CA", "system:node:cp-1", Credentials::Token("t".into()));
        kc.users.clear();
        let e = point_at(&mut kc, "/p.pem").unwrap_err();
        assert!(e.contains("system:node:cp-1"), "{e}");
        kc.current_context = "gone".into();
        assert!(point_at(&mut kc, "/p.pem").unwrap_err().contains("\"gone\""));
    }
}
