//! CertificateSigningRequest rules shared by the REST layer and the
//! controllers: what the server sets at create time, which fields each
//! endpoint may change, and parsing/validation of the PKCS#10 request.

use crate::auth::UserInfo;
use crate::status::ApiError;
use crate::store::{meta_str, now_rfc3339};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;

pub const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";

/// What the approver and signer need from a PKCS#10 request.
#[derive(Debug, Clone)]
pub struct ParsedRequest {
    pub der: Vec<u8>,
    pub common_name: String,
    pub organizations: Vec<String>,
    /// DNS, email, IP or URI SANs (the kinds Go's x509 exposes).
    pub has_sans: bool,
}

/// Decodes `spec.request` (base64 of a PEM "CERTIFICATE REQUEST") and checks
/// its self-signature, as the real server's validation does.
pub fn parse_request(csr: &Value) -> Result<ParsedRequest, String> {
    let b64 = csr["spec"]["request"].as_str().ok_or("spec.request: Required value")?;
    let pem = STANDARD.decode(b64).map_err(|e| format!("spec.request: not base64: {e}"))?;
    let (_, pem) =
        x509_parser::pem::parse_x509_pem(&pem).map_err(|e| format!("spec.request: PEM block not found: {e}"))?;
    if pem.label != "CERTIFICATE REQUEST" {
        return Err(format!("spec.request: PEM block type must be CERTIFICATE REQUEST, got {}", pem.label));
    }
    let (_, req) = x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
        .map_err(|e| format!("spec.request: {e}"))?;
    req.verify_signature().map_err(|e| format!("spec.request: invalid signature: {e}"))?;
    let subject = &req.certification_request_info.subject;
    let common_name = subject.iter_common_name().next().and_then(|a| a.as_str().ok()).unwrap_or_default().to_string();
    let organizations = subject.iter_organization().filter_map(|a| a.as_str().ok()).map(str::to_string).collect();
    let has_sans = req.requested_extensions().into_iter().flatten().any(|ext| match ext {
        ParsedExtension::SubjectAlternativeName(san) => san.general_names.iter().any(|n| {
            matches!(
                n,
                GeneralName::DNSName(_) | GeneralName::RFC822Name(_) | GeneralName::IPAddress(_) | GeneralName::URI(_)
            )
        }),
        _ => false,
    });
    Ok(ParsedRequest { der: pem.contents.clone(), common_name, organizations, has_sans })
}

pub fn usages(csr: &Value) -> BTreeSet<String> {
    csr["spec"]["usages"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Upstream `ValidateKubeletClientCSR`. The newer rule accepts the RSA
/// usage set or the non-RSA one; `legacy` is the v1.24-era rule, which
/// accepts only the three-usage set.
pub fn validate_kubelet_client(req: &ParsedRequest, usages: &BTreeSet<String>, legacy: bool) -> Result<(), String> {
    if req.organizations != ["system:nodes"] {
        return Err("subject organization is not system:nodes".into());
    }
    if req.has_sans {
        return Err("DNS, email, IP or URI subjectAltNames are not allowed".into());
    }
    if !req.common_name.starts_with("system:node:") {
        return Err("subject common name does not begin with system:node:".into());
    }
    let rsa = set(&["digital signature", "key encipherment", "client auth"]);
    let no_rsa = set(&["digital signature", "client auth"]);
    if *usages == rsa || (!legacy && *usages == no_rsa) {
        return Ok(());
    }
    Err(if legacy {
        "usages did not match [client auth digital signature key encipherment]".into()
    } else {
        "usages did not match [client auth digital signature key encipherment] or [client auth digital signature]"
            .into()
    })
}

pub fn has_true_condition(csr: &Value, kind: &str) -> bool {
    csr["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"].as_str() == Some(kind) && c["status"].as_str().unwrap_or("True") == "True")
}

pub fn is_approved(csr: &Value) -> bool {
    has_true_condition(csr, "Approved") && !has_true_condition(csr, "Denied")
}

pub fn add_condition(csr: &mut Value, kind: &str, reason: &str, message: &str) {
    let now = now_rfc3339();
    let cond = json!({
        "type": kind, "status": "True", "reason": reason, "message": message,
        "lastUpdateTime": now, "lastTransitionTime": now,
    });
    if !csr["status"].is_object() {
        csr["status"] = json!({});
    }
    match csr["status"]["conditions"].as_array_mut() {
        Some(conds) => conds.push(cond),
        None => csr["status"]["conditions"] = json!([cond]),
    }
}

fn invalid(csr: &Value, cause: &str) -> ApiError {
    ApiError::invalid("CertificateSigningRequest", meta_str(csr, "name"), cause)
}

/// Create-time strategy: requester identity comes from authentication,
/// never from the body; status starts empty; the request must be valid.
pub fn prepare_create(mut csr: Value, user: &UserInfo) -> Result<Value, ApiError> {
    if !csr["spec"].is_object() {
        return Err(invalid(&csr, "spec: Required value"));
    }
    parse_request(&csr).map_err(|e| invalid(&csr, &e))?;
    if csr["spec"]["signerName"].as_str().unwrap_or("").is_empty() {
        return Err(invalid(&csr, "spec.signerName: Required value"));
    }
    if usages(&csr).is_empty() {
        return Err(invalid(&csr, "spec.usages: Required value"));
    }
    if let Some(secs) = csr["spec"]["expirationSeconds"].as_i64()
        && secs < 600
    {
        return Err(invalid(
            &csr,
            "spec.expirationSeconds: Invalid value: may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    let spec = &mut csr["spec"];
    spec["username"] = user.name.clone().into();
    spec["groups"] = json!(user.groups);
    if user.uid.is_empty() {
        if let Some(m) = spec.as_object_mut() {
            m.remove("uid");
        }
    } else {
        spec["uid"] = user.uid.clone().into();
    }
    if let Some(m) = spec.as_object_mut() {
        m.remove("extra");
    }
    if let Some(m) = csr.as_object_mut() {
        m.remove("status");
    }
    Ok(csr)
}

/// Update strategy per endpoint: the main resource may change only
/// metadata, `/approval` only the conditions, `/status` only the status.
pub fn prepare_update(old: &Value, body: &Value, subresource: &str) -> Result<Value, ApiError> {
    let mut new = old.clone();
    match subresource {
        "" => {
            new["metadata"] = body["metadata"].clone();
        }
        "approval" => {
            new["metadata"]["resourceVersion"] = body["metadata"]["resourceVersion"].clone();
            if !new["status"].is_object() {
                new["status"] = json!({});
            }
            new["status"]["conditions"] = body["status"]["conditions"].clone();
            validate_conditions(old, &mut new)?;
        }
        "status" => {
            new["metadata"]["resourceVersion"] = body["metadata"]["resourceVersion"].clone();
            new["status"] = body["status"].clone();
            validate_conditions(old, &mut new)?;
        }
        _ => return Err(ApiError::no_route()),
    }
    Ok(new)
}

fn validate_conditions(old: &Value, new: &mut Value) -> Result<(), ApiError> {
    let now = now_rfc3339();
    let mut seen = BTreeSet::new();
    if let Some(conds) = new["status"]["conditions"].as_array_mut() {
        for c in conds.iter_mut() {
            let kind = c["type"].as_str().unwrap_or("").to_string();
            if kind.is_empty() {
                return Err(invalid(old, "status.conditions[].type: Required value"));
            }
            if !seen.insert(kind.clone()) && matches!(kind.as_str(), "Approved" | "Denied" | "Failed") {
                return Err(invalid(old, &format!("status.conditions: Duplicate value: {kind:?}")));
            }
            if c["status"].as_str().unwrap_or("").is_empty() {
                c["status"] = "True".into();
            }
            for f in ["lastUpdateTime", "lastTransitionTime"] {
                if c[f].is_null() {
                    c[f] = now.clone().into();
                }
            }
        }
    }
    if has_true_condition(new, "Approved") && has_true_condition(new, "Denied") {
        return Err(invalid(
            old,
            "status.conditions: Invalid value: Approved and Denied conditions are mutually exclusive",
        ));
    }
    for kind in ["Approved", "Denied"] {
        if has_true_condition(old, kind) && !has_true_condition(new, kind) {
            return Err(invalid(
                old,
                &format!("status.conditions: Forbidden: updates may not remove a condition of type {kind:?}"),
            ));
        }
    }
    Ok(())
}
