//! API errors rendered as the Kubernetes `Status` object, the only error shape
//! client libraries (and kubestrap) understand.

use serde_json::{Value, json};
use std::fmt;

/// An error as the API server would return it: HTTP code, machine-readable
/// `reason` and a human-readable message in the real server's wording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    /// (name, kind-or-resource) for `details`, as the real server fills it.
    pub details: Option<(String, String)>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: String) -> Self {
        ApiError { code, reason, message, details: None }
    }

    fn with_details(mut self, name: &str, kind: &str) -> Self {
        self.details = Some((name.to_string(), kind.to_string()));
        self
    }

    pub fn not_found(resource: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{resource} \"{name}\" not found")).with_details(name, resource)
    }

    /// What the real server answers for a path that maps to no resource.
    pub fn no_route() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource".into())
    }

    pub fn already_exists(resource: &str, name: &str) -> Self {
        Self::new(409, "AlreadyExists", format!("{resource} \"{name}\" already exists")).with_details(name, resource)
    }

    pub fn conflict(resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again"
            ),
        )
        .with_details(name, resource)
    }

    pub fn invalid(kind: &str, name: &str, cause: &str) -> Self {
        Self::new(422, "Invalid", format!("{kind} \"{name}\" is invalid: {cause}")).with_details(name, kind)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message.into())
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized".into())
    }

    pub fn forbidden(message: String) -> Self {
        Self::new(403, "Forbidden", message)
    }

    pub fn method_not_allowed() -> Self {
        Self::new(405, "MethodNotAllowed", "the server does not allow this method on the requested resource".into())
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/merge-patch+json, application/strategic-merge-patch+json, application/json-patch+json (got {content_type:?})"
            ),
        )
    }

    pub fn gone(message: String) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message.into())
    }

    /// The `Status` body the real server sends with this error.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some((name, kind)) = &self.details {
            status["details"] = json!({ "name": name, "kind": kind });
        }
        status
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}
