//! One control plane at a time: the Lease `kube-system/kubestrap-upgrade` (coordination.k8s.io/v1),
//! held by the node that upgrades, renewed while it works, deleted when it is done. As client-go's
//! leader election judges it: another's lease is expired only once this node has seen the same
//! record, unchanged, for `leaseDurationSeconds` of its own monotonic time (never by comparing the
//! holder's `renewTime` with this node's clock, which a skew of a minute breaks); a holder whose
//! renewals have failed for `RENEW_DEADLINE`, or that finds another holder, has lost it and stops
//! before its next component ([`fence`]). Its own next boot takes it back at once. Writes carry the
//! resourceVersion read, so two nodes that race for an expired lease cannot both win, and the
//! release deletes only the record it read, never a successor's.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::kube::Client;

const PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kubestrap-upgrade";
const COLLECTION: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
/// How long a holder that stopped renewing keeps the lease. Longer than any wait of a roll
/// (timeouts.upgradeManifests, 5m): the holder's own API server, where the lease lives, is down
/// while it restarts on its new manifest, and its renewals fail meanwhile.
pub const DURATION: Duration = Duration::from_secs(360);
/// How often the holder renews it.
pub const RENEW: Duration = Duration::from_secs(15);
/// How long the holder goes on without a renewal before it counts the lease lost (client-go's
/// renew deadline: inside `DURATION`, so it stops before another node may take it; as long as a
/// component's own wait, which fails the roll first).
pub const RENEW_DEADLINE: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_secs(2);

/// The lease this process holds, for the fence: who, when it was last renewed, whether lost.
struct Held {
    me: String,
    renewed: Instant,
    lost: Option<String>,
}
static HELD: Mutex<Option<Held>> = Mutex::new(None);

fn held() -> std::sync::MutexGuard<'static, Option<Held>> {
    // A poisoned lock only means a thread panicked mid-update; the state is still one of ours.
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// Before each step that changes the cluster: Err if this process held the lease and lost it (a
/// renewal missed past `RENEW_DEADLINE`, or another holder). Ok when no lease is held here (a
/// person's `upgrade apply` at a shell takes none, as kubeadm's).
pub fn fence(what: &str) -> Result<()> {
    let h = held();
    let Some(h) = h.as_ref() else { return Ok(()) };
    let why = match &h.lost {
        Some(w) => w.clone(),
        None if h.renewed.elapsed() > RENEW_DEADLINE => {
            format!(
                "it was last renewed {}s ago (deadline {}s)",
                h.renewed.elapsed().as_secs(),
                RENEW_DEADLINE.as_secs()
            )
        }
        None => return Ok(()),
    };
    Err(Error::cluster(format!(
        "{} no longer holds the Lease kube-system/kubestrap-upgrade ({why}): stopping before {what}, so that two \
         control planes never upgrade at once; the next boot resumes",
        h.me
    )))
}

/// What this node has seen of another's lease: the record (its resourceVersion) and since when.
#[derive(Debug, Default)]
pub struct Observed {
    record: String,
    since: Option<Instant>,
}

fn micro_time(t: OffsetDateTime) -> String {
    let f = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");
    t.to_offset(time::UtcOffset::UTC).format(&f).unwrap_or_default()
}

fn lease(holder: &str, acquired: &str, now: OffsetDateTime, resource_version: Option<&str>) -> Value {
    let mut meta = json!({ "name": "kubestrap-upgrade", "namespace": "kube-system" });
    if let Some(rv) = resource_version {
        meta["resourceVersion"] = json!(rv);
    }
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": meta,
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": DURATION.as_secs(),
            "acquireTime": acquired,
            "renewTime": micro_time(now),
        }
    })
}

/// Who holds a live lease other than `me` (None: free, expired, or mine). Live until this node
/// has seen the same record for its `leaseDurationSeconds` on its own clock (`seen` remembers the
/// record and when it was first seen; a new record starts the count again).
fn other_holder(l: &Value, me: &str, seen: &mut Observed, now: Instant) -> Option<String> {
    let holder = l["spec"]["holderIdentity"].as_str().unwrap_or_default();
    if holder.is_empty() || holder == me {
        return None;
    }
    let record = match l["metadata"]["resourceVersion"].as_str() {
        Some(rv) => rv.to_string(),
        None => l["spec"].to_string(),
    };
    if seen.record != record || seen.since.is_none() {
        *seen = Observed { record, since: Some(now) };
    }
    let secs = l["spec"]["leaseDurationSeconds"].as_u64().unwrap_or(DURATION.as_secs());
    let since = seen.since.unwrap_or(now);
    (now.saturating_duration_since(since) < Duration::from_secs(secs)).then(|| holder.to_string())
}

/// One try: Ok(None) taken, Ok(Some(holder)) held by another. `now` is only written down
/// (acquireTime, renewTime, for people reading the Lease); expiry is judged on `seen`.
fn try_take(client: &Client, me: &str, now: OffsetDateTime, seen: &mut Observed) -> Result<Option<String>> {
    let err = |e: crate::kube::ApiError| Error::cluster(format!("the Lease kube-system/kubestrap-upgrade: {e}"));
    match client.get(PATH).map_err(err)? {
        None => {
            let (code, body) = client
                .request("POST", COLLECTION, Some(("application/json", &lease(me, &micro_time(now), now, None))))
                .map_err(err)?;
            match code {
                200 | 201 => Ok(None),
                409 => Ok(Some("another node (it was just created)".into())),
                _ => Err(Error::cluster(format!(
                    "creating the Lease kube-system/kubestrap-upgrade: HTTP {code}: {body}"
                ))),
            }
        }
        Some(l) => {
            if let Some(h) = other_holder(&l, me, seen, Instant::now()) {
                return Ok(Some(h));
            }
            let rv = l["metadata"]["resourceVersion"].as_str();
            let acquired = match l["spec"]["holderIdentity"].as_str() {
                Some(h) if h == me => l["spec"]["acquireTime"].as_str().unwrap_or_default().to_string(),
                _ => micro_time(now),
            };
            let (code, body) =
                client.request("PUT", PATH, Some(("application/json", &lease(me, &acquired, now, rv)))).map_err(err)?;
            match code {
                200 | 201 => Ok(None),
                409 => Ok(Some("another node (it took it first)".into())),
                _ => {
                    Err(Error::cluster(format!("taking the Lease kube-system/kubestrap-upgrade: HTTP {code}: {body}")))
                }
            }
        }
    }
}

/// Takes the lease, waiting (bounded) while another node holds it; `waiting` hears each new
/// holder.
pub fn acquire(client: &Client, me: &str, clock: &dyn Clock, wait: Duration, waiting: &dyn Fn(&str)) -> Result<()> {
    let deadline = clock.now() + wait;
    let mut said = String::new();
    let mut seen = Observed::default();
    loop {
        match try_take(client, me, clock.wall(), &mut seen) {
            Ok(None) => {
                *held() = Some(Held { me: me.to_string(), renewed: Instant::now(), lost: None });
                return Ok(());
            }
            Ok(Some(holder)) => {
                if holder != said {
                    waiting(&format!("{holder} holds kube-system/kubestrap-upgrade: it is upgrading; waiting for it"));
                    said = holder;
                }
            }
            Err(e) => {
                let m = e.to_string();
                if m != said {
                    waiting(&m);
                    said = m;
                }
            }
        }
        if clock.now() >= deadline {
            return Err(Error::cluster(format!(
                "waited {}s for the Lease kube-system/kubestrap-upgrade ({said}); the next boot tries again",
                wait.as_secs()
            )));
        }
        clock.sleep(POLL, "the upgrade lease");
    }
}

/// Renews the lease every [`RENEW`] until `done` is set (run on a thread of its own). Another
/// holder found at a renewal means the lease was lost: renewals stop and [`fence`] says so.
pub fn keep(client: &Client, me: &str, done: &AtomicBool) {
    let mut last = Instant::now();
    while !done.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(200));
        if last.elapsed() < RENEW {
            continue;
        }
        last = Instant::now();
        // A fresh observation: any other holder is live to it, and means ours is gone.
        match try_take(client, me, OffsetDateTime::now_utc(), &mut Observed::default()) {
            Ok(None) => {
                if let Some(h) = held().as_mut() {
                    h.renewed = Instant::now();
                }
            }
            Ok(Some(other)) => {
                log::warn!("[upgrade] the Lease kube-system/kubestrap-upgrade is held by {other} now: stopping");
                if let Some(h) = held().as_mut() {
                    h.lost = Some(format!("{other} holds it"));
                }
                return;
            }
            Err(e) => log::warn!("[upgrade] renewing the Lease kube-system/kubestrap-upgrade: {e}"),
        }
    }
}

/// Gives the lease up: deletes the record read, if it is ours, with that resourceVersion as a
/// precondition (a successor's newer record is never deleted).
pub fn release(client: &Client, me: &str) {
    *held() = None;
    let Ok(Some(l)) = client.get(PATH) else { return };
    if l["spec"]["holderIdentity"].as_str() != Some(me) {
        return;
    }
    let rv = l["metadata"]["resourceVersion"].clone();
    let options = json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"resourceVersion": rv}});
    match client.request("DELETE", PATH, Some(("application/json", &options))) {
        Ok((200 | 202 | 404 | 409, _)) => {}
        Ok((code, body)) => {
            log::warn!("[upgrade] deleting the Lease kube-system/kubestrap-upgrade: HTTP {code}: {body}")
        }
        Err(e) => log::warn!("[upgrade] deleting the Lease kube-system/kubestrap-upgrade: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_expires_by_what_this_node_saw_never_by_the_holders_clock() {
        let wall = OffsetDateTime::now_utc();
        let t0 = Instant::now();
        let mut seen = Observed::default();
        // Renewed "90 s ago" by a holder whose clock is 90 s behind: still live when first seen.
        let skewed = lease("cp-2", &micro_time(wall), wall - time::Duration::seconds(90), Some("7"));
        assert_eq!(other_holder(&skewed, "cp-1", &mut seen, t0).as_deref(), Some("cp-2"));
        assert_eq!(other_holder(&skewed, "cp-2", &mut Observed::default(), t0), None, "mine");
        // The same record a second before its duration: live; at it: expired.
        let d = DURATION.as_secs();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(other_holder(&skewed, "cp-1", &mut seen, at(d - 1)).as_deref(), Some("cp-2"));
        assert_eq!(other_holder(&skewed, "cp-1", &mut seen, at(d)), None, "expired");
        // A renewal (a new resourceVersion), even stamped 90 s in the future, starts the count again.
        let mut seen = Observed::default();
        assert!(other_holder(&skewed, "cp-1", &mut seen, t0).is_some());
        let renewed = lease("cp-2", &micro_time(wall), wall + time::Duration::seconds(90), Some("8"));
        assert!(other_holder(&renewed, "cp-1", &mut seen, at(50)).is_some());
        assert!(other_holder(&renewed, "cp-1", &mut seen, at(50 + d - 1)).is_some(), "counted from the new record");
        assert!(other_holder(&renewed, "cp-1", &mut seen, at(50 + d)).is_none());
        assert!(micro_time(wall).ends_with('Z') && micro_time(wall).len() == 27, "{}", micro_time(wall));
    }

    #[test]
    fn the_fence_stops_a_holder_that_lost_its_lease_or_missed_its_renewals() {
        *held() = None;
        assert!(fence("etcd").is_ok(), "no lease held here: a person's upgrade apply");
        *held() = Some(Held { me: "cp-1".into(), renewed: Instant::now(), lost: None });
        assert!(fence("etcd").is_ok());
        held().as_mut().unwrap().renewed = Instant::now() - RENEW_DEADLINE - Duration::from_secs(1);
        let e = fence("kube-apiserver").unwrap_err().to_string();
        assert!(e.contains("cp-1 no longer holds") && e.contains("stopping before kube-apiserver"), "{e}");
        *held() = Some(Held { me: "cp-1".into(), renewed: Instant::now(), lost: Some("cp-3 holds it".into()) });
        assert!(fence("upload-config").unwrap_err().to_string().contains("cp-3 holds it"));
        *held() = None;
    }
}
