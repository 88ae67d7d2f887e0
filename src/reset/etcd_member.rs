//! reset's `remove-etcd-member`: on a control plane with a stacked etcd, remove this node's
//! member through the cluster's etcd, then empty the data directory (emptied even when the
//! removal failed, as kubeadm does, so a stale member never starts again). No etcd manifest:
//! a worker or external etcd, nothing to remove. The member is found by this node's peer URL
//! (`--initial-advertise-peer-urls` in the local manifest); etcd is reached at this member's
//! client URL and the others' (from `--initial-cluster`), so no API server is needed.

use std::path::Path;

use super::{ResetArgs, ResetEnv, cleanup, say};
use crate::error::Result;
use crate::etcd::{APISERVER_ETCD_CLIENT, Client, Credentials, EtcdError, Member};
use crate::fsutil::NodeFs;
use crate::paths;
use crate::retry::{Attempt, Retry};

/// What the reset needs from the etcd cluster.
pub trait EtcdMembers {
    fn member_list(&self) -> Result<Vec<Member>, EtcdError>;
    fn member_remove(&self, id: u64) -> Result<Vec<Member>, EtcdError>;
}

impl EtcdMembers for Client {
    fn member_list(&self) -> Result<Vec<Member>, EtcdError> {
        Client::member_list(self)
    }
    fn member_remove(&self, id: u64) -> Result<Vec<Member>, EtcdError> {
        Client::member_remove(self, id)
    }
}

/// Opens a client to the cluster's etcd at these client URLs with the node's etcd client files.
pub trait EtcdConnect {
    fn connect(&self, fs: &NodeFs, certs_dir: &str, endpoints: &[String]) -> Result<Box<dyn EtcdMembers>, EtcdError>;
}

/// The real cluster, with the API server's etcd client certificate (as kubeadm's reset).
pub struct RealEtcd;

impl EtcdConnect for RealEtcd {
    fn connect(&self, fs: &NodeFs, certs_dir: &str, endpoints: &[String]) -> Result<Box<dyn EtcdMembers>, EtcdError> {
        let creds = Credentials::load(fs, certs_dir, APISERVER_ETCD_CLIENT)?;
        Ok(Box::new(Client::new(endpoints, &creds)?))
    }
}

/// This node's etcd member, from its static Pod manifest.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LocalEtcd {
    pub name: String,
    pub peer_url: String,
    /// The other members' client URLs (their peer hosts on 2379), then this member's.
    pub endpoints: Vec<String>,
    /// The host path of the `etcd-data` volume.
    pub data_dir: String,
}

/// Reads the local etcd manifest; `Ok(None)` when there is none, an error text when it cannot
/// be read as an etcd Pod.
pub(crate) fn local_etcd(fs: &NodeFs) -> std::result::Result<Option<LocalEtcd>, String> {
    let file = paths::manifest("etcd");
    let bytes = match fs.read(&file) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let pod: serde_yaml::Value = serde_yaml::from_slice(&bytes).map_err(|e| format!("{file}: {e}"))?;
    let command: Vec<String> = pod["spec"]["containers"][0]["command"]
        .as_sequence()
        .map(|c| c.iter().filter_map(|a| a.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let flag = |n: &str| crate::manifests::pod::flag_value(&command, n).map(str::to_string);
    let data_dir = pod["spec"]["volumes"]
        .as_sequence()
        .and_then(|v| v.iter().find(|v| v["name"].as_str() == Some("etcd-data")))
        .and_then(|v| v["hostPath"]["path"].as_str())
        .map(str::to_string)
        .ok_or_else(|| format!("{file}: invalid etcd pod manifest (no etcd-data hostPath volume)"))?;
    let peer_url = flag("initial-advertise-peer-urls")
        .and_then(|u| u.split(',').next().map(str::to_string))
        .ok_or_else(|| format!("{file}: no --initial-advertise-peer-urls"))?;
    // The other members first: a member asked to remove itself may stop before it answers.
    let mut endpoints: Vec<String> = Vec::new();
    for (_, url) in flag("initial-cluster").unwrap_or_default().split(',').filter_map(|m| m.split_once('=')) {
        // kubeadm's GetClientURL: every stacked member serves clients on 2379.
        let Some((host, _port)) = url.rsplit_once(':') else { continue };
        let client = format!("{host}:{}", crate::constants::ETCD_CLIENT_PORT);
        if url != peer_url && !endpoints.contains(&client) {
            endpoints.push(client);
        }
    }
    for own in flag("advertise-client-urls").unwrap_or_default().split(',').filter(|u| !u.is_empty()) {
        if !endpoints.iter().any(|e| e == own) {
            endpoints.push(own.to_string());
        }
    }
    Ok(Some(LocalEtcd { name: flag("name").unwrap_or_default(), peer_url, endpoints, data_dir }))
}

pub(crate) fn run(fs: &NodeFs, args: &ResetArgs, env: &mut ResetEnv<'_>) -> Result<()> {
    let local = match local_etcd(fs) {
        Ok(Some(l)) => l,
        Ok(None) => {
            say(
                env,
                "[reset] No etcd manifest found: not a stacked etcd member (a worker, or external etcd); no etcd member to remove",
            )?;
            say(env, "[reset] With an external etcd, please manually reset etcd to prevent further issues")?;
            return empty_data_dir(fs, args, env, paths::ETCD_DATA_DIR);
        }
        Err(e) => {
            log::warn!("[reset] {e}");
            say(env, "[reset] No etcd config found. Assuming external etcd")?;
            say(env, "[reset] Please, manually reset etcd to prevent further issues")?;
            return Ok(());
        }
    };
    if args.dry_run {
        say(env, "[reset] Would remove the etcd member on this node from the etcd cluster")?;
        return say(env, &format!("[reset] Would delete contents of the etcd data directory: {}", local.data_dir));
    }
    match remove_member(fs, args, env, &local) {
        Ok(()) => {}
        Err(e) => log::warn!(
            "[reset] Failed to remove etcd member: {e}, please manually remove this etcd member using etcdctl \
             (member {}, peer URL {})",
            local.name,
            local.peer_url
        ),
    }
    empty_data_dir(fs, args, env, &local.data_dir)
}

/// What the removal found.
enum Removal {
    Removed(Vec<Member>),
    /// Not (or no longer) in the member list.
    Absent,
    /// The last member of its cluster: kubeadm leaves it.
    OnlyMember,
}

fn remove_member(fs: &NodeFs, args: &ResetArgs, env: &mut ResetEnv<'_>, local: &LocalEtcd) -> Result<(), EtcdError> {
    let mut client = env.etcd.connect(fs, &args.cert_dir, &local.endpoints)?;
    // A member asked to remove itself may stop before it answers (the removal went through,
    // unseen, and every retry to it fails until the timeout), and the manifest's members may be
    // gone (the first control plane's names none; a rolling replacement removed the others):
    // the others' client URLs come from the member list, as kubeadm's client syncs its
    // endpoints with it.
    let mut listed = client.member_list().ok();
    if let Some(endpoints) = listed.as_deref().and_then(|m| others_first(m, local)) {
        client = env.etcd.connect(fs, &args.cert_dir, &endpoints)?;
        listed = None;
    }
    // etcd refuses a removal that would leave the cluster unhealthy (a member connected for
    // less than 5 s, no leader): wait on what time can fix, as kubeadm's client retries.
    let retry = Retry {
        what: "removing this node's etcd member",
        tag: "reset",
        timeout: crate::timeouts::ETCD_API_CALL,
        backoff: &crate::timeouts::ETCD_API_CALL_RETRY,
        clock: env.clock,
    };
    let wait_or_fail = |e: EtcdError| if e.is_transient() { Attempt::Wait(e.to_string()) } else { Attempt::Fail(e) };
    let outcome = retry.run(|| {
        let members = match listed.take().map_or_else(|| client.member_list(), Ok) {
            Ok(m) => m,
            Err(e) => return wait_or_fail(e),
        };
        let Some(me) = members.iter().find(|m| m.has_peer_url(&local.peer_url)) else {
            return Attempt::Done(Removal::Absent);
        };
        if members.len() == 1 {
            return Attempt::Done(Removal::OnlyMember);
        }
        log::info!("[etcd] removing etcd member: {}, id: {:x}", local.peer_url, me.id);
        match client.member_remove(me.id) {
            Ok(after) => Attempt::Done(Removal::Removed(after)),
            // Our own earlier attempt went through but its answer was lost.
            Err(e) if e.is_member_not_found() => Attempt::Done(Removal::Absent),
            Err(e) => wait_or_fail(e),
        }
    })?;
    match outcome {
        Removal::Removed(after) => {
            let names: Vec<&str> = after.iter().map(|m| m.name.as_str()).collect();
            let line = format!(
                "[reset] Removed etcd member {} ({}); members now: {}",
                local.name,
                local.peer_url,
                names.join(", ")
            );
            let _ = say(env, &line);
        }
        Removal::Absent => {
            log::info!("[reset] {} is not a member of the etcd cluster (already removed)", local.peer_url)
        }
        Removal::OnlyMember => {
            log::info!("[etcd] This is the only remaining etcd member in the etcd cluster, skip removing it")
        }
    }
    Ok(())
}

/// The other members' client URLs, then this member's (the list's, else the manifest's), when
/// they differ from `local`'s endpoints: members the manifest names but the list lacks are gone.
fn others_first(members: &[Member], local: &LocalEtcd) -> Option<Vec<String>> {
    let (mine, others): (Vec<&Member>, Vec<&Member>) = members.iter().partition(|m| m.has_peer_url(&local.peer_url));
    let mut endpoints: Vec<String> = Vec::new();
    for url in others.iter().flat_map(|m| m.client_urls.iter()) {
        if !endpoints.contains(url) {
            endpoints.push(url.clone());
        }
    }
    if endpoints.is_empty() {
        // No other member advertises a client URL: nothing better to go by.
        return None;
    }
    let own: Vec<&String> = mine.iter().flat_map(|m| m.client_urls.iter()).collect();
    let own = if own.is_empty() { local.endpoints.last().into_iter().collect() } else { own };
    for url in own {
        if !endpoints.contains(url) {
            endpoints.push(url.clone());
        }
    }
    (endpoints != local.endpoints).then_some(endpoints)
}

/// Empties the etcd data directory when it holds anything.
fn empty_data_dir(fs: &NodeFs, args: &ResetArgs, env: &mut ResetEnv<'_>, dir: &str) -> Result<()> {
    let real = fs.real(dir);
    let empty = std::fs::read_dir(&real).map_or(true, |mut d| d.next().is_none());
    if empty || args.dry_run {
        return Ok(());
    }
    let left = cleanup::empty_dir(&real, &cleanup::mount_points(env.host), Path::new(dir));
    cleanup::warn_left(&left, dir);
    say(env, &format!("[reset] Deleted contents of the etcd data directory: {dir}"))
}
