//! `#cloud-config` that runs kubeadm (Cluster API's bootstrap data, homelab user-data): the
//! `bootcmd`, `write_files` and `runcmd` kubestrap performs as cloud-init would, with the one
//! `kubeadm init|join` in runcmd done by kubestrap itself. Every other top-level key is reported
//! as ignored.

use serde_yaml::{Mapping, Value};

use super::runcmd::{self, Entry};
use super::script::Script;
use super::{Format, Notices, Parsed, Shape, kubeadm_cmd, write_files};
use crate::config::ConfigError;

/// The keys kubestrap performs.
const PERFORMED: &[&str] = &["bootcmd", "write_files", "runcmd"];

/// The node's kubeadm documents, role and the script around them, or None when runcmd runs no
/// `kubeadm init|join` (then this is not user-data kubestrap can bootstrap from, and the
/// notices raised reading runcmd are dropped).
pub(super) fn read(src: &str, top: &Mapping, notices: &mut Notices) -> Result<Option<Parsed>, ConfigError> {
    let get = |k: &str| top.get(k).unwrap_or(&Value::Null);
    let mut local = Notices::default();
    let entries = runcmd::parse(src, "runcmd", get("runcmd"), &mut local)?;
    let Some(at) = entries.iter().position(|e| matches!(e, Entry::Kubeadm { .. })) else {
        return Ok(None);
    };
    if let Some(second) = entries.iter().skip(at + 1).position(|e| matches!(e, Entry::Kubeadm { .. })) {
        return Err(ConfigError::doc(
            src,
            "#cloud-config",
            &format!("runcmd[{}]", at + 1 + second),
            "runs kubeadm init/join a second time; a node inits or joins once".into(),
        ));
    }
    notices.append(&mut local);
    for k in top.keys() {
        match k.as_str() {
            Some(name) if PERFORMED.contains(&name) => {}
            Some(name) => notices.push(format!(
                "{src}: cloud-config key {name:?} ignored: kubestrap performs only {}",
                PERFORMED.join(", ")
            )),
            None => notices.push(format!("{src}: non-string cloud-config key ignored")),
        }
    }
    let files = write_files::parse(src, get("write_files"), notices)?;
    let bootcmd = runcmd::parse(src, "bootcmd", get("bootcmd"), notices)?
        .into_iter()
        .flat_map(|e| match e {
            Entry::Commands(c) => c,
            Entry::Kubeadm { .. } => Vec::new(),
        })
        .collect();
    let mut script = Script { bootcmd, ..Default::default() };
    let mut role_docs = None;
    for e in entries {
        match e {
            Entry::Commands(c) if role_docs.is_none() => script.before.extend(c),
            Entry::Commands(c) => script.after.extend(c),
            Entry::Kubeadm { origin, argv, before, after } => {
                script.before.extend(before);
                script.after.extend(after);
                script.kubeadm =
                    format!("{origin}: {}", crate::token::replace_tokens(&argv.join(" "), "<token hidden>"));
                role_docs = Some(kubeadm_cmd::documents(src, Format::CloudInit, &origin, &argv, &files, notices)?);
            }
        }
    }
    script.files = files;
    Ok(role_docs.map(|(role, docs)| Parsed { docs, shape: Shape::Kubeadm { role, script } }))
}
