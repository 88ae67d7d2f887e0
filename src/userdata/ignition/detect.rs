//! Is the user-data an Ignition config? JSON with `ignition.version` 2.x.y or 3.x.y is; other
//! majors and JSON that is neither Ignition nor a kubeadm document are refused by name.

use serde_json::Value;

use crate::config::ConfigError;

/// The two Ignition spec lines: 2.x (what Cluster API renders) and 3.x (Butane, Flatcar).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Spec {
    V2,
    V3,
}

/// Some(config) when `text` is an Ignition config; None when it is not JSON at all or a
/// kubeadm document written as JSON (YAML reads it).
pub(in crate::userdata) fn detect(src: &str, text: &str) -> Result<Option<Value>, ConfigError> {
    if !text.trim_start().starts_with('{') {
        return Ok(None);
    }
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        // Not one JSON object: let the YAML reader say what is wrong with it.
        return Ok(None);
    };
    if v.get("apiVersion").is_some() {
        return Ok(None);
    }
    if v.get("ignition").and_then(|i| i.get("version")).is_none() {
        return Err(ConfigError::file(
            src,
            "is a JSON object without ignition.version: kubestrap reads JSON user-data as an Ignition config \
             (spec 2.x or 3.x, with ignition.version) or as a kubeadm document (with apiVersion)"
                .into(),
        ));
    }
    spec(src, &v)?;
    Ok(Some(v))
}

/// The spec line of a config (the user-data or a referenced one), from `ignition.version`.
pub(super) fn spec(src: &str, v: &Value) -> Result<Spec, ConfigError> {
    let version = v.get("ignition").and_then(|i| i.get("version"));
    let Some(version) = version.and_then(Value::as_str) else {
        return Err(ConfigError::doc(
            src,
            "Ignition",
            "ignition.version",
            "must be a version string like \"3.4.0\"".into(),
        ));
    };
    let major = version.split('.').next().and_then(|m| m.parse::<u32>().ok());
    let shape_ok = version.split('.').count() >= 3;
    match major {
        Some(2) if shape_ok => Ok(Spec::V2),
        Some(3) if shape_ok => Ok(Spec::V3),
        _ => Err(ConfigError::doc(
            src,
            "Ignition",
            "ignition.version",
            format!("{version:?} is not an Ignition spec kubestrap reads: it reads spec 2.x.y (Cluster API) and 3.x.y"),
        )),
    }
}
