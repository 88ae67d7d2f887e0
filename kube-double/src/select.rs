//! Minimal `labelSelector` and `fieldSelector` support: equality,
//! inequality, existence and `in`/`notin` for labels; `metadata.name` and
//! `metadata.namespace` for fields (other field labels are rejected as the
//! real server rejects unsupported ones).

use crate::status::ApiError;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    labels: Vec<Req>,
    fields: Vec<Req>,
}

/// Splits on commas that are not inside `( )`.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter().map(str::trim).filter(|p| !p.is_empty()).collect()
}

fn parse_req(term: &str) -> Result<Req, ApiError> {
    let bad = || ApiError::bad_request(format!("unable to parse requirement: {term:?}"));
    if let Some((k, v)) = term.split_once("!=") {
        return Ok(Req::Ne(k.trim().into(), v.trim().into()));
    }
    if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Ok(Req::Eq(k.trim().into(), v.trim().into()));
    }
    let set = |rest: &str| -> Result<Vec<String>, ApiError> {
        let inner = rest.trim().strip_prefix('(').and_then(|r| r.strip_suffix(')')).ok_or_else(bad)?;
        Ok(inner.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect())
    };
    if let Some((k, rest)) = term.split_once(" notin ") {
        return Ok(Req::NotIn(k.trim().into(), set(rest)?));
    }
    if let Some((k, rest)) = term.split_once(" in ") {
        return Ok(Req::In(k.trim().into(), set(rest)?));
    }
    if let Some(k) = term.strip_prefix('!') {
        return Ok(Req::NotExists(k.trim().into()));
    }
    if term.contains(' ') || term.contains('(') {
        return Err(bad());
    }
    Ok(Req::Exists(term.into()))
}

impl Selector {
    pub fn parse(label_selector: Option<&str>, field_selector: Option<&str>) -> Result<Selector, ApiError> {
        let labels = split_top(label_selector.unwrap_or("")).into_iter().map(parse_req).collect::<Result<_, _>>()?;
        let fields: Vec<Req> =
            split_top(field_selector.unwrap_or("")).into_iter().map(parse_req).collect::<Result<_, _>>()?;
        for f in &fields {
            match f {
                Req::Eq(k, _) | Req::Ne(k, _) if k == "metadata.name" || k == "metadata.namespace" => {}
                _ => {
                    return Err(ApiError::bad_request(format!("field label not supported by kube-double: {f:?}")));
                }
            }
        }
        Ok(Selector { labels, fields })
    }

    pub fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        let label = |k: &str| labels.get(k).and_then(Value::as_str).map(str::to_string);
        let field = |k: &str| match k {
            "metadata.name" => obj["metadata"]["name"].as_str().map(str::to_string),
            _ => Some(obj["metadata"]["namespace"].as_str().unwrap_or("").to_string()),
        };
        fn check(req: &Req, get: &dyn Fn(&str) -> Option<String>) -> bool {
            match req {
                Req::Eq(k, v) => get(k).as_ref() == Some(v),
                Req::Ne(k, v) => get(k).as_ref() != Some(v),
                Req::Exists(k) => get(k).is_some(),
                Req::NotExists(k) => get(k).is_none(),
                Req::In(k, vs) => get(k).is_some_and(|x| vs.contains(&x)),
                Req::NotIn(k, vs) => !get(k).is_some_and(|x| vs.contains(&x)),
            }
        }
        self.labels.iter().all(|r| check(r, &label)) && self.fields.iter().all(|r| check(r, &field))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selects() {
        let obj = json!({"metadata": {"name": "n", "namespace": "ns", "labels": {"a": "1", "b": "2"}}});
        let yes = |l: &str, f: &str| Selector::parse(Some(l), Some(f)).unwrap().matches(&obj);
        assert!(yes("a=1", ""));
        assert!(yes("a==1,b", ""));
        assert!(!yes("a!=1", ""));
        assert!(yes("!c", "metadata.name=n"));
        assert!(!yes("", "metadata.name=m"));
        assert!(yes("a in (1,3),b notin (3)", "metadata.namespace=ns"));
        assert!(Selector::parse(None, Some("spec.x=1")).is_err());
    }
}
