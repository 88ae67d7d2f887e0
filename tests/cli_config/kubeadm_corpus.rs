//! Real kubeadm config files (tests/fixtures/kubeadm-configs/, origins in each ORIGIN): every one
//! goes through `kubestrap init --on-disk-only` into a scratch root (and JoinConfigurations through
//! the join resolver) and must be accepted and rendered, or refused with the field named, as its
//! EXPECT file says. Addresses are pointed at loopback before any use.

use crate::common::*;

use crate::common::needs::need;
use serde::Deserialize;
use serde_yaml::{Mapping, Value};

const DEFAULT_VERSION: &str = "v1.37.0";

/// Sets `map[key]` to `f(old)`, if `f` returns a value.
fn rewrite(map: &mut Mapping, key: &str, f: impl Fn(Option<&Value>) -> Option<Value>) {
    if let Some(v) = f(map.get(key)) {
        map.insert(key.into(), v);
    }
}

/// `host:port` → `127.0.0.1:port` (`127.0.0.1` without a port).
fn loopback_endpoint(v: Option<&Value>) -> Option<Value> {
    let s = v?.as_str()?;
    let port = s.rsplit_once(':').map(|(_, p)| p).filter(|p| p.parse::<u16>().is_ok());
    Some(match port {
        Some(p) => format!("127.0.0.1:{p}").into(),
        None => "127.0.0.1".into(),
    })
}

fn child<'a>(m: &'a mut Mapping, key: &str) -> &'a mut Mapping {
    if !m.get(key).is_some_and(Value::is_mapping) {
        m.insert(key.into(), Value::Mapping(Mapping::new()));
    }
    // Just made a mapping if it was not one.
    m.get_mut(key).and_then(Value::as_mapping_mut).expect("a mapping")
}

/// The file with every address at loopback (and the version pinned when asked). A file that is not
/// YAML is returned unchanged: kubestrap refuses it before reading any address.
fn prepare(text: &str, pin: bool) -> String {
    prepare_at(text, pin, "127.0.0.1")
}

/// [`prepare`] with the node's advertise address `addr` (the real kubeadm refuses a loopback one:
/// it runs in a namespace of its own, where 10.0.0.10 is its interface's).
fn prepare_at(text: &str, pin: bool, addr: &str) -> String {
    let docs: Result<Vec<Value>, _> = serde_yaml::Deserializer::from_str(text).map(Value::deserialize).collect();
    let Ok(docs) = docs else { return text.to_string() };
    let mut out = Vec::new();
    for mut doc in docs.into_iter().filter(|d| !d.is_null()) {
        if let Some(m) = doc.as_mapping_mut() {
            match m.get("kind").and_then(Value::as_str) {
                Some("InitConfiguration") => {
                    child(m, "localAPIEndpoint").insert("advertiseAddress".into(), addr.into());
                }
                Some("ClusterConfiguration") => {
                    rewrite(m, "controlPlaneEndpoint", loopback_endpoint);
                    if pin {
                        m.insert("kubernetesVersion".into(), DEFAULT_VERSION.into());
                    }
                    if let Some(ext) =
                        m.get_mut("etcd").and_then(|e| e.get_mut("external")).and_then(Value::as_mapping_mut)
                    {
                        rewrite(ext, "endpoints", |v| {
                            let list = v?.as_sequence()?;
                            Some(Value::Sequence(
                                list.iter()
                                    .map(|e| {
                                        let s = e.as_str().unwrap_or_default();
                                        let scheme = s.split_once("://").map_or("https", |(sc, _)| sc);
                                        let port = s.rsplit_once(':').map_or("2379", |(_, p)| p);
                                        format!("{scheme}://127.0.0.1:{port}").into()
                                    })
                                    .collect(),
                            ))
                        });
                    }
                }
                Some("JoinConfiguration") => {
                    if let Some(bt) =
                        m.get_mut("discovery").and_then(|d| d.get_mut("bootstrapToken")).and_then(Value::as_mapping_mut)
                    {
                        rewrite(bt, "apiServerEndpoint", loopback_endpoint);
                    }
                }
                _ => {}
            }
        }
        out.push(serde_yaml::to_string(&doc).expect("re-encode"));
    }
    out.join("---\n")
}

struct Case {
    name: String,
    text: String,
    expect: Vec<(String, String)>,
}

/// The oracle namespace's own address.
const ORACLE_ADDR: &str = kubeadm_oracle::ADDR;

/// The real kubeadm v1.37.2's verdict on a config for `init` (`config validate`, which loads,
/// defaults and validates every document, and `config images list`, which needs an init
/// configuration) or `join` (`config validate`), in the oracle's namespaces
/// (tests/common/kubeadm_oracle.rs: kubeadm finds a default interface, 10.0.0.10, for the
/// defaults it computes, and nothing leaves).
fn kubeadm_accepts(text: &str, what: &str) -> (bool, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, text).expect("write config");
    let (k, f) = (kubeadm_oracle::kubeadm(), file.display());
    let images =
        if what == "init" { format!(" && '{k}' config images list --config '{f}' >/dev/null") } else { String::new() };
    let run = kubeadm_oracle::run_isolated(dir.path(), &format!("'{k}' config validate --config '{f}'{images}"), None);
    (run.code == Some(0), run.why())
}

/// The EXPECT verdict (`accept`/`refuse`) against the real kubeadm's on the same text; a
/// `differs <reason>` line records a deliberate difference (docs/differences.md), which
/// must still be one.
fn oracle(c: &Case, what: &str, text: &str, want: &str, failures: &mut Vec<String>) {
    let (accepts, why) = kubeadm_accepts(text, what);
    let ours = want.starts_with("accept");
    // The version check is kubeadm's own rule; a difference is about the EXPECT verdicts.
    let differs = if want.contains("the file's own version") {
        None
    } else {
        let verb = what.split_whitespace().next().unwrap_or(what);
        c.expect
            .iter()
            .filter(|(k, _)| k == "differs")
            .find_map(|(_, v)| v.strip_prefix(verb).map(str::trim).map(String::from))
    };
    match (accepts == ours, differs) {
        (true, None) => {}
        (false, Some(_)) => {}
        (true, Some(reason)) => failures.push(format!(
            "{}: {what}: EXPECT records a difference ({reason}) but the real kubeadm agrees ({want})",
            c.name
        )),
        (false, None) => failures.push(format!(
            "{}: {what}: EXPECT says {want:?}, the real kubeadm v1.37.2 {}: {why}",
            c.name,
            if accepts { "accepts it" } else { "refuses it" }
        )),
    }
}

fn cases() -> Vec<Case> {
    let dir = fixture_path("kubeadm-configs");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("kubeadm-configs")
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let read = |f: &str| {
                std::fs::read_to_string(dir.join(&name).join(f)).unwrap_or_else(|e| panic!("{name}/{f}: {e}"))
            };
            assert!(!read("ORIGIN").trim().is_empty(), "{name}: ORIGIN is empty");
            let expect = read("EXPECT")
                .lines()
                .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
                .map(|l| {
                    let (k, v) = l.split_once(' ').unwrap_or((l, ""));
                    (k.to_string(), v.to_string())
                })
                .collect();
            Case { text: read("config.yaml"), name, expect }
        })
        .collect()
}

/// One init run: the outcome word for the table, or a failure.
fn check_init(c: &Case, want: &str, pin: bool, failures: &mut Vec<String>) -> String {
    let s = Scratch::new(&prepare(&c.text, pin));
    let r = s.init(&[]);
    let err = r.stderr();
    let (verb, text) = want.split_once(' ').unwrap_or((want, ""));
    match verb {
        "accept" => {
            if r.code() != 0 {
                failures.push(format!("{}: init exit {} (want 0):\n{err}", c.name, r.code()));
                return "REFUSED".into();
            }
            for (k, v) in &c.expect {
                match k.as_str() {
                    "warn" if !err.contains(v.as_str()) => {
                        failures.push(format!("{}: no warning {v:?}:\n{err}", c.name));
                    }
                    "file" => {
                        let (path, needle) = v.split_once(' ').expect("file PATH TEXT");
                        let got = std::fs::read_to_string(s.path(path)).unwrap_or_default();
                        if !got.contains(needle) {
                            failures.push(format!("{}: {path} lacks {needle:?}:\n{got}", c.name));
                        }
                    }
                    _ => {}
                }
            }
            "accepted".into()
        }
        "refuse" => {
            if r.code() != 2 || !err.contains(text) || !err.contains("config.yaml") {
                failures.push(format!("{}: init exit {}, want 2 naming {text:?}:\n{err}", c.name, r.code()));
            }
            if !snapshot(&s.root()).is_empty() {
                failures.push(format!("{}: a refused init wrote files", c.name));
            }
            let first = err.lines().find(|l| l.contains("ERROR")).unwrap_or_default();
            let why = first.split_once("config.yaml: ").map_or(first, |(_, w)| w);
            format!("refused ({})", why.chars().take(100).collect::<String>())
        }
        other => panic!("{}: unknown init expectation {other:?}", c.name),
    }
}

fn check_join(c: &Case, want: &str, failures: &mut Vec<String>) -> String {
    let text = prepare(&c.text, false);
    let result = kubestrap::config::parse_documents_for("config.yaml", &text, kubestrap::config::Reads::Join)
        .map_err(|e| e.to_string())
        .and_then(|docs| docs.join.ok_or_else(|| "no JoinConfiguration".to_string()))
        .and_then(|jc| {
            kubestrap::join::resolve(&kubestrap::join::JoinFlags::default(), &jc).map_err(|e| e.message).map(|_| ())
        });
    let (verb, needle) = want.split_once(' ').unwrap_or((want, ""));
    match (verb, result) {
        ("accept", Ok(())) => "accepted".into(),
        ("refuse", Err(e)) if e.contains(needle) => format!("refused ({e})"),
        (_, r) => {
            failures.push(format!("{}: join {want:?} but got {r:?}", c.name));
            "WRONG".into()
        }
    }
}

#[test]
fn real_kubeadm_configs_are_accepted_or_refused_as_kubeadm_does() {
    need!(kubeadm_oracle::need());
    let cases = cases();
    assert!(cases.len() >= 15, "only {} kubeadm configs in the corpus", cases.len());
    let mut failures = Vec::new();
    let mut table = vec!["| config | init | join |".to_string(), "|---|---|---|".to_string()];
    for c in &cases {
        let get = |k: &str| c.expect.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
        let pin = get("pin-version").is_some();
        if pin {
            // kubeadm 1.37's minimum control-plane version refuses these; kubestrap's range does too.
            check_init(c, "refuse kubernetesVersion", false, &mut failures);
            oracle(
                c,
                "init",
                &prepare_at(&c.text, false, ORACLE_ADDR),
                "refuse (the file's own version)",
                &mut failures,
            );
        }
        // The hand-written verdicts are the real kubeadm's, or recorded differences.
        for (k, w) in c.expect.iter().filter(|(k, _)| k == "init" || k == "join") {
            oracle(c, k, &prepare_at(&c.text, pin, ORACLE_ADDR), w, &mut failures);
        }
        let init = get("init").map(|w| check_init(c, &w, pin, &mut failures)).unwrap_or_else(|| "-".into());
        let join = get("join").map(|w| check_join(c, &w, &mut failures)).unwrap_or_else(|| "-".into());
        table.push(format!("| {}{} | {init} | {join} |", c.name, if pin { " (version pinned)" } else { "" }));
    }
    println!("{}", table.join("\n"));
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n---\n"));
}

#[test]
fn addresses_are_pointed_at_loopback_before_use() {
    let text = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\ncontrolPlaneEndpoint: lb.example.com:7443\n\
                etcd:\n  external:\n    endpoints: [\"https://10.1.2.3:2379\", \"http://10.1.2.4:4001\"]\n---\n\
                apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    \
                apiServerEndpoint: 10.9.9.9:6443\n";
    let out = prepare(text, true);
    for gone in ["lb.example.com", "10.1.2.3", "10.1.2.4", "10.9.9.9"] {
        assert!(!out.contains(gone), "{gone} survived:\n{out}");
    }
    for want in
        ["controlPlaneEndpoint: 127.0.0.1:7443", "https://127.0.0.1:2379", "http://127.0.0.1:4001", "127.0.0.1:6443"]
    {
        assert!(out.contains(want), "{want} missing:\n{out}");
    }
    assert!(out.contains(&format!("kubernetesVersion: {DEFAULT_VERSION}")), "{out}");
}
