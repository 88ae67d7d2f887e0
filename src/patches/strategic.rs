//! Kubernetes' strategic merge patch, as `kubectl patch --type strategic` and kubeadm apply it
//! (apimachinery's strategicpatch with null deletion and parallel deletion lists on): maps
//! merge key by key, lists merge by their field's merge key or are replaced whole, per the
//! struct tags in the generated schema; the `$patch`, `$retainKeys`, `$setElementOrder/` and
//! `$deleteFromPrimitiveList/` directives; the merged list ordered as apimachinery orders it
//! (patch items in patch order, the others in their original order, interleaved).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::schema::{Elem, Field, Kind, schema};

type Obj = Map<String, Value>;

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder";
const DELETE_PRIMITIVES: &str = "$deleteFromPrimitiveList";

/// Where in the typed tree a map sits: which fields and tags apply to its keys.
#[derive(Clone, Copy)]
enum At {
    Struct(&'static str),
    /// A Go map: every key holds this.
    Map(Elem<'static>),
    /// Below a scalar, a list or an untyped value: no tags.
    Free,
}

/// A key's field: where its value sits, its strategy and its merge key.
struct Meta {
    at: At,
    strategy: &'static str,
    merge_key: &'static str,
}

fn short(ty: &str) -> &str {
    ty.rsplit('.').next().unwrap_or(ty)
}

fn within(kind: Kind, elem: Elem<'static>) -> At {
    match (kind, elem.kind) {
        (Kind::Struct, _) | (Kind::List, Kind::Struct) => At::Struct(elem.ty),
        (Kind::Map, _) => At::Map(elem),
        _ => At::Free,
    }
}

fn lookup(at: At, key: &str) -> Result<Meta, String> {
    match at {
        At::Struct(ty) => {
            let f: &Field = schema().field(ty, key).ok_or_else(|| {
                format!("unable to find api field in struct {} for the json field {key:?}", short(ty))
            })?;
            Ok(Meta { at: within(f.kind, f.elem), strategy: f.strategy, merge_key: f.merge_key })
        }
        At::Map(e) => Ok(Meta { at: within(e.kind, Elem { kind: e.kind, ty: e.ty }), strategy: "", merge_key: "" }),
        At::Free => Ok(Meta { at: At::Free, strategy: "", merge_key: "" }),
    }
}

/// Applies `patch` to `original` for a document of the schema type `root`.
pub(crate) fn apply(original: Value, patch: Value, root: &'static str) -> Result<Value, String> {
    let original = match original {
        Value::Object(o) => o,
        _ => return Err("invalid JSON document".into()),
    };
    match patch {
        Value::Object(p) => Ok(Value::Object(merge_map(original, p, At::Struct(root))?)),
        Value::Null => Ok(Value::Object(original)),
        _ => Err("invalid JSON document".into()),
    }
}

fn merge_map(mut original: Obj, mut patch: Obj, at: At) -> Result<Obj, String> {
    if let Some(d) = patch.get(PATCH) {
        return match d.as_str() {
            Some("replace") => {
                patch.remove(PATCH);
                Ok(patch)
            }
            Some("delete") => Ok(Obj::new()),
            _ => Err(format!("unknown patch type: {d} in map: {}", Value::Object(patch.clone()))),
        };
    }
    retain_keys(&mut original, &mut patch)?;
    set_element_order(&mut original, &mut patch, at)?;
    for (k, pv) in patch {
        let (key, delete_list) = match k.strip_prefix(DELETE_PRIMITIVES) {
            Some(rest) => match rest.strip_prefix('/') {
                Some(key) => (key.to_string(), true),
                None => return Err("invalid patch format of primitive list".into()),
            },
            None => (k, false),
        };
        if pv.is_null() {
            original.remove(&key);
            continue;
        }
        let same_type = original.get(&key).map(|ov| same_kind(ov, &pv));
        match same_type {
            None | Some(false) => {
                if !delete_list {
                    take_patch_value(&mut original, key, pv);
                }
            }
            Some(true) => {
                let ov = original.remove(&key).unwrap_or(Value::Null);
                let merged = match (ov, pv) {
                    (Value::Object(o), Value::Object(p)) => {
                        let m = lookup(at, &key)?;
                        if m.strategy == "replace" { Value::Object(p) } else { Value::Object(merge_map(o, p, m.at)?) }
                    }
                    (Value::Array(o), Value::Array(p)) => {
                        let m = lookup(at, &key)?;
                        if m.strategy == "merge" || delete_list {
                            Value::Array(merge_list(o, p, m.at, m.merge_key, delete_list)?)
                        } else {
                            Value::Array(p)
                        }
                    }
                    (_, pv) => pv,
                };
                original.insert(key, merged);
            }
        }
    }
    Ok(original)
}

/// A key the original lacks (or holds another type of value at): the patch's value, without its
/// nulls and directives.
fn take_patch_value(original: &mut Obj, key: String, mut pv: Value) {
    discard_nulls(&mut pv);
    match remove_directives(pv) {
        Some(v) => {
            original.insert(key, v);
        }
        None => {
            original.remove(&key);
        }
    }
}

/// Go compares the decoded types: all numbers are float64.
fn same_kind(a: &Value, b: &Value) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

fn discard_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(discard_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// The value without `$patch` maps; `None` if the value itself is one.
fn remove_directives(v: Value) -> Option<Value> {
    match v {
        Value::Object(m) => {
            if m.contains_key(PATCH) {
                return None;
            }
            Some(Value::Object(m.into_iter().filter_map(|(k, v)| remove_directives(v).map(|v| (k, v))).collect()))
        }
        Value::Array(a) => Some(Value::Array(a.into_iter().filter_map(remove_directives).collect())),
        v => Some(v),
    }
}

fn retain_keys(original: &mut Obj, patch: &mut Obj) -> Result<(), String> {
    let Some(list) = patch.remove(RETAIN_KEYS) else { return Ok(()) };
    let bad = || "invalid patch format of retainKeys".to_string();
    let list = list.as_array().ok_or_else(bad)?;
    let kept: HashSet<&str> = list.iter().filter_map(Value::as_str).collect();
    let keep = |k: &str| kept.contains(k);
    for (k, v) in patch.iter() {
        if v.is_null() || k.starts_with(DELETE_PRIMITIVES) || k.starts_with(SET_ORDER) {
            continue;
        }
        if !keep(k) {
            return Err(bad());
        }
    }
    original.retain(|k, _| keep(k));
    Ok(())
}

/// `$setElementOrder/<list>`: the list merged, then ordered by the directive first.
fn set_element_order(original: &mut Obj, patch: &mut Obj, at: At) -> Result<(), String> {
    let keys: Vec<String> = patch.keys().filter(|k| k.starts_with(SET_ORDER)).cloned().collect();
    for k in keys {
        let order = match patch.remove(&k) {
            Some(Value::Array(a)) => a,
            _ => return Err("invalid patch format of setElementOrder list".into()),
        };
        let list_key = k
            .strip_prefix(SET_ORDER)
            .and_then(|r| r.strip_prefix('/'))
            .ok_or("invalid patch format of setElementOrder list")?
            .to_string();
        let as_list = |v: Option<&Value>| -> Result<Option<Vec<Value>>, String> {
            match v {
                None => Ok(None),
                Some(Value::Array(a)) => Ok(Some(a.clone())),
                Some(_) => Err(format!("{list_key}: expected a list")),
            }
        };
        let orig = as_list(original.get(&list_key))?;
        let pl = as_list(patch.get(&list_key))?;
        let m = lookup(at, &list_key)?;
        check_order(pl.as_deref().unwrap_or(&[]), &order, m.merge_key)?;
        let merged = match (&orig, &pl) {
            (Some(o), None) => o.clone(),
            (None, Some(p)) => match remove_directives(Value::Array(p.clone())) {
                Some(Value::Array(a)) => a,
                _ => continue,
            },
            (Some(o), Some(p)) => {
                if m.strategy == "merge" {
                    merge_list(o.clone(), p.clone(), m.at, m.merge_key, false)?
                } else {
                    p.clone()
                }
            }
            (None, None) => continue,
        };
        let both: Vec<&Value> = orig.iter().flatten().chain(pl.iter().flatten()).collect();
        let is_map = element_kind(&both)?;
        let (in_order, server_only) = partition(merged, &order, m.merge_key, is_map)?;
        let orig_order = orig.unwrap_or_default();
        let ordered = order_merged(in_order, server_only, &order, &orig_order, m.merge_key, is_map)?;
        original.insert(list_key.clone(), Value::Array(ordered));
        patch.remove(&list_key);
    }
    Ok(())
}

/// apimachinery's check that a patch list follows its `$setElementOrder` list.
fn check_order(patch: &[Value], order: &[Value], merge_key: &str) -> Result<(), String> {
    if patch.is_empty() || order.is_empty() {
        return Ok(());
    }
    let items: Vec<&Value> = if merge_key.is_empty() {
        patch.iter().collect()
    } else {
        patch.iter().filter(|v| v.get(PATCH).and_then(Value::as_str) != Some("delete")).collect()
    };
    let (mut p, mut o) = (0, 0);
    while p < items.len() && o < order.len() {
        if items[p].get(PATCH).is_some() {
            p += 1;
            continue;
        }
        if key_of(items[p], merge_key)? == key_of(&order[o], merge_key)? {
            p += 1;
        }
        o += 1;
    }
    if p < items.len() {
        return Err(format!("the order in the patch list doesn't match the {SET_ORDER} list"));
    }
    Ok(())
}

/// What identifies a list item: its merge key's value, or the item itself for scalars.
fn key_of<'v>(v: &'v Value, merge_key: &str) -> Result<&'v Value, String> {
    if merge_key.is_empty() {
        return Ok(v);
    }
    v.as_object()
        .ok_or_else(|| format!("expected a map in the list, got {v}"))?
        .get(merge_key)
        .ok_or_else(|| format!("map: {v} does not contain declared merge key: {merge_key}"))
}

/// Whether the lists hold maps (true) or scalars (false); all items must be of one type.
fn element_kind(items: &[&Value]) -> Result<bool, String> {
    let first = items.first().ok_or("no elements in any of the given slices")?;
    if first.is_array() {
        return Err("lists of lists are not supported".into());
    }
    if items.iter().any(|v| !same_kind(v, first)) {
        return Err("list element types are not identical".into());
    }
    Ok(first.is_object())
}

fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    at: At,
    merge_key: &str,
    delete_list: bool,
) -> Result<Vec<Value>, String> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let both: Vec<&Value> = original.iter().chain(&patch).collect();
    let is_map = element_kind(&both)?;
    let (original, patch, merged) = if !is_map {
        if delete_list {
            let gone: HashSet<String> = patch.iter().map(Value::to_string).collect();
            return Ok(original.into_iter().filter(|v| !gone.contains(&v.to_string())).collect());
        }
        let mut merged: Vec<Value> = Vec::new();
        let mut seen = HashSet::new();
        for v in original.iter().chain(&patch) {
            if seen.insert(v.to_string()) {
                merged.push(v.clone());
            }
        }
        (original, patch, merged)
    } else {
        if merge_key.is_empty() {
            let name = match at {
                At::Struct(ty) => short(ty),
                _ => "",
            };
            return Err(format!("cannot merge lists without merge key for {name}"));
        }
        let (original, patch) = special_elements(original, patch, merge_key)?;
        let mut merged = original.clone();
        // Every item is a map (element_kind); the first with a key is the one merged into.
        let mut at_key = positions(&merged, merge_key);
        for p in &patch {
            let pk = key_of(p, merge_key)?.to_string();
            match at_key.get(&pk).copied() {
                Some(i) => {
                    let o = std::mem::take(&mut merged[i]);
                    let (Value::Object(o), Value::Object(pm)) = (o, p.clone()) else {
                        return Err("expected maps in the list".into());
                    };
                    merged[i] = Value::Object(merge_map(o, pm, at)?);
                }
                None => {
                    at_key.insert(pk, merged.len());
                    merged.push(p.clone());
                }
            }
        }
        (original, patch, merged)
    };
    let (in_patch, server_only) = partition(merged, &patch, merge_key, is_map)?;
    order_merged(in_patch, server_only, &patch, &original, merge_key, is_map)
}

/// `$patch: delete` items delete by merge key, `$patch: replace` makes the patch the list.
fn special_elements(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>), String> {
    let mut plain = Vec::new();
    let mut replace = false;
    let mut deleted = HashSet::new();
    for v in patch {
        let Some(d) = v.get(PATCH) else {
            plain.push(v);
            continue;
        };
        match d.as_str() {
            Some("delete") => {
                let k = key_of(&v, merge_key)?.to_string();
                // Checked at the first delete, on the list as it came (the deletes apply after).
                if deleted.is_empty()
                    && let Some(i) = original.iter().position(|o| !o.is_object())
                {
                    return Err(format!("value for key {i} is not a map"));
                }
                deleted.insert(k);
            }
            Some("replace") => replace = true,
            Some("merge") => return Err("merging lists cannot yet be specified in the patch".into()),
            _ => return Err(format!("unknown patch type: {d} in map: {v}")),
        }
    }
    if !deleted.is_empty() {
        original.retain(|o| o.get(merge_key).is_none_or(|k| !deleted.contains(&k.to_string())));
    }
    Ok(if replace { (plain, Vec::new()) } else { (original, plain) })
}

/// The merged items the patch (or order list) names, and the others.
fn partition(
    merged: Vec<Value>,
    by: &[Value],
    merge_key: &str,
    is_map: bool,
) -> Result<(Vec<Value>, Vec<Value>), String> {
    let mk = if is_map { merge_key } else { "" };
    let names = positions(by, mk);
    let mut named = Vec::new();
    let mut others = Vec::new();
    for v in merged {
        let found = names.contains_key(&key_of(&v, mk)?.to_string());
        if found { named.push(v) } else { others.push(v) }
    }
    Ok((named, others))
}

/// Where each key first appears in `list` (the item itself for scalars, `mk`'s value for maps;
/// maps without it are left out), by its JSON text: one hash lookup instead of a scan, so a
/// long list merges in linear time (Value has no Hash; equal values print the same text).
fn positions(list: &[Value], mk: &str) -> HashMap<String, usize> {
    let mut at = HashMap::with_capacity(list.len());
    for (i, x) in list.iter().enumerate() {
        let k = if mk.is_empty() { Some(x) } else { x.get(mk) };
        if let Some(k) = k {
            at.entry(k.to_string()).or_insert(i);
        }
    }
    at
}

/// `v`'s position in the list `at` was built from.
fn index(at: &HashMap<String, usize>, v: &Value, mk: &str) -> Option<usize> {
    let k = if mk.is_empty() { Some(v) } else { v.get(mk) };
    k.and_then(|k| at.get(&k.to_string()).copied())
}

/// Patch items in the patch's order, the others in the original's, interleaved by the
/// original's order where both are in it (apimachinery's normalizeElementOrder).
fn order_merged(
    mut in_patch: Vec<Value>,
    mut server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    is_map: bool,
) -> Result<Vec<Value>, String> {
    let mk = if is_map { merge_key } else { "" };
    if is_map {
        for v in in_patch.iter().chain(&server_only).chain(patch_order).chain(server_order) {
            key_of(v, mk)?;
        }
    }
    let (patch_at, server_at) = (positions(patch_order, mk), positions(server_order, mk));
    let by = |at: &HashMap<String, usize>, list: &mut Vec<Value>| {
        list.sort_by_cached_key(|v| index(at, v, mk).unwrap_or(usize::MAX));
    };
    by(&patch_at, &mut in_patch);
    by(&server_at, &mut server_only);
    let mut out = Vec::with_capacity(in_patch.len() + server_only.len());
    let (mut left, mut right) = (server_only.into_iter().peekable(), in_patch.into_iter().peekable());
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => {
                matches!((index(&server_at, l, mk), index(&server_at, r, mk)), (Some(li), Some(ri)) if li < ri)
            }
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    Ok(out)
}
