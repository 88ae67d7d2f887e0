//! The Go types kubeadm patches, as a table generated from their source (schema.tsv, made by
//! `cd realk8s && go run ./patchschema`): each JSON field's encoding, and the patch strategy
//! and merge key its struct tags give it. Strategic merge reads the strategies; the decode
//! after a patch reads the encodings.

use std::collections::HashMap;
use std::io::Read;
use std::sync::OnceLock;

/// schema.tsv, deflated by build.rs (8 KB in the binary rather than 64 KB).
const DEFLATED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/schema.tsv.deflate"));

/// The table's text, inflated once.
fn table() -> &'static str {
    static T: OnceLock<String> = OnceLock::new();
    T.get_or_init(|| {
        let mut text = String::new();
        // Invariant: build.rs deflated the UTF-8 file (a unit test compares the two).
        let _ = flate2::read::DeflateDecoder::new(DEFLATED).read_to_string(&mut text);
        text
    })
}

/// How a field is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Struct,
    List,
    Map,
    String,
    Int,
    Float,
    Bool,
    Bytes,
    /// A type with its own JSON encoding (Quantity, IntOrString, Time, Duration, …).
    Opaque,
    /// An interface{}.
    Any,
}

/// What a list or map holds, or which struct a field is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Elem<'a> {
    pub kind: Kind,
    /// The struct's type name (structs only).
    pub ty: &'a str,
}

#[derive(Debug, Clone)]
pub(crate) struct Field<'a> {
    pub name: &'a str,
    pub kind: Kind,
    /// A struct field's type, or a list's or map's element.
    pub elem: Elem<'a>,
    pub omitempty: bool,
    pub omitzero: bool,
    pub ptr: bool,
    /// `merge`, `replace`, or none; `retainKeys` is only a flag.
    pub strategy: &'a str,
    pub merge_key: &'a str,
}

pub(crate) struct Schema {
    types: HashMap<&'static str, Vec<Field<'static>>>,
    roots: HashMap<&'static str, &'static str>,
}

fn kind(s: &str) -> Kind {
    match s {
        "struct" => Kind::Struct,
        "list" => Kind::List,
        "map" => Kind::Map,
        "string" => Kind::String,
        "int" => Kind::Int,
        "float" => Kind::Float,
        "bool" => Kind::Bool,
        "bytes" => Kind::Bytes,
        "any" => Kind::Any,
        _ => Kind::Opaque,
    }
}

/// `struct:api.core.v1.Container` (a list's element), `api.core.v1.Probe` (a struct field).
fn elem(field_kind: Kind, s: &'static str) -> Elem<'static> {
    match field_kind {
        Kind::Struct => Elem { kind: Kind::Struct, ty: s },
        Kind::List | Kind::Map => {
            let (k, ty) = s.split_once(':').unwrap_or((s, ""));
            Elem { kind: kind(k), ty }
        }
        // Which type encodes itself (Quantity, IntOrString, …): the decode needs the name.
        Kind::Opaque => Elem { kind: Kind::Opaque, ty: s },
        k => Elem { kind: k, ty: "" },
    }
}

fn parse() -> Schema {
    let mut types: HashMap<&str, Vec<Field>> = HashMap::new();
    let mut roots = HashMap::new();
    for line in table().lines().filter(|l| !l.starts_with('#')) {
        let c: Vec<&'static str> = line.split('\t').collect();
        if c[0] == "root" {
            roots.insert(c[1], c[2]);
            continue;
        }
        let k = kind(c[2]);
        let flags: Vec<&str> = c[4].split(',').collect();
        let dash = |s: &'static str| if s == "-" { "" } else { s };
        types.entry(c[0]).or_default().push(Field {
            name: c[1],
            kind: k,
            elem: elem(k, c[3]),
            omitempty: flags.contains(&"omitempty"),
            omitzero: flags.contains(&"omitzero"),
            ptr: flags.contains(&"ptr"),
            strategy: dash(c[5]).split(',').find(|s| *s != "retainKeys").unwrap_or(""),
            merge_key: dash(c[6]),
        });
    }
    Schema { types, roots }
}

/// The generated table, parsed once.
pub(crate) fn schema() -> &'static Schema {
    static S: OnceLock<Schema> = OnceLock::new();
    S.get_or_init(parse)
}

impl Schema {
    /// The type a target document is (`pod`, `deployment`, `daemonset`, `kubeletconfiguration`).
    pub(crate) fn root(&self, name: &str) -> &'static str {
        // Invariant: the four roots are in the generated table (a unit test reads each).
        self.roots.get(name).copied().unwrap_or("")
    }

    pub(crate) fn fields(&self, ty: &str) -> &[Field<'static>] {
        self.types.get(ty).map(Vec::as_slice).unwrap_or(&[])
    }

    pub(crate) fn field(&self, ty: &str, name: &str) -> Option<&Field<'static>> {
        self.fields(ty).iter().find(|f| f.name == name)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_shipped_table_is_schema_tsv() {
        assert_eq!(super::table(), include_str!("schema.tsv"));
    }
}
