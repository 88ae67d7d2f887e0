//! Never two clusters: before a node told to init does so at first boot, it asks the
//! controlPlaneEndpoint whether a cluster already answers there. None: init. One whose CA the
//! user-data pins: join it as a control plane. Any other: stop, saying why.
//!
//! The init node's CA may come as the `kubestrap.ca-crt` / `kubestrap.ca-key` credentials, so
//! shared user-data can pin it before any node has booted.

use std::time::Duration;

use log::info;

use crate::config::InitConfig;
use crate::config::types::JoinConfiguration;
use crate::datasource::{CRED_CA_CRT, CRED_CA_KEY, Gathered};
use crate::discovery::{CLUSTER_INFO, CaPin};
use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::kube::{ApiError, Auth, Client, Trust};
use crate::paths;

/// What answers at the endpoint.
#[derive(Debug)]
pub enum Answer {
    /// No API server: nothing listens, the name does not resolve, or no TLS/HTTP answer.
    Nothing(String),
    /// A cluster: cluster-info read anonymously, with its CA certificates' pins.
    Cluster(Vec<CaPin>),
    /// An API server that will not show its cluster-info.
    Unreadable(String),
}

/// Asks `host:port` for cluster-info, once (the CA is checked against the pins by the caller;
/// a join then verifies it properly).
pub fn probe(endpoint: &str, timeout: Duration) -> Answer {
    let base = format!("https://{endpoint}");
    let c = match Client::new(&base, Trust::InsecureForDiscovery, Auth::Anonymous, timeout) {
        Ok(c) => c,
        Err(e) => return Answer::Nothing(e.to_string()),
    };
    match c.get(CLUSTER_INFO) {
        Ok(Some(cm)) => match crate::discovery::cluster_info_pins(&cm) {
            Ok(pins) => Answer::Cluster(pins),
            Err(e) => Answer::Unreadable(e.to_string()),
        },
        Ok(None) => Answer::Unreadable("it has no kube-public/cluster-info".into()),
        // A Kubernetes Status is an API server refusing us; other HTTP errors (a load balancer
        // with no backend yet) are no cluster.
        Err(ApiError::Status { code, reason, message, .. }) if !reason.is_empty() || !message.is_empty() => {
            Answer::Unreadable(format!("reading cluster-info anonymously: HTTP {code} {reason} {message}"))
        }
        Err(e) => Answer::Nothing(e.to_string()),
    }
}

/// The pins a control-plane join of this cluster would accept.
fn pins(join: &JoinConfiguration) -> Vec<CaPin> {
    let hashes = join.discovery.bootstrap_token.as_ref().map(|bt| bt.ca_cert_hashes.clone()).unwrap_or_default();
    hashes.iter().filter_map(|h| CaPin::parse(h).ok()).collect()
}

/// Init or join? `Some(join)` when a cluster this user-data pins already answers at the
/// endpoint. Called at first boot before init writes anything; a resumed init is not asked
/// again (its own API server may be what answers).
pub fn decide(
    fs: &NodeFs,
    cfg: &InitConfig,
    join: Option<&JoinConfiguration>,
    timeout: Duration,
) -> Result<Option<JoinConfiguration>> {
    if cfg.cluster.control_plane_endpoint.is_empty() || fs.exists(&paths::INIT_IN_PROGRESS) {
        return Ok(None);
    }
    let ep = &cfg.cluster.control_plane_endpoint;
    let pins = join.map(pins).unwrap_or_default();
    match probe(ep, timeout) {
        Answer::Nothing(why) => {
            info!("[init] No cluster answers at controlPlaneEndpoint {ep} ({why}): initializing one");
            Ok(None)
        }
        Answer::Unreadable(why) => Err(Error::other_cluster(format!(
            "an API server already answers at controlPlaneEndpoint {ep}, but {why}; refusing to initialize a second \
                 cluster there. Check controlPlaneEndpoint, or join that cluster"
        ))),
        Answer::Cluster(found) => {
            let pin = found.iter().map(CaPin::to_string).collect::<Vec<_>>().join(", ");
            match join {
                Some(j) if found.iter().any(|p| pins.contains(p)) => {
                    info!(
                        "[init] A cluster with CA {pin} already answers at {ep}: joining it as a control plane instead of \
                     initializing a second cluster"
                    );
                    Ok(Some(j.clone()))
                }
                _ if !pins.is_empty() => Err(Error::other_cluster(format!(
                    "a cluster with CA {pin} already answers at controlPlaneEndpoint {ep}, and caCertHashes does not pin \
                     that CA: refusing to initialize a second cluster there or to join a foreign one. Check \
                     controlPlaneEndpoint and caCertHashes"
                ))),
                _ => Err(Error::other_cluster(format!(
                    "a cluster with CA {pin} already answers at controlPlaneEndpoint {ep}: refusing to initialize a \
                     second one. To add this machine to it as a control plane, give the user-data its token, \
                     caCertHashes and certificateKey (docs/user-data.md, \"One user-data for the control plane\")"
                ))),
            }
        }
    }
}

/// Puts the `kubestrap.ca-crt`/`kubestrap.ca-key` credentials where init's certs phase reuses
/// them, and checks that the init node's CA is one the user-data pins (else the other nodes
/// would refuse the cluster it makes).
pub(crate) fn prepare_ca(fs: &NodeFs, g: &Gathered, cfg: &InitConfig, join: Option<&JoinConfiguration>) -> Result<()> {
    let dir = cfg.certs_dir();
    let (crt, key) = (paths::cert(dir, "ca"), paths::key(dir, "ca"));
    match (g.credentials.get(CRED_CA_CRT), g.credentials.get(CRED_CA_KEY)) {
        (None, None) => {}
        (Some(c), Some(k)) => {
            let pin = crate::pki::ca_hash(c)
                .map_err(|e| Error::bad_config(format!("credential {CRED_CA_CRT}: not a CA certificate: {e}")))?;
            match fs.read(&crt)? {
                Some(on_disk) if on_disk != *c => {
                    return Err(Error::bad_file(format!(
                        "{crt} already holds a CA other than credential {CRED_CA_CRT} ({pin}); remove one of them"
                    )));
                }
                Some(_) => {}
                None => {
                    fs.write(&crt, c)?;
                    fs.write(&key, k)?;
                    fs.commit()?;
                    info!("[certs] Using the CA from credential {CRED_CA_CRT} ({pin})");
                }
            }
        }
        _ => {
            return Err(Error::bad_config(format!(
                "credentials {CRED_CA_CRT} and {CRED_CA_KEY} go together: give both (the CA certificate and its key) or neither"
            )));
        }
    }
    let pins = join.map(pins).unwrap_or_default();
    if pins.is_empty() {
        return Ok(());
    }
    let Some(pem) = fs.read(&crt)? else {
        return Err(Error::bad_config(format!(
            "caCertHashes pins the cluster CA, but this init node has no CA at {crt} to init with (a generated one \
             would not match): give it as the {CRED_CA_CRT} and {CRED_CA_KEY} credentials, or in write_files"
        )));
    };
    let pin = crate::pki::ca_hash(&pem).map_err(|e| Error::bad_file(format!("{crt}: {e}")))?;
    if !pins.iter().any(|p| p.to_string() == pin) {
        return Err(Error::bad_config(format!(
            "the CA at {crt} ({pin}) is not one caCertHashes pins: the other control planes and workers would refuse \
             this cluster; fix caCertHashes or the CA"
        )));
    }
    Ok(())
}
