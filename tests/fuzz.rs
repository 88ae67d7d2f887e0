//! A bounded mutation fuzzer for every parser of untrusted input (stable Rust has no libFuzzer,
//! so this is a plain mutator over a checked-in seed corpus in tests/fuzz-corpus/<target>/).
//! Each target runs for FUZZ_SECONDS (default 3; CI sets more; 3 s at most where a cargo-fuzz
//! target covers the parser); any panic fails the test and the
//! input is saved under target/fuzz-crashes/. Prints executions per second and totals.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{Duration, Instant};

use kubestrap::discovery::{CaPin, Token};

// A global allocator and the raw reads it needs to save an input without allocating.
#[allow(unsafe_code)]
#[path = "fuzz/bounds.rs"]
mod bounds;

#[global_allocator]
static ALLOC: bounds::Counting = bounds::Counting;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: fast, good enough to pick mutations.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
}

/// Tokens that steer YAML/JSON/PEM parsers into their less common paths.
const DICTIONARY: &[&[u8]] = &[
    b":",
    b"- ",
    b"---\n",
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b"'",
    b"\n",
    b"  ",
    b"null",
    b"~",
    b"&a ",
    b"*a",
    b"!!binary ",
    b"<<: ",
    b"? ",
    b"|",
    b">",
    b"#",
    b",",
    b"0x",
    b"-1",
    b"99999999999999999999",
    b"1e400",
    b"\\u0000",
    b"\xff\xfe",
    b"-----BEGIN CERTIFICATE-----\n",
    b"-----END CERTIFICATE-----\n",
    b"-----BEGIN PRIVATE KEY-----\n",
    b"=",
    b"apiVersion: ",
    b"kind: ",
    b"kubeadm.k8s.io/v1beta4",
    b"InitConfiguration",
    b"ClusterConfiguration",
    b"JoinConfiguration",
    b"#cloud-config\n",
    b"kubestrap:",
    b"\x1f\x8b",
    b"jws-kubeconfig-abcdef",
    b"sha256:",
    b"::",
    b"/",
    b".",
    b"h",
    b"ms",
];

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], input: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        let len = input.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                input[i] = rng.next() as u8;
            }
            2 => {
                let at = rng.below(len + 1);
                let word = DICTIONARY[rng.below(DICTIONARY.len())];
                input.splice(at..at, word.iter().copied());
            }
            3 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(16)).min(len);
                input.drain(a..b);
            }
            4 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(64)).min(len);
                let chunk = input[a..b].to_vec();
                let at = rng.below(len + 1);
                input.splice(at..at, chunk);
            }
            5 => {
                let other = &seeds[rng.below(seeds.len())];
                if !other.is_empty() {
                    let a = rng.below(other.len());
                    let b = (a + 1 + rng.below(128)).min(other.len());
                    let at = rng.below(len + 1);
                    input.splice(at..at, other[a..b].iter().copied());
                }
            }
            6 if len > 0 => input.truncate(rng.below(len)),
            _ => {
                // Deep nesting, a classic parser killer.
                let depth = 1 + rng.below(300);
                let at = rng.below(len + 1);
                let open: Vec<u8> = std::iter::repeat_n(if rng.below(2) == 0 { b'[' } else { b'{' }, depth).collect();
                input.splice(at..at, open);
            }
        }
        if input.len() > 256 * 1024 {
            input.truncate(256 * 1024);
        }
    }
}

/// The committed corpus of `target`, by file name: seeds, and every input that once crashed,
/// hung or blew up a parser (`crash-*`), each replayed on every run.
fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus").join(target);
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("seed corpus {}: {e}", dir.display()))
        .map(|e| {
            let p = e.unwrap().path();
            (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap())
        })
        .collect();
    v.sort();
    assert!(!v.is_empty(), "empty seed corpus for {target}");
    v
}

/// FUZZ_SECONDS, except for a parser that also has a cargo-fuzz target (fuzz/fuzz_targets/,
/// run coverage-guided by scripts/fuzz): there this mutator is a smoke run of at most 3 s.
fn budget(target: &str) -> Duration {
    let secs = std::env::var("FUZZ_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3.0f64);
    let twin = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fuzz/fuzz_targets/{}.rs", target.replace('-', "_")));
    Duration::from_secs_f64(if twin.exists() { secs.min(3.0) } else { secs })
}

/// Runs `f` on every committed input, then on mutated ones until the budget is spent; fails on
/// the first panic, and on an input past the memory or time bounds (bounds.rs).
fn fuzz(target: &str, f: impl Fn(&[u8])) {
    let named = seeds(target);
    let seeds: Vec<Vec<u8>> = named.iter().map(|(_, b)| b.clone()).collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ target.len() as u64);
    let start = Instant::now();
    let mut execs = 0u64;
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut crash: Option<(String, Vec<u8>, String)> = None;
    let run = |name: &str, input: &[u8], dump: &std::fs::File| match bounds::bounded(name, input, dump, || {
        catch_unwind(AssertUnwindSafe(|| f(input)))
    }) {
        Ok(Ok(())) => None,
        Ok(Err(_)) => Some((name.to_string(), input.to_vec(), "a panic".to_string())),
        Err(why) => Some((name.to_string(), input.to_vec(), why)),
    };
    // The committed inputs first, each under its own name.
    for (file, s) in &named {
        let name = format!("{target}/{file}");
        let dump = std::fs::File::create(bounds::crash_file(&name)).unwrap();
        crash = crash.or_else(|| run(&name, s, &dump));
        drop(dump);
        let _ = std::fs::remove_file(bounds::crash_file(&name));
    }
    let mutated = format!("{target}-mutated");
    let dump = std::fs::File::create(bounds::crash_file(&mutated)).unwrap();
    let budget = budget(target);
    while crash.is_none() && start.elapsed() < budget {
        let mut input = seeds[rng.below(seeds.len())].clone();
        mutate(&mut rng, &seeds, &mut input);
        execs += 1;
        crash = run(&mutated, &input, &dump);
    }
    drop(dump);
    let _ = std::fs::remove_file(bounds::crash_file(&mutated));
    std::panic::set_hook(quiet);
    let secs = start.elapsed().as_secs_f64();
    println!(
        "fuzz {target}: {} committed inputs, {execs} executions in {secs:.1} s ({:.0}/s)",
        named.len(),
        execs as f64 / secs.max(1e-9)
    );
    if let Some((name, c, why)) = crash {
        let file = bounds::crash_file(&format!("{name}-{}", std::process::id()));
        let _ = std::fs::write(&file, &c);
        if why == "a panic" {
            // Re-run with the normal hook so the panic message is shown.
            f(&c);
        }
        panic!(
            "{name}: {why} (input saved as {}; once fixed, commit it as tests/fuzz-corpus/{target}/crash-<what>)",
            file.display()
        );
    }
}

fn text(b: &[u8]) -> Option<&str> {
    std::str::from_utf8(b).ok()
}

#[test]
fn fuzz_kubeadm_config() {
    let host =
        kubestrap::config::HostFacts { hostname: "node".into(), default_address: Some("10.0.0.1".parse().unwrap()) };
    fuzz("kubeadm-config", |b| {
        if let Some(Ok(docs)) = text(b).map(|t| kubestrap::config::parse_documents("fuzz", t)) {
            let _ = kubestrap::config::resolve_init("fuzz", docs, &host);
        }
    });
}

#[test]
fn fuzz_kubeconfig() {
    fuzz("kubeconfig", |b| {
        if let Ok(k) = kubestrap::kubeconfig::Kubeconfig::parse(b) {
            let _ = k.current();
        }
    });
}

#[test]
fn fuzz_pem() {
    fuzz("pem-key", |b| {
        let _ = kubestrap::pki::keys::parse_pem(b);
    });
    fuzz("pem-cert", |b| {
        let _ = kubestrap::pki::check::CertFile::parse(b).map(|c| c.spki());
        let _ = kubestrap::pki::ca_hash(b);
    });
}

#[test]
fn fuzz_cluster_info() {
    let token = Token::parse("abcdef.0123456789abcdef").unwrap();
    let pins = [CaPin::parse("sha256:345959acb2c3b2feb87d281961c893f62a314207ef02599f1cc4a5fb255480b3").unwrap()];
    fuzz("cluster-info", |b| {
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(b) {
            let _ = kubestrap::discovery::validate_cluster_info(&v, &token, &pins, false);
            let _ = kubestrap::discovery::validate_cluster_info(&v, &token, &[], true);
        }
    });
}

#[test]
fn fuzz_api_responses() {
    fuzz("csr-status", |b| {
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(b) {
            let _ = kubestrap::csr::certificate_from_status(&v);
        }
    });
    fuzz("token-secret", |b| {
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(b) {
            let _ = kubestrap::objects::tokens::parse_token_secret(&v);
        }
    });
    fuzz("cri-reply", |b| {
        let _ = kubestrap::cri::parse_reply(b);
    });
}

#[test]
fn fuzz_iso9660() {
    fuzz("iso9660", |b| {
        use kubestrap::datasource::iso9660::Root;
        if let Ok(Some(root)) = Root::read_from(Box::<[u8]>::from(b)) {
            for name in root.entries.keys() {
                let _ = root.read(name, 1 << 20);
            }
        }
    });
}

#[test]
fn fuzz_values() {
    fuzz("values", |b| {
        if let Some(t) = text(b) {
            let _ = Token::parse(t);
            let _ = CaPin::parse(t);
            let _ = kubestrap::config::values::parse_duration(t);
            let _ = kubestrap::config::values::Version::parse(t);
            let _ = kubestrap::config::values::Cidr::parse(t).map(|c| c.nth(10));
            let _ = kubestrap::config::values::parse_cidr_list(t);
        }
    });
}

#[test]
fn the_harness_reports_a_panicking_parser() {
    // A planted bug must be found, or a green fuzz run would mean nothing.
    let caught = catch_unwind(|| {
        fuzz("values", |b| {
            if b.windows(2).any(|w| w == b"::") {
                panic!("planted");
            }
        })
    });
    assert!(caught.is_err(), "the fuzzer missed a planted panic");
}

#[test]
fn the_harness_reports_a_parser_that_takes_too_much_memory() {
    // A planted memory hog on one committed input (the first values seed), as the patch file
    // bomb was: its test must fail naming it, not take the machine.
    let first = seeds("values")[0].1.clone();
    let caught = catch_unwind(AssertUnwindSafe(|| {
        fuzz("values", |b| {
            if b == first.as_slice() {
                let hog = vec![1u8; bounds::SOFT_BYTES + (1 << 20)];
                std::hint::black_box(&hog);
            }
        })
    }));
    let msg = caught.expect_err("the harness missed a planted memory hog");
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("values/") && msg.contains("MiB at its peak"), "{msg}");
}

#[test]
fn fuzz_user_data() {
    fuzz("user-data", |b| {
        let g = kubestrap::datasource::Gathered {
            source: "fuzz".into(),
            user_data: Some(b.to_vec()),
            meta: kubestrap::datasource::MetaData {
                local_hostname: Some("node-1".into()),
                // Something for Jinja's ds.meta_data names to walk.
                tree: serde_json::json!({"local-hostname": "node-1", "placement": {"availability-zone": "az-1a"}}),
                ..Default::default()
            },
            credentials: Default::default(),
            notices: Vec::new(),
            hostname: String::new(),
        };
        if let Ok(kubestrap::userdata::NodePlan::Init { docs, .. }) = kubestrap::userdata::plan(&g) {
            let _ = kubestrap::config::resolve_init("fuzz", docs, &kubestrap::config::HostFacts::default());
        }
    });
}

/// The variable table: a name (first line) looked up in a meta-data tree (the rest, JSON) by
/// every datasource's rules, and Afterburn's values from it.
#[test]
fn fuzz_metadata_vars() {
    fuzz("metadata-vars", |b| {
        let Some(t) = text(b) else { return };
        let (name, tree) = t.split_once('\n').unwrap_or((t, "{}"));
        let tree: serde_json::Value = serde_json::from_str(tree).unwrap_or_default();
        for source in ["nocloud", "configdrive", "ec2", "credentials"] {
            let str_of = |k: &str| tree.get(k).and_then(|v| v.as_str()).map(str::to_string);
            let meta = kubestrap::datasource::MetaData {
                instance_id: str_of("instance-id"),
                local_hostname: str_of("local-hostname"),
                tree: tree.clone(),
            };
            let g = kubestrap::datasource::Gathered { source: source.into(), meta, ..Default::default() };
            let v = kubestrap::datasource::vars::Vars::new(&g);
            let _ = v.jinja(name);
            for (k, val) in v.afterburn() {
                assert!(!val.contains('\n') && !k.contains('='), "{k}={val}");
            }
        }
    });
}

/// A patch file: the first line its name, the rest its text (kubeadm's patch directories).
#[test]
fn fuzz_patch_file() {
    fuzz("patch-file", kubestrap::patches::fuzzing::patch_file);
}

/// A strategic merge patch (the second JSON value, or the only one) on an original (the first)
/// for a static Pod and a KubeletConfiguration, then the Go type's decode and encode.
#[test]
fn fuzz_strategic_merge() {
    fuzz("strategic-merge", kubestrap::patches::fuzzing::strategic_merge);
}
