//! PATCH bodies: JSON merge patch (RFC 7386) — also used for strategic merge
//! patch, which differs only for lists with merge keys — and JSON patch
//! (RFC 6902) for add/remove/replace/test.

use crate::status::ApiError;
use serde_json::Value;

pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    if let Value::Object(map) = target {
        for (k, v) in patch_map {
            if v.is_null() {
                map.remove(k);
            } else {
                merge_patch(map.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// Splits a JSON pointer into the parent pointer and the last token.
fn split_pointer(path: &str) -> Result<(&str, String), ApiError> {
    let idx = path.rfind('/').ok_or_else(|| ApiError::bad_request(format!("invalid JSON pointer {path:?}")))?;
    Ok((&path[..idx], unescape(&path[idx + 1..])))
}

pub fn json_patch(target: &mut Value, ops: &Value) -> Result<(), ApiError> {
    let ops = ops.as_array().ok_or_else(|| ApiError::bad_request("JSON patch must be an array"))?;
    for op in ops {
        let path = op["path"].as_str().unwrap_or("");
        let missing = || ApiError::invalid("Patch", "", &format!("path {path:?} not found"));
        match op["op"].as_str().unwrap_or("") {
            "test" => {
                if target.pointer(path) != Some(&op["value"]) {
                    return Err(ApiError::invalid("Patch", "", &format!("test failed at {path:?}")));
                }
            }
            "replace" => *target.pointer_mut(path).ok_or_else(missing)? = op["value"].clone(),
            "remove" => {
                let (parent, last) = split_pointer(path)?;
                match target.pointer_mut(parent).ok_or_else(missing)? {
                    Value::Object(m) => {
                        m.remove(&last).ok_or_else(missing)?;
                    }
                    Value::Array(a) => {
                        let i: usize = last.parse().map_err(|_| missing())?;
                        if i >= a.len() {
                            return Err(missing());
                        }
                        a.remove(i);
                    }
                    _ => return Err(missing()),
                }
            }
            "add" => {
                let (parent, last) = split_pointer(path)?;
                let value = op["value"].clone();
                match target.pointer_mut(parent).ok_or_else(missing)? {
                    Value::Object(m) => {
                        m.insert(last, value);
                    }
                    Value::Array(a) if last == "-" => a.push(value),
                    Value::Array(a) => {
                        let i: usize = last.parse().map_err(|_| missing())?;
                        if i > a.len() {
                            return Err(missing());
                        }
                        a.insert(i, value);
                    }
                    _ => return Err(missing()),
                }
            }
            other => return Err(ApiError::bad_request(format!("unsupported JSON patch op {other:?}"))),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge() {
        let mut t = json!({"a": {"b": 1, "c": 2}, "l": [1]});
        merge_patch(&mut t, &json!({"a": {"b": null, "d": 3}, "l": [2]}));
        assert_eq!(t, json!({"a": {"c": 2, "d": 3}, "l": [2]}));
    }

    #[test]
    fn json_ops() {
        let mut t = json!({"metadata": {"labels": {"a": "1"}}, "l": [1, 2]});
        json_patch(
            &mut t,
            &json!([
                {"op": "add", "path": "/metadata/labels/b~1c", "value": "2"},
                {"op": "remove", "path": "/metadata/labels/a"},
                {"op": "add", "path": "/l/-", "value": 3},
                {"op": "replace", "path": "/l/0", "value": 0},
                {"op": "test", "path": "/l/2", "value": 3},
            ]),
        )
        .unwrap();
        assert_eq!(t, json!({"metadata": {"labels": {"b/c": "2"}}, "l": [0, 2, 3]}));
        assert!(json_patch(&mut t, &json!([{"op": "remove", "path": "/nope"}])).is_err());
    }
}
