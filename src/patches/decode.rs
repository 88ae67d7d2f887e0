//! A patched object as kubeadm re-encodes it: decoded into its Go type and marshalled again.
//! Fields the type does not have are dropped, `omitempty` zero values go, absent fields that
//! Go always writes come back with their zero value, and a value of the wrong JSON type is an
//! error naming its field, as the decode's would be.

use serde_json::{Map, Value};

use super::schema::{Elem, Field, Kind, schema};

/// `value` decoded as the schema type `ty` and encoded again.
pub(crate) fn reencode(ty: &str, value: &Value) -> Result<Value, String> {
    let Value::Object(m) = value else { return Err(format!("expected an object, got {value}")) };
    encode_struct(ty, m, "")
}

fn encode_struct(ty: &str, m: &Map<String, Value>, path: &str) -> Result<Value, String> {
    let mut out = Map::new();
    for f in schema().fields(ty) {
        let p = if path.is_empty() { f.name.to_string() } else { format!("{path}.{}", f.name) };
        if let Some(v) = field(f, m.get(f.name).unwrap_or(&Value::Null), &p)? {
            out.insert(f.name.to_string(), v);
        }
    }
    Ok(Value::Object(out))
}

/// One field's encoding, `None` if Go leaves it out.
fn field(f: &Field, v: &Value, path: &str) -> Result<Option<Value>, String> {
    if v.is_null() {
        return Ok(absent(f));
    }
    let enc = value(f.kind, f.elem, v, path)?;
    let empty = match &enc {
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty() && f.kind == Kind::Map,
        Value::String(s) => s.is_empty() && f.kind != Kind::Opaque,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0) && f.kind != Kind::Opaque,
        Value::Null => true,
    };
    Ok(if empty && f.omitempty && !f.ptr { None } else { Some(enc) })
}

/// What Go writes for a field that decoded to its zero value.
fn absent(f: &Field) -> Option<Value> {
    if f.ptr || matches!(f.kind, Kind::List | Kind::Map | Kind::Bytes | Kind::Any) {
        return if f.omitempty || f.omitzero { None } else { Some(Value::Null) };
    }
    if f.omitzero {
        return None;
    }
    match f.kind {
        // encoding/json never omits a struct, omitempty or not.
        Kind::Struct => encode_struct(f.elem.ty, &Map::new(), "").ok(),
        Kind::Opaque => Some(opaque_zero(f.elem.ty)),
        _ if f.omitempty => None,
        Kind::String => Some(Value::String(String::new())),
        Kind::Bool => Some(Value::Bool(false)),
        _ => Some(Value::from(0)),
    }
}

fn opaque_zero(ty: &str) -> Value {
    match ty {
        "Quantity" => Value::String("0".into()),
        "IntOrString" => Value::from(0),
        "Duration" => Value::String("0s".into()),
        _ => Value::Null,
    }
}

fn value(kind: Kind, elem: Elem, v: &Value, path: &str) -> Result<Value, String> {
    let wrong = |want: &str| Err(format!("cannot decode {path}: expected {want}, got {v}"));
    match kind {
        Kind::Struct => match v {
            Value::Object(m) => encode_struct(elem.ty, m, path),
            _ => wrong("an object"),
        },
        Kind::List => match v {
            Value::Array(a) => {
                let items = a.iter().enumerate().map(|(i, x)| item(elem, x, &format!("{path}[{i}]")));
                Ok(Value::Array(items.collect::<Result<_, _>>()?))
            }
            _ => wrong("a list"),
        },
        Kind::Map => match v {
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, x) in m {
                    out.insert(k.clone(), item(elem, x, &format!("{path}.{k}"))?);
                }
                Ok(Value::Object(out))
            }
            _ => wrong("a map"),
        },
        Kind::String | Kind::Bytes => {
            if v.is_string() {
                Ok(v.clone())
            } else {
                wrong("a string")
            }
        }
        Kind::Bool => {
            if v.is_boolean() {
                Ok(v.clone())
            } else {
                wrong("a boolean")
            }
        }
        Kind::Int => match v.as_f64() {
            Some(n) if n.fract() == 0.0 => {
                Ok(if let Some(i) = v.as_i64() { Value::from(i) } else { Value::from(n as i64) })
            }
            _ => wrong("an integer"),
        },
        Kind::Float => {
            if v.is_number() {
                Ok(v.clone())
            } else {
                wrong("a number")
            }
        }
        Kind::Opaque if elem.ty == "Quantity" => {
            super::quantity::canonical(v).map(Value::String).map_err(|e| format!("cannot decode {path}: {e}"))
        }
        Kind::Opaque if elem.ty == "IntOrString" => match v {
            Value::String(_) => Ok(v.clone()),
            _ => value(Kind::Int, elem, v, path),
        },
        Kind::Opaque | Kind::Any => Ok(v.clone()),
    }
}

/// A list's or map's element; a null element decodes to the zero value.
fn item(elem: Elem, v: &Value, path: &str) -> Result<Value, String> {
    match (v, elem.kind) {
        (Value::Null, Kind::Struct) => encode_struct(elem.ty, &Map::new(), path),
        (Value::Null, _) => Ok(Value::Null),
        _ => value(elem.kind, elem, v, path),
    }
}
