//! Meta-data as the datasources read it: NoCloud's YAML (or JSON) into [`MetaData`], keeping
//! the whole tree for the variable table (`vars`) besides the two values planning reads.

use serde_json::{Map, Value};

use super::{MetaData, SourceError};

/// NoCloud meta-data: YAML (or JSON) with `instance-id` and `local-hostname`, kept whole in
/// [`MetaData::tree`]. `origin` (the file or URL it came from) is named in errors.
pub(crate) fn parse_nocloud_meta(origin: &str, bytes: &[u8]) -> Result<MetaData, SourceError> {
    let bad = |problem: String| SourceError::MetaData { origin: origin.to_string(), problem };
    let text = std::str::from_utf8(bytes).map_err(|_| bad("is not UTF-8 text".into()))?;
    if text.trim().is_empty() {
        return Ok(MetaData::default());
    }
    let v: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| bad(format!("is not YAML: {e}")))?;
    let map = v.as_mapping().ok_or_else(|| bad("is not a YAML mapping".into()))?;
    let get = |k: &str| -> Result<Option<String>, SourceError> {
        match map.get(k) {
            None | Some(serde_yaml::Value::Null) => Ok(None),
            Some(serde_yaml::Value::String(s)) => Ok(Some(s.clone())),
            Some(serde_yaml::Value::Number(n)) => Ok(Some(n.to_string())),
            Some(_) => Err(bad(format!("{k} must be a string"))),
        }
    };
    Ok(MetaData { instance_id: get("instance-id")?, local_hostname: get("local-hostname")?, tree: yaml_to_json(&v) })
}

/// A YAML value as JSON, so every datasource's tree has one type. Keys that are not strings
/// (`1:`, `true:`) become their text, as Jinja would print them; tags are dropped.
pub(crate) fn yaml_to_json(v: &serde_yaml::Value) -> Value {
    use serde_yaml::Value as Y;
    match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(*b),
        Y::Number(n) => n
            .as_i64()
            .map(Value::from)
            .or_else(|| n.as_u64().map(Value::from))
            .or_else(|| n.as_f64().and_then(serde_json::Number::from_f64).map(Value::Number))
            .unwrap_or_else(|| Value::String(n.to_string())),
        Y::String(s) => Value::String(s.clone()),
        Y::Sequence(items) => Value::Array(items.iter().map(yaml_to_json).collect()),
        Y::Mapping(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let key = match yaml_to_json(k) {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                out.insert(key, yaml_to_json(v));
            }
            Value::Object(out)
        }
        Y::Tagged(t) => yaml_to_json(&t.value),
    }
}

/// Sets a top-level string key of a tree (making it a mapping if it was empty): for values that
/// override the meta-data, such as the kernel command line's `h=`.
pub(crate) fn set_key(tree: &mut Value, key: &str, value: &str) {
    if !tree.is_object() {
        *tree = Value::Object(Map::new());
    }
    if let Value::Object(m) = tree {
        m.insert(key.to_string(), Value::String(value.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nocloud_meta_parses_yaml_and_json() {
        let m = parse_nocloud_meta("m", b"instance-id: i-1\nlocal-hostname: Node-A\n").unwrap();
        assert_eq!(m.instance_id.as_deref(), Some("i-1"));
        assert_eq!(m.local_hostname.as_deref(), Some("Node-A"));
        let m = parse_nocloud_meta("m", br#"{"instance-id": "i-2"}"#).unwrap();
        assert_eq!((m.instance_id.as_deref(), m.local_hostname), (Some("i-2"), None));
        assert_eq!(parse_nocloud_meta("m", b"").unwrap(), MetaData::default());
        let e = parse_nocloud_meta("/seed/meta-data", b"- a\n").unwrap_err();
        assert_eq!(e.to_string(), "/seed/meta-data: meta-data is not a YAML mapping");
        let e = parse_nocloud_meta("http://10.0.2.2/meta-data", b"local-hostname: [a]\n").unwrap_err();
        assert_eq!(e.to_string(), "http://10.0.2.2/meta-data: meta-data local-hostname must be a string");
    }

    #[test]
    fn nocloud_meta_keeps_the_whole_tree() {
        let m = parse_nocloud_meta(
            "m",
            b"instance-id: i-1\nplacement:\n  availability-zone: az-1\nports: [1, 2]\n1: one\nratio: 0.5\nok: true\n",
        )
        .unwrap();
        assert_eq!(
            m.tree,
            serde_json::json!({"instance-id": "i-1", "placement": {"availability-zone": "az-1"}, "ports": [1, 2],
                               "1": "one", "ratio": 0.5, "ok": true})
        );
        let mut t = Value::Null;
        set_key(&mut t, "local-hostname", "h");
        assert_eq!(t, serde_json::json!({"local-hostname": "h"}));
    }
}
