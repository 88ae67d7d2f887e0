//! One patch document read as kubeadm reads it: sigs.k8s.io/yaml's YAMLToJSON, whose parser
//! (go-yaml v2) resolves plain scalars by YAML 1.1 rules, where `no`, `off` and `y` are
//! booleans, `0110` is octal and `1_000` an integer. serde_yaml reads YAML 1.2, so the events of
//! a YAML parser are resolved here instead; quoted and block scalars are always strings.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle};
use serde_json::{Map, Number, Value};

/// The document's value; `null` for a document with no content (comments only).
pub(crate) fn parse(text: &str) -> Result<Value, String> {
    let mut stack: Vec<(Value, Option<String>, usize)> = Vec::new();
    let mut anchors: HashMap<usize, Value> = HashMap::new();
    let mut root = Value::Null;
    for ev in Parser::new_from_str(text) {
        let (ev, _) = ev.map_err(|e| e.to_string())?;
        let (value, anchor) = match ev {
            Event::MappingStart(a, _) => {
                stack.push((Value::Object(Map::new()), None, a));
                continue;
            }
            Event::SequenceStart(a, _) => {
                stack.push((Value::Array(Vec::new()), None, a));
                continue;
            }
            Event::MappingEnd | Event::SequenceEnd => {
                let Some((v, _, a)) = stack.pop() else { return Err("unbalanced YAML events".into()) };
                (v, a)
            }
            Event::Scalar(s, style, a, tag) => {
                let as_string = style != ScalarStyle::Plain || tag.is_some_and(|t| t.suffix == "str");
                (if as_string { Value::String(s.into_owned()) } else { resolve(&s) }, a)
            }
            Event::Alias(id) => (anchors.get(&id).cloned().ok_or("an alias to an unknown anchor")?, 0),
            _ => continue,
        };
        if anchor != 0 {
            anchors.insert(anchor, value.clone());
        }
        match stack.last_mut() {
            None => root = value,
            Some((Value::Array(a), _, _)) => a.push(value),
            Some((Value::Object(m), key, _)) => match key.take() {
                // A repeated key: the last wins, as go-yaml's map does.
                Some(k) => {
                    m.insert(k, value);
                }
                None => *key = Some(json_key(&value)),
            },
            Some(_) => return Err("a value outside any collection".into()),
        }
    }
    Ok(root)
}

/// YAMLToJSON's key: strings as they are, other scalars as their text.
fn json_key(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// go-yaml v2's resolution of a plain scalar.
fn resolve(s: &str) -> Value {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "true" | "True" | "TRUE" => return Value::Bool(true),
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "false" | "False" | "FALSE" => {
            return Value::Bool(false);
        }
        _ => {}
    }
    if !s.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '.')) {
        return Value::String(s.into());
    }
    let plain = s.replace('_', "");
    if let Some(i) = go_int(&plain) {
        return Value::Number(i.into());
    }
    if is_yaml_float(&plain)
        && let Ok(f) = plain.parse::<f64>()
    {
        // The value then passes through Go's float64 and JSON: a whole number prints as one.
        if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
            return Value::Number((f as i64).into());
        }
        if let Some(n) = Number::from_f64(f) {
            return Value::Number(n);
        }
    }
    Value::String(s.into())
}

/// strconv.ParseInt(s, 0, 64): an optional sign, then `0x`, `0o`, `0b`, a leading `0` (octal)
/// or decimal digits.
fn go_int(s: &str) -> Option<i64> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (radix, digits) = if let Some(d) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        (16, d)
    } else if let Some(d) = body.strip_prefix("0o").or_else(|| body.strip_prefix("0O")) {
        (8, d)
    } else if let Some(d) = body.strip_prefix("0b").or_else(|| body.strip_prefix("0B")) {
        (2, d)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, &body[1..])
    } else {
        (10, body)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let v = i64::from_str_radix(digits, radix).ok()?;
    Some(if neg { -v } else { v })
}

/// go-yaml's `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_float(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(mantissa),
    };
    let exp_ok = exp.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)));
    mantissa_ok && exp_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_scalars_resolve_as_yaml_1_1() {
        let v = parse("a: no\nb: 'no'\nc: 0110\nd: 1e3\ne: y\nf: 1_000\ng: 0x1F\nh: 1.5\ni: ~\nj: x\nk: |\n  off\n")
            .unwrap();
        assert_eq!(
            v,
            json!({"a": false, "b": "no", "c": 72, "d": 1000, "e": true, "f": 1000, "g": 31, "h": 1.5, "i": null,
                   "j": "x", "k": "off\n"})
        );
    }

    #[test]
    fn repeated_keys_keep_the_last_and_aliases_copy() {
        assert_eq!(parse("a: 1\na: 2\n").unwrap(), json!({"a": 2}));
        assert_eq!(parse("a: &x [1, 2]\nb: *x\n").unwrap(), json!({"a": [1, 2], "b": [1, 2]}));
        assert_eq!(parse("# only a comment\n").unwrap(), Value::Null);
        assert_eq!(
            parse("- {op: add, path: /a, value: on}").unwrap(),
            json!([{"op": "add", "path": "/a", "value": true}])
        );
        assert!(parse("a: [").is_err());
    }
}
