//! One patch document read as kubeadm reads it: sigs.k8s.io/yaml's YAMLToJSON, whose parser
//! (go-yaml v2) resolves plain scalars by YAML 1.1 rules, where `no`, `off` and `y` are
//! booleans, `0110` is octal and `1_000` an integer. serde_yaml reads YAML 1.2, so the events of
//! a YAML parser are resolved here instead; quoted and block scalars are always strings.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle};
use serde_json::{Map, Number, Value};

/// How deep collections may nest. go-yaml stops at 10000; the merge, the re-encode and dropping
/// the value recurse, so kubestrap stops earlier (no real patch nests past a Pod's ~15 levels).
const MAX_DEPTH: usize = 1000;

/// How large the decoded value may grow, counted as its text plus `NODE_BYTES` a node: aliases
/// copy their anchor's value, and go-yaml's node-count guard lets a long string through many
/// times (a 1 MiB string aliased 100,000 times is 100 GB). Real patches decode to kilobytes.
pub(crate) const MAX_VALUE_BYTES: u64 = 16 << 20;
/// What one decoded node costs beyond its text (a serde_json Value and its slot).
const NODE_BYTES: u64 = 32;

/// The document's value; `null` for a document with no content (comments only).
pub(crate) fn parse(text: &str) -> Result<Value, String> {
    // (value, pending key, anchor id, the node count and bytes when it started)
    let mut stack: Vec<(Value, Option<String>, usize, u64, u64)> = Vec::new();
    // An anchor's value, how many nodes it is (as go-yaml counts an alias's expansion) and its bytes.
    let mut anchors: HashMap<usize, (Value, u64, u64)> = HashMap::new();
    let mut count = Aliasing::default();
    let mut root = Value::Null;
    for ev in Parser::new_from_str(text) {
        let (ev, _) = ev.map_err(|e| e.to_string())?;
        let (value, anchor, nodes, bytes) = match ev {
            Event::MappingStart(a, _) | Event::SequenceStart(a, _) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(format!("collections nested deeper than {MAX_DEPTH} levels"));
                }
                count.node(0)?;
                count.bytes(NODE_BYTES)?;
                let empty = if matches!(ev, Event::MappingStart(..)) {
                    Value::Object(Map::new())
                } else {
                    Value::Array(Vec::new())
                };
                stack.push((empty, None, a, count.decoded, count.value_bytes - NODE_BYTES));
                continue;
            }
            Event::MappingEnd | Event::SequenceEnd => {
                let Some((v, _, a, start, bytes)) = stack.pop() else {
                    return Err("unbalanced YAML events".into());
                };
                (v, a, count.decoded - start + 1, count.value_bytes - bytes)
            }
            Event::Scalar(s, style, a, tag) => {
                count.node(0)?;
                let bytes = NODE_BYTES + s.len() as u64;
                count.bytes(bytes)?;
                let as_string = style != ScalarStyle::Plain || tag.is_some_and(|t| t.suffix == "str");
                (if as_string { Value::String(s.into_owned()) } else { resolve(&s) }, a, 1, bytes)
            }
            Event::Alias(id) => {
                let (v, nodes, bytes) = anchors.get(&id).ok_or("an alias to an unknown anchor")?;
                // Counted before the copy: a refused expansion is never built.
                count.node(*nodes)?;
                count.bytes(*bytes)?;
                (v.clone(), 0, *nodes, *bytes)
            }
            _ => continue,
        };
        if anchor != 0 {
            anchors.insert(anchor, (value.clone(), nodes, bytes));
        }
        match stack.last_mut() {
            None => root = value,
            Some((Value::Array(a), ..)) => a.push(value),
            Some((Value::Object(m), key, ..)) => match key.take() {
                // A repeated key: the last wins, as go-yaml's map does.
                Some(k) => {
                    m.insert(k, value);
                }
                None => *key = Some(json_key(&value)?),
            },
            Some(_) => return Err("a value outside any collection".into()),
        }
    }
    Ok(root)
}

/// go-yaml's guard against alias bombs ("billion laughs"): every node decoded counts, those
/// decoded again through an alias count as aliasing too, and a document whose aliasing exceeds
/// the allowed share (99% up to 400,000 nodes, down to 10% at 4,000,000) is refused.
#[derive(Default)]
struct Aliasing {
    decoded: u64,
    aliased: u64,
    /// The decoded value's size so far (`MAX_VALUE_BYTES`).
    value_bytes: u64,
}

impl Aliasing {
    fn bytes(&mut self, n: u64) -> Result<(), String> {
        self.value_bytes += n;
        if self.value_bytes > MAX_VALUE_BYTES {
            return Err(format!("the document decodes to more than {} MiB", MAX_VALUE_BYTES >> 20));
        }
        Ok(())
    }

    /// One node, or an alias to an anchor of `expanded` nodes (the alias node itself and them).
    fn node(&mut self, expanded: u64) -> Result<(), String> {
        self.decoded += 1 + expanded;
        self.aliased += expanded;
        let (low, high) = (400_000.0, 4_000_000.0);
        let d = self.decoded as f64;
        let allowed = if d <= low {
            0.99
        } else if d >= high {
            0.10
        } else {
            0.99 - 0.89 * (d - low) / (high - low)
        };
        if self.aliased > 100 && self.decoded > 1000 && self.aliased as f64 / d > allowed {
            return Err("document contains excessive aliasing".into());
        }
        Ok(())
    }
}

/// YAMLToJSON's key: strings as they are, numbers and booleans as their text. go-yaml refuses a
/// collection as a key and YAMLToJSON a null one. (Printing a collection key as JSON, as this once
/// did, doubles its escapes at every level: 30 nested keys in 100 bytes decoded to gigabytes.)
fn json_key(v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(_) | Value::Bool(_) => Ok(v.to_string()),
        Value::Null => Err("unsupported map key of type: <nil> (a key must be a string, number or boolean)".into()),
        Value::Array(_) => Err("invalid map key: a sequence (a key must be a string, number or boolean)".into()),
        Value::Object(_) => Err("invalid map key: a mapping (a key must be a string, number or boolean)".into()),
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

    #[test]
    fn alias_bombs_and_deep_nesting_are_refused() {
        // Nine levels of ten aliases: a billion strings from 500 bytes.
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let refs = vec![format!("*a{}", i - 1); 10].join(", ");
            bomb.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        assert_eq!(parse(&bomb).unwrap_err(), "document contains excessive aliasing");
        // Three levels (1,000 strings) are ordinary aliasing.
        let small: String = bomb.lines().take(3).map(|l| format!("{l}\n")).collect();
        assert_eq!(parse(&small).unwrap()["a2"].as_array().unwrap().len(), 10);
        // A block sequence nests two bytes a level.
        let deep = format!("spec:\n{}v\n", "- ".repeat(MAX_DEPTH + 1));
        assert!(parse(&deep).unwrap_err().contains("nested deeper than 1000"));
        let ok = format!("spec:\n{}v\n", "- ".repeat(MAX_DEPTH - 1));
        assert!(parse(&ok).is_ok());
    }

    #[test]
    fn collection_and_null_keys_are_refused_as_kubeadm_refuses_them() {
        // 30 mappings each the key of the next: 150 bytes that once decoded to 2^30 backslashes.
        let mut nested = String::from("a");
        for _ in 0..30 {
            nested = format!("{{{nested}: x}}");
        }
        assert!(parse(&nested).unwrap_err().starts_with("invalid map key: a mapping"));
        assert!(parse("[a]: 1").unwrap_err().starts_with("invalid map key: a sequence"));
        assert!(parse("~: 1").unwrap_err().starts_with("unsupported map key of type: <nil>"));
        assert_eq!(
            parse(
                "1: a
true: b
1.5: c
"
            )
            .unwrap(),
            json!({"1": "a", "true": "b", "1.5": "c"})
        );
    }

    #[test]
    fn a_long_string_aliased_many_times_is_refused_by_size() {
        // 1 MiB aliased 100 times: too few nodes for go-yaml's aliasing guard, 100 MiB of value.
        let long = "x".repeat(1 << 20);
        let doc = format!("a: &s {long}\nb: [{}]\n", ["*s"; 100].join(", "));
        assert_eq!(parse(&doc).unwrap_err(), "the document decodes to more than 16 MiB");
        let ten = format!("a: &s {long}\nb: [{}]\n", ["*s"; 10].join(", "));
        assert_eq!(parse(&ten).unwrap()["b"].as_array().unwrap().len(), 10);
    }
}
