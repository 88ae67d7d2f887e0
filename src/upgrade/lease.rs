//! One control plane at a time: the Lease `kube-system/kubestrap-upgrade` (coordination.k8s.io/v1),
//! held by the node that upgrades, renewed while it works, deleted when it is done. A holder
//! that stopped renewing (a power cut) loses it once `leaseDurationSeconds` have passed; its own
//! next boot takes it back at once. Writes carry the resourceVersion read, so two nodes that
//! race for an expired lease cannot both win.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::kube::Client;

const PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kubestrap-upgrade";
const COLLECTION: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
/// How long a holder that stopped renewing keeps the lease.
pub const DURATION: Duration = Duration::from_secs(60);
/// How often the holder renews it.
pub const RENEW: Duration = Duration::from_secs(15);
const POLL: Duration = Duration::from_secs(2);

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

/// Who holds a live lease other than `me` (None: free, expired, or mine).
fn other_holder(l: &Value, me: &str, now: OffsetDateTime) -> Option<String> {
    let holder = l["spec"]["holderIdentity"].as_str().unwrap_or_default();
    if holder.is_empty() || holder == me {
        return None;
    }
    let renewed = l["spec"]["renewTime"]
        .as_str()
        .and_then(|t| OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok());
    let secs = l["spec"]["leaseDurationSeconds"].as_i64().unwrap_or(DURATION.as_secs() as i64);
    match renewed {
        Some(r) if r + time::Duration::seconds(secs) > now => Some(holder.to_string()),
        _ => None,
    }
}

/// One try: Ok(None) taken, Ok(Some(holder)) held by another.
fn try_take(client: &Client, me: &str, now: OffsetDateTime) -> Result<Option<String>> {
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
            if let Some(h) = other_holder(&l, me, now) {
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
    loop {
        match try_take(client, me, clock.wall()) {
            Ok(None) => return Ok(()),
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

/// Renews the lease every [`RENEW`] until `done` is set (run on a thread of its own).
pub fn keep(client: &Client, me: &str, done: &AtomicBool) {
    let mut last = std::time::Instant::now();
    while !done.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(200));
        if last.elapsed() >= RENEW {
            last = std::time::Instant::now();
            if let Err(e) = try_take(client, me, OffsetDateTime::now_utc()) {
                log::warn!("[upgrade] renewing the Lease kube-system/kubestrap-upgrade: {e}");
            }
        }
    }
}

/// Gives the lease up (deleted if still ours).
pub fn release(client: &Client, me: &str) {
    if let Ok(Some(l)) = client.get(PATH)
        && l["spec"]["holderIdentity"].as_str() == Some(me)
        && let Err(e) = client.delete(PATH)
    {
        log::warn!("[upgrade] deleting the Lease kube-system/kubestrap-upgrade: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_anothers_only_while_its_holder_renews_it() {
        let now = OffsetDateTime::now_utc();
        let l = lease("cp-2", &micro_time(now), now - time::Duration::seconds(30), None);
        assert_eq!(other_holder(&l, "cp-1", now).as_deref(), Some("cp-2"));
        assert_eq!(other_holder(&l, "cp-2", now), None, "mine");
        let stale = lease("cp-2", &micro_time(now), now - time::Duration::seconds(61), None);
        assert_eq!(other_holder(&stale, "cp-1", now), None, "expired");
        assert!(micro_time(now).ends_with('Z') && micro_time(now).len() == 27, "{}", micro_time(now));
    }
}
