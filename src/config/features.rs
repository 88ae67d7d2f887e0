//! kubeadm's own checks on fields resolve does not look at: `featureGates` names (features.go,
//! validation.go ValidateFeatureGates) and `etcd.external.httpEndpoints` URLs (ValidateURLs).
//! Run on user input only: kubeadm does not validate a kubeadm-config ConfigMap it reads back.

use std::collections::BTreeMap;

use super::ConfigError;
use super::types::ClusterConfiguration;

/// Every gate kubeadm v1.37.2 knows (features.go `InitFeatureGates`).
pub(crate) const KNOWN_GATES: &[&str] = &["RootlessControlPlane"];

/// Gates older kubeadm releases knew, and the release that removed each (all GA or replaced).
const REMOVED_GATES: &[(&str, &str)] = &[
    ("EtcdLearnerMode", "1.33"),
    ("WaitForAllControlPlaneComponents", "1.35"),
    ("ControlPlaneKubeletLocalMode", "1.36"),
    ("NodeLocalCRISocket", "1.37"),
    ("PublicKeysECDSA", "1.37 (use encryptionAlgorithm: ECDSA-P256)"),
];

/// kubeadm's text for an unknown key, plus what to do when kubeadm once had it.
fn hint(key: &str) -> String {
    match REMOVED_GATES.iter().find(|(k, _)| *k == key) {
        Some((_, v)) => format!(" kubeadm {v} removed it; delete the key (the behaviour is now always on)"),
        None => format!(" kubeadm v1.37 knows: {}", KNOWN_GATES.join(", ")),
    }
}

/// kubeadm 1.37 with `RootlessControlPlane: true` creates `kubeadm-*` users and runs the static
/// Pods as them; kubestrap does not, and will not build a root control plane in its place.
pub(crate) const ROOTLESS_REFUSED: &str = "RootlessControlPlane: true: kubestrap does not run the control plane as non-root users (kubeadm 1.37 creates kubeadm-etcd, kubeadm-kas, … and sets each static Pod's securityContext); remove the gate or set it to false";

/// `featureGates` in a ClusterConfiguration, as `kubeadm config validate` words it.
pub(crate) fn check_gates(source: &str, label: &str, gates: &BTreeMap<String, bool>) -> Result<(), ConfigError> {
    if gates.get("RootlessControlPlane") == Some(&true) {
        return Err(ConfigError::doc(source, label, "featureGates", ROOTLESS_REFUSED.to_string()));
    }
    let Some(bad) = gates.keys().find(|k| !KNOWN_GATES.contains(&k.as_str())) else { return Ok(()) };
    let all = serde_json::to_string(gates).unwrap_or_default();
    Err(ConfigError::doc(
        source,
        label,
        "featureGates",
        format!("Invalid value: {all}: {bad} is not a valid feature name.{}", hint(bad)),
    ))
}

/// `--feature-gates` on the command line: features.go NewFeatureGate's error.
pub(crate) fn check_flag_gate(key: &str) -> Result<(), String> {
    if KNOWN_GATES.contains(&key) { Ok(()) } else { Err(format!("unrecognized feature-gate key: {key}.{}", hint(key))) }
}

/// The checks kubeadm makes on a ClusterConfiguration that resolve does not.
pub(crate) fn check_cluster(source: &str, label: &str, c: &ClusterConfiguration) -> Result<(), ConfigError> {
    check_gates(source, label, &c.feature_gates)?;
    if let Some(ext) = &c.etcd.external {
        for u in &ext.http_endpoints {
            if let Err(why) = check_url(u) {
                return Err(ConfigError::doc(
                    source,
                    label,
                    "etcd.external.httpEndpoints",
                    format!("Invalid value: {u:?}: {why}"),
                ));
            }
        }
    }
    Ok(())
}

/// ValidateURLs without HTTPS required: Go's url.Parse must accept it and find a scheme.
fn check_url(u: &str) -> Result<(), String> {
    let parse_error = |m: &str| Err(format!("URL parse error: parse {u:?}: {m}"));
    if u.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return parse_error("net/url: invalid control character in URL");
    }
    // Go's getScheme: a letter, then letters, digits, '+', '-', '.', up to the first ':'.
    let scheme_len = match u.find(':') {
        Some(0) => return parse_error("missing protocol scheme"),
        Some(i)
            if u.as_bytes()[0].is_ascii_alphabetic()
                && u[..i].bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)) =>
        {
            i
        }
        _ => 0,
    };
    if scheme_len == 0 {
        let first_segment = u.split(['/', '?', '#']).next().unwrap_or_default();
        if first_segment.contains(':') {
            return parse_error("first path segment in URL cannot contain colon");
        }
        return Err("the URL without scheme is not allowed".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_judged_as_kubeadm_does() {
        assert!(check_url("http://10.0.0.5:2381").is_ok());
        assert!(check_url("https://etcd-1.example:2381/metrics").is_ok());
        assert_eq!(
            check_url("10.0.0.5:2381").unwrap_err(),
            "URL parse error: parse \"10.0.0.5:2381\": first path segment in URL cannot contain colon"
        );
        assert_eq!(check_url("etcd-1").unwrap_err(), "the URL without scheme is not allowed");
        assert!(check_url(":2381").unwrap_err().ends_with("missing protocol scheme"));
        assert!(check_url("http://a\n").unwrap_err().ends_with("invalid control character in URL"));
    }

    #[test]
    fn gates_kubeadm_137_removed_are_refused_by_name() {
        let mut g = BTreeMap::new();
        g.insert("RootlessControlPlane".to_string(), false);
        assert!(check_gates("f", "d", &g).is_ok());
        for (gate, _) in REMOVED_GATES {
            let mut g = g.clone();
            g.insert(gate.to_string(), true);
            let e = check_gates("f", "d", &g).unwrap_err();
            assert_eq!(e.path, "featureGates");
            assert!(e.message.contains(&format!(": {gate} is not a valid feature name.")), "{e}");
            assert!(check_flag_gate(gate).unwrap_err().starts_with(&format!("unrecognized feature-gate key: {gate}")));
        }
        assert!(check_flag_gate("RootlessControlPlane").is_ok());
    }
}
