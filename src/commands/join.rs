//! `kubestrap join [phase NAME] [ENDPOINT] [flags]`: flags and/or a JoinConfiguration → the
//! library's join phases.

use std::path::PathBuf;

use log::warn;

use crate::cli;
use crate::clock::SystemClock;
use crate::config::Reads;
use crate::config::types::JoinConfiguration;
use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::join::{JoinContext, JoinFlags};
use crate::node::Node;
use crate::phases::{self, JOIN_PHASES};

/// The positional words: `phase NAME` first if present, then the endpoint.
struct Words {
    phase: Option<String>,
    endpoint: Option<String>,
}

fn words(w: &[String]) -> Result<Words> {
    let (phase, rest) = phases::phase_words(w, JOIN_PHASES, "join")?;
    match rest {
        [] => Ok(Words { phase, endpoint: None }),
        [e] => Ok(Words { phase, endpoint: Some(e.clone()) }),
        // Never echo the words: a mistyped flag may carry a token.
        _ => Err(Error::bad_flag(format!(
            "join takes at most one endpoint (HOST:PORT) but was given {} positional arguments",
            rest.len()
        ))),
    }
}

pub fn run(j: cli::Join) -> Result<()> {
    check_flags(&j)?;
    let w = words(&j.words)?;
    let skip = cli::split_all(&j.skip_phases);
    phases::check_skip(JOIN_PHASES, "join", &skip)?;
    let selected = w.phase.as_deref().map(|n| phases::lookup_all(JOIN_PHASES, "join", n)).transpose()?;
    let jc = match &j.config {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| Error::bad_config(format!("reading config {}: {e}", p.display())))?;
            let docs = crate::config::parse_documents_for(&p.display().to_string(), &text, Reads::Join)?;
            for w in &docs.warnings {
                warn!("[config] WARNING: {w}");
            }
            docs.join.ok_or_else(|| Error::bad_config(format!("{}: no JoinConfiguration document", p.display())))?
        }
        None => JoinConfiguration::default(),
    };
    let endpoint = match (&j.config, w.endpoint) {
        (Some(_), Some(_)) => {
            // kubeadm reads the endpoint from the file and drops the argument.
            warn!(
                "[preflight] WARNING: the API server endpoint argument is ignored with --config; the JoinConfiguration's discovery is used"
            );
            None
        }
        (_, e) => e,
    };
    let dry_run = j.dry_run || jc.dry_run;
    let flags = flags(j, endpoint)?;
    let args = crate::join::resolve(&flags, &jc)?;
    if dry_run {
        let selected: Vec<_> = match selected {
            Some(list) => list,
            None => JOIN_PHASES.iter().filter(|p| !phases::is_skipped(&skip, p.name)).collect(),
        };
        let fs = NodeFs::dry_run(&flags.root);
        let names: Vec<&str> = selected.iter().map(|p| p.name).collect();
        let run_phase =
            |ctx: &JoinContext, name: &str| phases::run_join_phase(ctx, phases::lookup(JOIN_PHASES, "join", name)?);
        return super::print_json(&crate::join::dry_run::run(args, &fs, &names, &run_phase)?);
    }
    let fs = NodeFs::new(&flags.root);
    let _lock = fs.lock()?;
    let ctx = JoinContext::on(&args, Node::new(&fs, &SystemClock, None));
    match selected {
        Some(list) => list.into_iter().try_for_each(|p| phases::run_join_phase(&ctx, p)),
        None => {
            phases::run_join(&ctx, &skip)?;
            if args.control_plane.is_some() {
                let etcd_added = !phases::is_skipped(&skip, "etcd-join") && fs.exists(crate::paths::manifest("etcd"));
                print!("{}", crate::join::control_plane::done_message(etcd_added));
            }
            Ok(())
        }
    }
}

/// The flag combinations kubeadm refuses (ValidateMixedArguments), and the control-plane
/// flags, which kubestrap does not act on yet.
fn check_flags(j: &cli::Join) -> Result<()> {
    if j.config.is_some() {
        let mixed = crate::config::flags::mixed_with_config([
            ("apiserver-advertise-address", j.apiserver_advertise_address.is_some()),
            ("apiserver-bind-port", j.apiserver_bind_port.is_some()),
            ("certificate-key", j.certificate_key.is_some()),
            ("control-plane", j.control_plane),
            ("cri-socket", j.cri_socket.is_some()),
            ("discovery-file", j.discovery_file.is_some()),
            ("discovery-token", j.discovery_token.is_some()),
            ("discovery-token-ca-cert-hash", !j.discovery_token_ca_cert_hash.is_empty()),
            ("discovery-token-unsafe-skip-ca-verification", j.discovery_token_unsafe_skip_ca_verification),
            ("patches", j.patches.is_some()),
            ("tls-bootstrap-token", j.tls_bootstrap_token.is_some()),
            ("token", j.token.is_some()),
        ]);
        if let Some(m) = crate::config::flags::mixed_error(&mixed) {
            return Err(Error::bad_flag(m));
        }
    }
    let cp_flags =
        j.apiserver_advertise_address.is_some() || j.apiserver_bind_port.is_some() || j.certificate_key.is_some();
    if cp_flags && !j.control_plane {
        warn!(
            "[preflight] WARNING: --control-plane is also required when passing control-plane related flags such as [certificate-key, apiserver-advertise-address, apiserver-bind-port]"
        );
    }
    Ok(())
}

fn flags(j: cli::Join, endpoint: Option<String>) -> Result<JoinFlags> {
    let discovery_timeout = j
        .discovery_timeout
        .as_deref()
        .map(|s| {
            crate::config::values::parse_duration(s).map_err(|m| Error::bad_flag(format!("--discovery-timeout: {m}")))
        })
        .transpose()?;
    Ok(JoinFlags {
        endpoint,
        token: j.token,
        discovery_token: j.discovery_token,
        tls_bootstrap_token: j.tls_bootstrap_token,
        discovery_token_ca_cert_hash: cli::split_all(&j.discovery_token_ca_cert_hash),
        discovery_token_unsafe_skip_ca_verification: j.discovery_token_unsafe_skip_ca_verification,
        discovery_file: j.discovery_file,
        control_plane: j.control_plane,
        certificate_key: j.certificate_key,
        apiserver_advertise_address: j.apiserver_advertise_address,
        apiserver_bind_port: j.apiserver_bind_port,
        discovery_timeout,
        node_name: j.node_name,
        cri_socket: j.cri_socket,
        patches: j.patches,
        ignore_preflight_errors: cli::split_all(&j.ignore_preflight_errors),
        root: PathBuf::from(&j.root),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_words_and_endpoint() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let w = words(&v(&["phase", "discovery", "10.0.0.1:6443"])).unwrap();
        assert_eq!((w.phase.as_deref(), w.endpoint.as_deref()), (Some("discovery"), Some("10.0.0.1:6443")));
        let w = words(&v(&["10.0.0.1:6443"])).unwrap();
        assert_eq!((w.phase, w.endpoint.as_deref()), (None, Some("10.0.0.1:6443")));
        assert!(words(&v(&["phase"])).is_err());
        let e = words(&v(&["a:1", "abcdef.0123456789abcdef"])).err().unwrap();
        assert!(!e.message.contains("0123456789abcdef"), "{}", e.message);
    }
}
