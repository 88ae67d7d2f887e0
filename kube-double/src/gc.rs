//! The controller-manager's `tokencleaner` (expired bootstrap-token Secrets are deleted) and the
//! garbage collector (an object whose every owner is gone is deleted, as with background
//! propagation). Together they make `kubeadm-certs` disappear when its 2 h proxy token expires.

use crate::resources::{ALL, SECRETS};
use crate::store::{Store, meta_str};
use crate::tokens;
use serde_json::Value;
use time::OffsetDateTime;

/// Returns true if anything was deleted.
pub fn sync(store: &mut Store, now: OffsetDateTime) -> bool {
    let expired: Vec<String> = store
        .list(&SECRETS, "kube-system")
        .filter(|s| tokens::is_token_secret(s) && tokens::is_expired(s, now))
        .map(|s| meta_str(s, "name").to_string())
        .collect();
    let mut changed = false;
    for name in expired {
        changed |= store.delete(&SECRETS, "kube-system", &name).is_ok();
    }
    // Orphans may own others: repeat until nothing more goes.
    loop {
        let live: std::collections::HashSet<String> =
            ALL.iter().flat_map(|r| store.list(r, "")).map(|o| meta_str(o, "uid").to_string()).collect();
        let orphans: Vec<(&'static crate::resources::Resource, String, String)> = ALL
            .iter()
            .flat_map(|r| store.list(r, "").map(move |o| (*r, o)))
            .filter(|(_, o)| owners(o).is_some_and(|uids| !uids.is_empty() && uids.iter().all(|u| !live.contains(*u))))
            .map(|(r, o)| (r, meta_str(o, "namespace").to_string(), meta_str(o, "name").to_string()))
            .collect();
        if orphans.is_empty() {
            return changed;
        }
        for (r, ns, name) in orphans {
            changed |= store.delete(r, &ns, &name).is_ok();
        }
    }
}

fn owners(o: &Value) -> Option<Vec<&str>> {
    let refs = o["metadata"]["ownerReferences"].as_array()?;
    Some(refs.iter().filter_map(|r| r["uid"].as_str()).collect())
}
