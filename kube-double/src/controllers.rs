//! Runs the controllers. They run synchronously after every write (so a
//! test sees their effect as soon as the next request can observe it) and
//! on a short background tick (for `signer_delay` and token expiry, which
//! change outcomes without any write).

use crate::csr_signer::Ca;
use crate::store::Store;
use crate::{approver, csr_signer, gc, signer};
use std::time::Instant;

/// Returns true if any controller wrote.
pub fn run(store: &mut Store, ca: Option<&Ca>) -> bool {
    // Order matters: approving then signing in one pass yields the same end
    // state as the real controllers racing, just sooner.
    let approved = approver::sync(store);
    let signed = csr_signer::sync(store, ca);
    let jws = signer::sync(store, Instant::now());
    let collected = gc::sync(store, time::OffsetDateTime::now_utc());
    approved || signed || jws || collected
}
