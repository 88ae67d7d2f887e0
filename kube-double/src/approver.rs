//! The `csrapproving` controller (upstream `sarapprove.go`): auto-approves
//! kubelet client CSRs whose requester RBAC allows to create the
//! `nodeclient` / `selfnodeclient` subresource.

use crate::auth::UserInfo;
use crate::csr::{self, KUBELET_CLIENT_SIGNER};
use crate::rbac::{self, Attributes};
use crate::resources::CSRS;
use crate::store::{Store, meta_str};
use serde_json::Value;

/// Whether the CSR's requester may create `certificatesigningrequests/<sub>`,
/// the SubjectAccessReview the real controller sends.
fn requester_may(store: &Store, csr: &Value, subresource: &str) -> bool {
    let spec = &csr["spec"];
    let user = UserInfo {
        name: spec["username"].as_str().unwrap_or("").to_string(),
        uid: spec["uid"].as_str().unwrap_or("").to_string(),
        groups: spec["groups"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect(),
    };
    let attrs = Attributes::Resource {
        verb: "create".into(),
        group: "certificates.k8s.io".into(),
        resource: "certificatesigningrequests".into(),
        subresource: subresource.into(),
        namespace: String::new(),
        name: String::new(),
    };
    rbac::authorize(store, &user, &attrs)
}

/// The decision for one pending CSR: Some((type, reason, message)).
fn decide(store: &Store, csr: &Value) -> Option<(&'static str, &'static str, &'static str)> {
    if store.knobs.deny_csrs {
        return Some(("Denied", "TestDenied", "Denied by kube-double's deny_csrs knob."));
    }
    if !store.knobs.auto_approve {
        return None;
    }
    let req = match csr::parse_request(csr) {
        Ok(r) => r,
        Err(e) => {
            log::warn!("csr approver: {}: {e}", meta_str(csr, "name"));
            return None;
        }
    };
    if csr::validate_kubelet_client(&req, &csr::usages(csr), store.knobs.legacy_approver).is_err() {
        return None;
    }
    // Recognizers in upstream order: self-renewal first, then any requester.
    let is_self = csr["spec"]["username"].as_str() == Some(req.common_name.as_str());
    if is_self && requester_may(store, csr, "selfnodeclient") {
        return Some((
            "Approved",
            "AutoApproved",
            "Auto approving self kubelet client certificate after SubjectAccessReview.",
        ));
    }
    if requester_may(store, csr, "nodeclient") {
        return Some((
            "Approved",
            "AutoApproved",
            "Auto approving kubelet client certificate after SubjectAccessReview.",
        ));
    }
    None
}

/// One sync over all CSRs. Returns true if any was changed.
pub fn sync(store: &mut Store) -> bool {
    let pending: Vec<Value> = store
        .list(&CSRS, "")
        .filter(|c| c["spec"]["signerName"].as_str() == Some(KUBELET_CLIENT_SIGNER))
        .filter(|c| !csr::has_true_condition(c, "Approved") && !csr::has_true_condition(c, "Denied"))
        .filter(|c| c["status"]["certificate"].as_str().unwrap_or("").is_empty())
        .cloned()
        .collect();
    let mut changed = false;
    for mut c in pending {
        let Some((kind, reason, message)) = decide(store, &c) else { continue };
        csr::add_condition(&mut c, kind, reason, message);
        let name = meta_str(&c, "name").to_string();
        match store.replace(&CSRS, "", &name, c) {
            Ok(_) => changed = true,
            Err(e) => log::warn!("csr approver: {name}: {e}"),
        }
    }
    changed
}
