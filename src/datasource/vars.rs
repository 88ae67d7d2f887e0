//! One table of metadata variables, so a name means the same value everywhere: cloud-init's
//! Jinja names (`ds.meta_data.*` dotted or bracketed, nested, `v1.*` and the `v1` names alone),
//! Afterburn's environment (`COREOS_<PLATFORM>_*`, `AFTERBURN_<PLATFORM>_*`) and `${VAR}` in
//! envsubst'd files (issue #22, item 3).
//!
//! `ds.meta_data` is the datasource's meta-data tree as it gave it; a dashed key is also found
//! by its underscore spelling (`local-hostname` as `local_hostname`), as cloud-init aliases
//! them. The `v1` keys are derived per datasource (see [`Kind`]). The node name the `kubestrap:`
//! shorthand defaults to is `v1.local_hostname`: both read [`super::MetaData::local_hostname`].

use std::collections::BTreeMap;

use serde_json::Value;

use super::Gathered;

/// A name no datasource supplied: the error says the name and the datasource.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} is not supplied by the {datasource} datasource{hint}")]
pub struct VarError {
    pub name: String,
    pub datasource: String,
    /// Extra advice, starting with "; " or empty.
    pub hint: String,
}

/// Which family a datasource belongs to: where its `v1` keys and Afterburn values come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Kind {
    /// nocloud, nocloud-seed, nocloud-net, file: NoCloud meta-data (`local-hostname`, ...).
    NoCloud,
    /// configdrive: OpenStack's meta_data.json (`uuid`, `hostname`, `availability_zone`).
    OpenStack,
    /// ec2: IMDS keys (`placement/availability-zone`, `placement/region`, `local-ipv4`, ...).
    Ec2,
    /// credentials (or anything else): no meta-data.
    #[default]
    None,
}

impl Kind {
    fn of(source: &str) -> Kind {
        match source {
            "nocloud" | "nocloud-seed" | "nocloud-net" | "file" => Kind::NoCloud,
            "configdrive" => Kind::OpenStack,
            "ec2" => Kind::Ec2,
            _ => Kind::None,
        }
    }

    /// cloud-init's `v1.cloud_name` and `v1.platform`.
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Kind::NoCloud => ("nocloud", "nocloud"),
            Kind::OpenStack => ("openstack", "openstack"),
            Kind::Ec2 => ("aws", "ec2"),
            Kind::None => ("unknown", "unknown"),
        }
    }

    /// The platform word in Flatcar's `COREOS_<P>_*` and Afterburn's `AFTERBURN_<P>_*`. NoCloud
    /// has no Afterburn platform: kubestrap names it `NOCLOUD` in both (documented).
    fn afterburn_platform(self) -> Option<(&'static str, &'static str)> {
        match self {
            Kind::NoCloud => Some(("NOCLOUD", "NOCLOUD")),
            Kind::OpenStack => Some(("OPENSTACK", "OPENSTACK")),
            Kind::Ec2 => Some(("EC2", "AWS")),
            Kind::None => None,
        }
    }
}

/// The variables of one boot, built from what the datasource gathered. `Debug` shows the
/// meta-data's keys, not its values (see [`super::MetaData`]).
#[derive(Clone, Default)]
pub struct Vars {
    source: String,
    kind: Kind,
    /// `ds.meta_data`: the raw tree.
    meta: Value,
    /// The `v1` keys this datasource supplies, by their underscore names.
    v1: BTreeMap<&'static str, String>,
}

impl std::fmt::Debug for Vars {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<&str> = self.meta.as_object().map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default();
        f.debug_struct("Vars")
            .field("source", &self.source)
            .field("kind", &self.kind)
            .field("meta_data_keys", &keys)
            .field("v1", &self.v1)
            .finish()
    }
}

/// A string, number or boolean leaf as Jinja prints it; None for anything else.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "True" } else { "False" }.to_string()),
        _ => None,
    }
}

/// The child `key` of a mapping, also under its dashed spelling (cloud-init's alias rule).
fn child<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    match v {
        Value::Object(m) => {
            m.get(key).or_else(|| m.iter().find(|(k, _)| k.replace('-', "_") == key.replace('-', "_")).map(|(_, c)| c))
        }
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    }
    .filter(|c| !c.is_null())
}

/// The first of `paths` (each a list of keys) the tree has as a value.
fn first(tree: &Value, paths: &[&[&str]]) -> Option<String> {
    paths.iter().find_map(|p| p.iter().try_fold(tree, |at, k| child(at, k)).and_then(scalar))
}

impl Vars {
    pub fn new(g: &Gathered) -> Vars {
        let source = if g.source.is_empty() { "unknown".to_string() } else { g.source.clone() };
        let kind = Kind::of(&source);
        let mut meta = if g.meta.tree.is_null() { Value::Object(Default::default()) } else { g.meta.tree.clone() };
        // The two values planning reads win, so that a name means one value everywhere (the
        // kernel command line's `h=` overrides the seed's meta-data, for instance). OpenStack's
        // tree gets them under these names too (from `uuid` and `hostname`), as cloud-init
        // copies them, so Cluster API's `ds.meta_data.local_hostname` works on a config drive.
        if kind != Kind::None {
            for (key, v) in [("instance-id", &g.meta.instance_id), ("local-hostname", &g.meta.local_hostname)] {
                if let Some(v) = v {
                    super::metadata::set_key(&mut meta, key, v);
                }
            }
        }
        let (cloud_name, platform) = kind.names();
        let mut v1: BTreeMap<&'static str, String> = BTreeMap::new();
        v1.insert("cloud_name", cloud_name.into());
        v1.insert("platform", platform.into());
        let mut put = |k: &'static str, v: Option<String>| {
            if let Some(v) = v.filter(|v| !v.is_empty()) {
                v1.insert(k, v);
            }
        };
        put("instance_id", g.meta.instance_id.clone());
        put("local_hostname", g.meta.local_hostname.clone());
        let (zone, region) = match kind {
            Kind::Ec2 => {
                let zone = first(&meta, &[&["placement", "availability-zone"]]);
                // cloud-init's rule when IMDS has no region: the zone less its letter.
                let from_zone = zone.as_deref().map(|z| z.trim_end_matches(|c: char| c.is_ascii_lowercase()).into());
                (zone, first(&meta, &[&["placement", "region"]]).or(from_zone))
            }
            Kind::OpenStack => (first(&meta, &[&["availability_zone"]]), first(&meta, &[&["region"]])),
            Kind::NoCloud => (
                first(&meta, &[&["availability-zone"], &["placement", "availability-zone"]]),
                first(&meta, &[&["region"], &["placement", "region"]]),
            ),
            Kind::None => (None, None),
        };
        put("availability_zone", zone);
        put("region", region);
        Vars { source, kind, meta, v1 }
    }

    fn missing(&self, name: &str, hint: String) -> VarError {
        VarError { name: name.into(), datasource: self.source.clone(), hint }
    }

    /// A Jinja variable as cloud-init names it: `ds.meta_data.local_hostname`,
    /// `ds.meta_data["local-hostname"]`, `ds.meta_data.placement.availability_zone`,
    /// `v1.local_hostname`, `v1['availability-zone']`, `local_hostname`.
    pub fn jinja(&self, name: &str) -> Result<String, VarError> {
        let Some(path) = parse_name(name) else {
            let hint = "; kubestrap fills plain variables only (ds.meta_data.KEY, ds.meta_data[\"KEY\"], v1.KEY)";
            return Err(self.missing(name, hint.into()));
        };
        let keys: Vec<&str> = path.iter().map(String::as_str).collect();
        match keys.as_slice() {
            ["ds", "meta_data" | "meta-data", rest @ ..] if !rest.is_empty() => self.meta_data(name, rest),
            ["v1", key] | [key] => self.v1(name, key),
            _ => Err(self.missing(name, "; kubestrap knows ds.meta_data.*, v1.* and the v1 names alone".into())),
        }
    }

    fn v1(&self, name: &str, key: &str) -> Result<String, VarError> {
        let key = key.replace('-', "_");
        if let Some(v) = self.v1.get(key.as_str()) {
            return Ok(v.clone());
        }
        let has: Vec<&str> = self.v1.keys().copied().collect();
        Err(self.missing(name, format!("; its v1 keys are {}", has.join(", "))))
    }

    fn meta_data(&self, name: &str, keys: &[&str]) -> Result<String, VarError> {
        let mut at = &self.meta;
        for (i, k) in keys.iter().enumerate() {
            match child(at, k) {
                Some(c) => at = c,
                // VMware's datasource calls local-hostname `hostname` (Cluster API's vSphere
                // templates use it); NoCloud meta-data rarely has one of its own.
                None if keys == ["hostname"]
                    && self.kind == Kind::NoCloud
                    && self.v1.contains_key("local_hostname") =>
                {
                    return self.v1(name, "local_hostname");
                }
                None => {
                    let here: Vec<&str> = match at {
                        Value::Object(m) => m.keys().map(String::as_str).take(20).collect(),
                        _ => Vec::new(),
                    };
                    let parent = if i == 0 { "the meta-data".to_string() } else { keys[..i].join(".") };
                    let hint = match here.is_empty() {
                        true => format!("; {parent} has no keys"),
                        false => format!("; {parent} has {}", here.join(", ")),
                    };
                    return Err(self.missing(name, hint));
                }
            }
        }
        scalar(at)
            .ok_or_else(|| self.missing(name, "; it is a mapping or list, not one value: name a key inside it".into()))
    }

    /// Afterburn's values for this platform as (KEY, value): HOSTNAME, INSTANCE_ID (OpenStack:
    /// INSTANCE_UUID), IPV4_LOCAL, IPV4_PUBLIC, REGION, AVAILABILITY_ZONE, where supplied.
    fn platform_values(&self) -> Vec<(&'static str, String)> {
        let m = &self.meta;
        let v1 = |k: &str| self.v1.get(k).cloned();
        let mut out = vec![
            ("HOSTNAME", first(m, &[&["hostname"]]).or_else(|| v1("local_hostname"))),
            (if self.kind == Kind::OpenStack { "INSTANCE_UUID" } else { "INSTANCE_ID" }, v1("instance_id")),
            ("IPV4_LOCAL", first(m, &[&["local-ipv4"]])),
            ("IPV4_PUBLIC", first(m, &[&["public-ipv4"]])),
            ("REGION", v1("region")),
            ("AVAILABILITY_ZONE", v1("availability_zone")),
        ];
        if self.kind == Kind::OpenStack {
            // OpenStack's hostname is meta_data.json's own key, never a fallback.
            out[0].1 = first(m, &[&["hostname"]]);
        }
        // A value with a line break (or other control character) would break the KEY=VALUE file.
        out.into_iter()
            .filter_map(|(k, v)| v.filter(|v| !v.is_empty() && !v.chars().any(char::is_control)).map(|v| (k, v)))
            .collect()
    }

    /// Afterburn's environment for this platform, both spellings: `COREOS_<P>_<KEY>` (Flatcar,
    /// `/run/metadata/flatcar`) and `AFTERBURN_<P>_<KEY>` (`/run/metadata/afterburn`).
    pub fn afterburn(&self) -> Vec<(String, String)> {
        let Some((coreos, afterburn)) = self.kind.afterburn_platform() else { return Vec::new() };
        let values = self.platform_values();
        let spell = |prefix: String| values.iter().map(move |(k, v)| (format!("{prefix}{k}"), v.clone()));
        spell(format!("COREOS_{coreos}_")).chain(spell(format!("AFTERBURN_{afterburn}_"))).collect()
    }

    /// `${NAME}` as envsubst would see it in the pre-commands' environment.
    pub fn env(&self, name: &str) -> Result<String, VarError> {
        self.afterburn()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
            .ok_or_else(|| self.missing(name, String::new()))
    }

    /// The datasource's name, as errors give it.
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// `a.b["c-d"]['e'][0]` as its keys; None when it is not such a name (an operator, a call).
/// A `-` is allowed inside a dotted key, so `v1.availability-zone` reads as cloud-init lists it.
fn parse_name(name: &str) -> Option<Vec<String>> {
    let mut keys = Vec::new();
    let mut rest = name.trim();
    let ident = |s: &str| -> usize {
        s.char_indices()
            .find(|&(i, c)| !(c.is_ascii_alphanumeric() || c == '_' || (c == '-' && i > 0)))
            .map_or(s.len(), |(i, _)| i)
    };
    let n = ident(rest);
    if n == 0 || rest.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    keys.push(rest[..n].to_string());
    rest = &rest[n..];
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let n = ident(r);
            if n == 0 {
                return None;
            }
            keys.push(r[..n].to_string());
            rest = &r[n..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let (inner, after) = r.split_once(']')?;
            let inner = inner.trim();
            let key = match inner.chars().next()? {
                q @ ('"' | '\'') => inner.strip_prefix(q)?.strip_suffix(q)?,
                _ if inner.chars().all(|c| c.is_ascii_digit()) => inner,
                _ => return None,
            };
            keys.push(key.to_string());
            rest = after;
        } else {
            return None;
        }
    }
    Some(keys)
}

#[cfg(test)]
#[path = "vars_tests.rs"]
mod tests;
