//! A stacked etcd member joining an existing cluster, as kubeadm's etcd join does it with
//! learners: add this node as a learner, (the caller writes the etcd manifest with the returned
//! `--initial-cluster` and the kubelet starts etcd), promote it once it has caught up, and wait
//! until every member answers. Each step is safe to rerun after a kill: the add finds a member
//! with our peer URL and reuses it, the promote of a voter does nothing. Concurrent joins
//! serialize on etcd's one-learner limit: "too many learner members" is waited out.

use std::fmt;
use std::net::IpAddr;

use log::info;

use super::client::{Client, Credentials, Member};
use super::error::EtcdError;
use crate::clock::Clock;
use crate::constants::{ETCD_CLIENT_PORT, ETCD_PEER_PORT};
use crate::retry::{Attempt, Retry};
use crate::timeouts::{ETCD_API_CALL, ETCD_API_CALL_RETRY, ETCD_WAIT_AVAILABLE, ETCD_WAIT_AVAILABLE_RETRY};

/// kubeadm's GetPeerURL: `https://<advertise address>:2380`.
pub fn peer_url(advertise: IpAddr) -> String {
    format!("https://{}:{ETCD_PEER_PORT}", url_host(advertise))
}

/// kubeadm's GetClientURL: `https://<advertise address>:2379`.
pub fn client_url(advertise: IpAddr) -> String {
    format!("https://{}:{ETCD_CLIENT_PORT}", url_host(advertise))
}

fn url_host(ip: IpAddr) -> String {
    if ip.is_ipv6() { format!("[{ip}]") } else { ip.to_string() }
}

/// This node as an etcd member: its name (the node name), peer URL and client URL.
#[derive(Debug, Clone)]
pub struct NewMember {
    pub name: String,
    pub peer_url: String,
    pub client_url: String,
}

impl NewMember {
    /// The member kubeadm makes of a control-plane node: name and advertise address.
    pub(crate) fn for_node(name: &str, advertise: IpAddr) -> NewMember {
        NewMember { name: name.to_string(), peer_url: peer_url(advertise), client_url: client_url(advertise) }
    }

    fn check(&self) -> Result<(), EtcdError> {
        let bad = |why| Err(EtcdError::BadPeerUrl { url: self.peer_url.clone(), why });
        let Some(rest) = self.peer_url.strip_prefix("https://").or_else(|| self.peer_url.strip_prefix("http://"))
        else {
            return bad("it must start with https:// (or http://)");
        };
        if rest.is_empty() || rest.starts_with(':') || rest.contains(['/', ',', ' ']) {
            return bad("it must be scheme://host:port with nothing after the port");
        }
        Ok(())
    }
}

/// `--initial-cluster`: name=peerURL pairs in the order etcd listed the members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialCluster(pub Vec<(String, String)>);

impl fmt::Display for InitialCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pairs: Vec<String> = self.0.iter().map(|(n, u)| format!("{n}={u}")).collect();
        f.write_str(&pairs.join(","))
    }
}

/// kubeadm's naming: our member gets our name, a member that has not started yet (no name) its
/// ID in hex, every other member its own name; each with its first peer URL.
pub fn initial_cluster(members: &[Member], me: &NewMember) -> InitialCluster {
    InitialCluster(
        members
            .iter()
            .map(|m| {
                let name = if m.has_peer_url(&me.peer_url) {
                    me.name.clone()
                } else if m.name.is_empty() {
                    format!("{:x}", m.id)
                } else {
                    m.name.clone()
                };
                let url = if m.has_peer_url(&me.peer_url) {
                    me.peer_url.clone()
                } else {
                    m.peer_urls.first().cloned().unwrap_or_default()
                };
                (name, url)
            })
            .filter(|(_, url)| !url.is_empty())
            .collect(),
    )
}

/// What the learner add left: our member and the flag value for the etcd manifest.
#[derive(Debug, Clone)]
pub struct Announced {
    pub member_id: u64,
    pub initial_cluster: InitialCluster,
    /// The member was already there (an earlier, interrupted run): nothing was added.
    pub reused: bool,
}

fn etcd_retry<'a>(what: &'a str, client: &Client, clock: &'a dyn Clock) -> Retry<'a> {
    Retry { what, tag: "etcd", timeout: client.call_timeout(), backoff: &ETCD_API_CALL_RETRY, clock }
}

/// Wait on what time can fix, stop on what it cannot.
fn wait_or_fail<T>(e: EtcdError) -> Attempt<T, EtcdError> {
    if e.is_transient() { Attempt::Wait(e.to_string()) } else { Attempt::Fail(e) }
}

/// kubeadm's NewFromCluster after the endpoints are known: a client for `endpoints` (from the
/// etcd Pods' annotations), then the endpoints replaced by the member list's client URLs,
/// retried every 500 ms for up to kubeadm's default `etcdAPICall` (2 m).
pub fn connect(endpoints: &[String], creds: &Credentials, clock: &dyn Clock) -> Result<Client, EtcdError> {
    connect_recording(endpoints, creds, None, ETCD_API_CALL, clock)
}

/// [`connect`]; with a recorder (a dry run), every call goes to it instead of etcd.
pub fn connect_recording(
    endpoints: &[String],
    creds: &Credentials,
    record: Option<crate::kube::Recorder>,
    call_timeout: std::time::Duration,
    clock: &dyn Clock,
) -> Result<Client, EtcdError> {
    if endpoints.is_empty() {
        return Err(EtcdError::NoEndpoints { why: "the etcd Pods gave none".into() });
    }
    let client = Client::new(endpoints, creds)?.with_call_timeout(call_timeout);
    let client = match record {
        Some(r) => client.recording(r),
        None => client,
    };
    let synced =
        etcd_retry("syncing the etcd endpoints with the member list", &client, clock).run(|| match client.sync() {
            Ok(eps) => Attempt::Done(eps),
            Err(e) => wait_or_fail(e),
        })?;
    info!("[etcd] etcd endpoints from the member list: {}", synced.join(","));
    Ok(client)
}

/// Adds this node as a learner, or finds it already added (by its peer URL; a started member
/// there must carry our name, else another node's member holds the address). Retried every
/// 500 ms for up to the client's `etcdAPICall` (2 m by default): while another node's learner
/// is in the cluster etcd refuses a second one ("too many learner members"), and a leader
/// election or a member down is waited out.
/// Our client URL joins the client's endpoints, as kubeadm does.
pub fn add_as_learner(client: &Client, me: &NewMember, clock: &dyn Clock) -> Result<Announced, EtcdError> {
    me.check()?;
    let (member, members, reused) = etcd_retry("adding this node as an etcd learner", client, clock).run(|| {
        // Listing first makes a rerun find the member an interrupted run added.
        let members = match client.member_list() {
            Ok(m) => m,
            Err(e) => return wait_or_fail(e),
        };
        if let Some(m) = members.iter().find(|m| m.has_peer_url(&me.peer_url)) {
            if m.is_started() && m.name != me.name {
                let taken = EtcdError::PeerUrlTaken { peer_url: me.peer_url.clone(), name: m.name.clone(), id: m.id };
                return Attempt::Fail(taken);
            }
            return Attempt::Done((m.clone(), members.clone(), true));
        }
        match client.member_add(std::slice::from_ref(&me.peer_url), true) {
            Ok((m, members)) => Attempt::Done((m, members, false)),
            // Added meanwhile (our own earlier attempt whose answer was lost): the list finds it.
            Err(e) if e.is_already_member() => Attempt::Wait(e.to_string()),
            Err(e) if e.is_too_many_learners() => {
                Attempt::Wait(format!("{e}; another member is joining, waiting for it to be promoted"))
            }
            Err(e) => wait_or_fail(e),
        }
    })?;
    if reused {
        let state = if member.is_learner { "learner" } else { "voting member" };
        let started = if member.is_started() { "started" } else { "not started yet" };
        info!(
            "[etcd] etcd member {:x} with peer URL {} already exists ({state}, {started}): an earlier run added it; reusing it",
            member.id, me.peer_url
        );
    } else {
        info!("[etcd] Announced new etcd member joining to the existing etcd cluster");
    }
    client.add_endpoint(&me.client_url);
    Ok(Announced { member_id: member.id, initial_cluster: initial_cluster(&members, me), reused })
}

/// Promotes our learner to a voting member once it is in sync with the leader; does nothing
/// for a voter. Retried every 500 ms for up to the client's `etcdAPICall` (etcd refuses to
/// promote a learner that has not caught up). Returns whether this call promoted it.
pub fn promote(client: &Client, peer_url: &str, clock: &dyn Clock) -> Result<bool, EtcdError> {
    let mut promoted = false;
    etcd_retry("promoting this node's etcd learner to a voting member", client, clock).run(|| {
        let members = match client.member_list() {
            Ok(m) => m,
            Err(e) => return wait_or_fail(e),
        };
        let Some(me) = members.iter().find(|m| m.has_peer_url(peer_url)) else {
            return Attempt::Fail(EtcdError::NotAMember { peer_url: peer_url.to_string() });
        };
        if !me.is_learner {
            return Attempt::Done(());
        }
        match client.member_promote(me.id) {
            Ok(_) => {
                promoted = true;
                Attempt::Done(())
            }
            Err(e) if e.is_learner_not_ready() => Attempt::Wait(format!("{e}; the learner is still catching up")),
            // Promoted meanwhile: the next list says so.
            Err(e) if e.is_not_learner() => Attempt::Wait(e.to_string()),
            Err(e) => wait_or_fail(e),
        }
    })?;
    if promoted {
        info!("[etcd] The learner was promoted as a voting member ({peer_url})");
    } else {
        info!("[etcd] The etcd member {peer_url} is already a voting member");
    }
    Ok(promoted)
}

/// kubeadm's WaitForClusterAvailable(8, 5s): a quorum of the endpoints (ours included) answers
/// `Status` (kubeadm 1.37, k/k#138403; before, every endpoint had to, and one slow or stopped
/// member held up every join).
pub fn wait_available(client: &Client, clock: &dyn Clock) -> Result<(), EtcdError> {
    info!("[etcd] Waiting for the new etcd member to join the cluster. This can take up to 40s");
    let retry = Retry {
        what: "waiting for a quorum of the etcd members to be available",
        tag: "etcd",
        timeout: ETCD_WAIT_AVAILABLE,
        backoff: &ETCD_WAIT_AVAILABLE_RETRY,
        clock,
    };
    retry.run(|| {
        let endpoints = client.endpoints();
        let (mut healthy, mut last, mut unwell) = (0, None, Vec::new());
        for ep in &endpoints {
            match client.status(ep) {
                Ok(s) if s.errors.is_empty() => healthy += 1,
                Ok(s) => unwell.push(format!("member {ep} is not healthy: {}", s.errors.join(","))),
                Err(e) => last = Some(e),
            }
        }
        match last {
            _ if healthy > endpoints.len() / 2 => Attempt::Done(()),
            Some(e) => wait_or_fail(e),
            None if unwell.is_empty() => Attempt::Wait("no etcd endpoint to ask".into()),
            None => Attempt::Wait(unwell.join("; ")),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: u64, name: &str, peer: &str, learner: bool) -> Member {
        Member { id, name: name.into(), peer_urls: vec![peer.into()], client_urls: Vec::new(), is_learner: learner }
    }

    #[test]
    fn initial_cluster_follows_kubeadm_naming_and_etcd_order() {
        // ha-capi-facts §A3: cp-2 (10.0.0.12) joining cp-1 (10.0.0.11).
        let me = NewMember::for_node("cp-2", "10.0.0.12".parse().unwrap());
        assert_eq!(
            (me.peer_url.as_str(), me.client_url.as_str()),
            ("https://10.0.0.12:2380", "https://10.0.0.12:2379")
        );
        let members = [m(1, "cp-1", "https://10.0.0.11:2380", false), m(2, "", "https://10.0.0.12:2380", true)];
        assert_eq!(
            initial_cluster(&members, &me).to_string(),
            "cp-1=https://10.0.0.11:2380,cp-2=https://10.0.0.12:2380"
        );
        // etcd's order is kept (not sorted); a member not started yet is named by its hex ID.
        let members = [
            m(2, "", "https://10.0.0.12:2380", true),
            m(0xce09a5c6f9b2c1f, "", "https://10.0.0.13:2380", false),
            m(1, "cp-1", "https://10.0.0.11:2380", false),
        ];
        assert_eq!(
            initial_cluster(&members, &me).to_string(),
            "cp-2=https://10.0.0.12:2380,ce09a5c6f9b2c1f=https://10.0.0.13:2380,cp-1=https://10.0.0.11:2380"
        );
        let v6 = NewMember::for_node("cp-3", "fd00::13".parse().unwrap());
        assert_eq!(v6.peer_url, "https://[fd00::13]:2380");
    }

    #[test]
    fn peer_urls_are_checked_before_anything_is_sent() {
        let bad = |u: &str| NewMember { name: "n".into(), peer_url: u.into(), client_url: String::new() }.check();
        assert!(bad("https://10.0.0.12:2380").is_ok());
        let e = bad("10.0.0.12:2380").unwrap_err();
        assert_eq!(e.to_string(), "invalid etcd peer URL \"10.0.0.12:2380\": it must start with https:// (or http://)");
        assert!(bad("https://a:2380,https://b:2380").is_err());
        assert!(bad("https://").is_err());
    }
}
