//! The `kubeconfig` phase: one kubeconfig per control-plane client, each with its own client
//! certificate signed by the cluster CA and the CA embedded.

use log::info;

use super::InitContext;
use crate::config::InitConfig;
use crate::constants::*;
use crate::error::{Error, Result};
use crate::kubeconfig::{self, Credentials, Kubeconfig};
use crate::pki::check::{self, CertFile, Expect};
use crate::pki::spec::{SanList, Usage};
use crate::pki::{self, Ca, issue, keys};

/// Which API endpoint a kubeconfig points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// controlPlaneEndpoint (or advertiseAddress when unset): clients outside the node.
    ControlPlane,
    /// This node's API server: components that must not depend on a load balancer.
    Local,
}

pub struct KubeconfigSpec {
    pub file: &'static str,
    /// Client certificate CN; `None` means `system:node:<nodeName>`.
    pub user: Option<&'static str>,
    pub orgs: &'static [&'static str],
    pub server: Server,
}

pub const KUBECONFIGS: &[KubeconfigSpec] = &[
    KubeconfigSpec {
        file: ADMIN_CONF,
        user: Some("kubernetes-admin"),
        orgs: &[CLUSTER_ADMINS_GROUP],
        server: Server::ControlPlane,
    },
    KubeconfigSpec {
        file: SUPER_ADMIN_CONF,
        user: Some("kubernetes-super-admin"),
        orgs: &[MASTERS_GROUP],
        server: Server::ControlPlane,
    },
    // kubeadm 1.33+ (GA 1.35, KEP-4471): the kubelet of a control plane talks to its own API server.
    KubeconfigSpec { file: KUBELET_CONF, user: None, orgs: &[NODES_GROUP], server: Server::Local },
    KubeconfigSpec {
        file: CONTROLLER_MANAGER_CONF,
        user: Some("system:kube-controller-manager"),
        orgs: &[],
        server: Server::Local,
    },
    KubeconfigSpec { file: SCHEDULER_CONF, user: Some("system:kube-scheduler"), orgs: &[], server: Server::Local },
];

impl KubeconfigSpec {
    pub(crate) fn user_name(&self, cfg: &InitConfig) -> String {
        self.user.map(str::to_string).unwrap_or_else(|| format!("{NODE_USER_PREFIX}{}", cfg.node_name))
    }
    pub(crate) fn server_url(&self, cfg: &InitConfig) -> String {
        match self.server {
            Server::ControlPlane => cfg.endpoint.url(),
            Server::Local => cfg.local_endpoint.url(),
        }
    }
}

pub fn run(ctx: &InitContext) -> Result<()> {
    write(ctx, &KUBECONFIGS.iter().map(|k| k.file).collect::<Vec<_>>())
}

/// Writes (or validates) the kubeconfigs named in `files` (a control-plane join writes three).
pub fn write(ctx: &InitContext, files: &[&str]) -> Result<()> {
    let cfg = &ctx.cfg;
    let specs: Vec<&KubeconfigSpec> = KUBECONFIGS.iter().filter(|k| files.contains(&k.file)).collect();
    let ca = pki::load_ca(ctx.node.fs, cfg.certs_dir(), "ca")?;
    let todo: Vec<&KubeconfigSpec> = specs.iter().copied().filter(|k| !ctx.node.fs.exists(path(k))).collect();
    if !todo.is_empty() && ca.key.is_none() {
        let files: Vec<String> = todo.iter().map(|k| path(k).to_string()).collect();
        return Err(Error::bad_file(format!(
            "external CA mode (ca.crt without ca.key): {} must be provided, kubestrap cannot sign them",
            files.join(", ")
        )));
    }
    ctx.keys.reserve(todo.len());
    for spec in specs {
        let file = path(spec);
        match ctx.node.fs.read(&file)? {
            Some(existing) => {
                validate_existing(file.as_str(), &existing, spec, cfg, &ca, ctx.start)?;
                info!("[kubeconfig] Using existing kubeconfig file: {:?}", file.as_str());
            }
            None => {
                let key = ctx.keys.take()?;
                let kc = render(spec, cfg, &ca, &key, ctx.start)?;
                info!("[kubeconfig] Writing {:?} kubeconfig file", spec.file);
                ctx.node.fs.write(&file, kc.to_yaml()?.as_bytes())?;
            }
        }
    }
    Ok(())
}

/// How many new keys this phase will make: one per kubeconfig file not on disk.
pub(crate) fn keys_needed(ctx: &InitContext) -> usize {
    KUBECONFIGS.iter().filter(|k| !ctx.node.fs.exists(path(k))).count()
}

fn path(spec: &KubeconfigSpec) -> crate::paths::File {
    crate::paths::kubeconfig(spec.file)
}

fn render(
    spec: &KubeconfigSpec,
    cfg: &InitConfig,
    ca: &Ca,
    key: &rcgen::KeyPair,
    start: time::OffsetDateTime,
) -> Result<Kubeconfig> {
    let user = spec.user_name(cfg);
    let req = issue::Request {
        cn: user.clone(),
        orgs: spec.orgs.iter().map(|s| s.to_string()).collect(),
        usage: Usage::Client,
        sans: SanList::default(),
        validity: cfg.cert_validity,
        start,
    };
    let ca_key = ca.key.as_ref().ok_or_else(|| Error::bad_file("the cluster CA key is missing"))?;
    let cert_pem = issue::signed(&req, key, &ca.cert.pem, ca_key)?;
    let creds = Credentials::Cert { cert_pem, key_pem: keys::to_pem(key) };
    Ok(kubeconfig::build(&cfg.cluster.cluster_name, &spec.server_url(cfg), ca.cert.pem.as_bytes(), &user, creds))
}

/// kubeadm reuses a kubeconfig only if it trusts our CA and points at the expected server;
/// we also insist that an embedded client certificate chains to the CA and has not expired.
fn validate_existing(
    file: &str,
    bytes: &[u8],
    spec: &KubeconfigSpec,
    cfg: &InitConfig,
    ca: &Ca,
    now: time::OffsetDateTime,
) -> Result<()> {
    let bad = |m: String| Error::bad_file(format!("{file} {m}; kubestrap will not overwrite it: fix or remove it"));
    let kc = Kubeconfig::parse(bytes).map_err(|m| bad(m.to_string()))?;
    let (cluster, user) = kc.current().map_err(|m| bad(m.to_string()))?;
    let their_ca = kubeconfig::decode_b64(&cluster.certificate_authority_data)
        .ok()
        .and_then(|b| CertFile::parse(&b).ok())
        .ok_or_else(|| bad("has no readable certificate-authority-data".into()))?;
    if their_ca.der != ca.cert.der {
        return Err(bad("trusts a different CA than ca.crt".into()));
    }
    let want = spec.server_url(cfg);
    if cluster.server != want {
        return Err(bad(format!("points at {} instead of {want}", cluster.server)));
    }
    if let Some(data) = user.map(|u| &u.client_certificate_data).filter(|d| !d.is_empty()) {
        let cert = kubeconfig::decode_b64(data)
            .ok()
            .and_then(|b| CertFile::parse(&b).ok())
            .ok_or_else(|| bad("has an unreadable client-certificate-data".into()))?;
        let sans = SanList::default();
        let key_spki = user
            .and_then(|u| kubeconfig::decode_b64(&u.client_key_data).ok())
            .and_then(|k| keys::parse_pem(&k).ok())
            .map(|k| keys::spki(&k));
        let Some(key_spki) = key_spki else {
            return Err(bad("has no readable client-key-data".into()));
        };
        let expect = Expect { usage: Usage::Client, sans: &sans, ca: Some(&ca.cert), key_spki: Some(&key_spki), now };
        check::check(&cert, &expect).map_err(|m| bad(format!("client certificate {m}")))?;
        let cn = cert
            .x509()
            .ok()
            .and_then(|x| x.subject().iter_common_name().next().and_then(|c| c.as_str().ok().map(str::to_string)));
        let user_name = spec.user_name(cfg);
        if cn.as_deref() != Some(user_name.as_str()) {
            return Err(bad(format!("authenticates as {:?} instead of {user_name:?}", cn.unwrap_or_default())));
        }
    }
    Ok(())
}
