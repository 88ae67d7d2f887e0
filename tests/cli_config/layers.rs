//! The house rules of src/, checked on the source: errors flow one way (only the orchestration
//! imports the app error), init never imports join, config never reaches up to the command
//! layer, every import points down the layers, and one module-file convention.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// (file under src/, its text without test modules).
fn sources() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).expect("read");
            let code = text.split("#[cfg(test)]").next().unwrap_or_default().to_string();
            (f.strip_prefix(&src).expect("under src").display().to_string(), code)
        })
        .collect()
}

/// A module with sub-modules is `<name>/mod.rs`, never `<name>.rs` beside a `<name>/`
/// directory: one convention, so a module's files are all in its directory.
#[test]
fn a_module_with_a_directory_is_its_mod_rs() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mixed: Vec<String> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "mod.rs" && n != "lib.rs" && n != "main.rs"))
        .filter(|f| f.with_extension("").is_dir())
        .map(|f| f.strip_prefix(&src).expect("under src").display().to_string())
        .collect();
    assert!(mixed.is_empty(), "modules beside their directory (move each to <name>/mod.rs): {mixed:?}");
}

/// Files under `prefix` that name `what`.
fn naming(prefix: &str, what: &str) -> Vec<String> {
    sources().into_iter().filter(|(f, code)| f.starts_with(prefix) && code.contains(what)).map(|(f, _)| f).collect()
}

#[test]
fn only_the_orchestration_imports_the_app_error() {
    let orchestration = [
        "phases/",
        "init/",
        "join/",
        "reset/",
        "upgrade/",
        "boot",
        "commands/",
        "status.rs",
        "main.rs",
        "error.rs",
        "lib.rs",
    ];
    let below: Vec<String> =
        naming("", "crate::error").into_iter().filter(|f| !orchestration.iter().any(|o| f.starts_with(o))).collect();
    assert!(below.is_empty(), "lower layers importing crate::error: {below:?}");
}

#[test]
fn init_never_imports_join_and_config_never_reaches_the_commands() {
    assert_eq!(naming("init/", "crate::join"), Vec::<String>::new());
    assert_eq!(naming("config/", "crate::commands"), Vec::<String>::new());
    // config/ is kubeadm's API only: user-data (src/userdata/) and where it comes from are above it.
    for above in ["crate::userdata", "crate::datasource", "crate::discovery"] {
        assert_eq!(naming("config/", above), Vec::<String>::new(), "config/ names {above}");
    }
}

/// Top-level module of a file under src/ (`boot/every_boot/mod.rs` -> `boot`).
fn top(file: &str) -> &str {
    let head = file.split('/').next().unwrap_or(file);
    head.strip_suffix(".rs").unwrap_or(head)
}

#[test]
fn no_import_circle_between_top_level_modules() {
    use std::collections::{BTreeMap, BTreeSet};
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, code) in sources() {
        if file.ends_with("tests.rs") {
            continue;
        }
        let from = top(&file).to_string();
        for part in code.split("crate::").skip(1) {
            let to: String = part.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
            if !to.is_empty() && to != from {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    // Depth-first search; a module met again while still on the path closes a circle.
    fn walk(m: &str, edges: &BTreeMap<String, BTreeSet<String>>, path: &mut Vec<String>, done: &mut BTreeSet<String>) {
        if let Some(at) = path.iter().position(|p| p == m) {
            panic!("import circle: {} -> {m}", path[at..].join(" -> "));
        }
        if !done.insert(m.to_string()) {
            return;
        }
        path.push(m.to_string());
        for next in edges.get(m).into_iter().flatten() {
            walk(next, edges, path, done);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for m in edges.keys() {
        walk(m, &edges, &mut Vec::new(), &mut done);
    }
    assert!(done.len() > 10, "the graph names the modules: {done:?}");
}

/// lib.rs's layers, top first: each `// <layer>: …` comment opens a group of `pub mod`s.
fn layers() -> Vec<(String, Vec<String>)> {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).expect("lib.rs");
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in lib.lines() {
        if let Some(c) = line.strip_prefix("// ").and_then(|c| c.split_once(':')) {
            out.push((c.0.to_string(), Vec::new()));
        } else if let Some(m) = line.strip_prefix("pub mod ").and_then(|m| m.strip_suffix(';')) {
            out.last_mut().expect("a pub mod before any layer comment").1.push(m.to_string());
        }
    }
    out
}

/// The architecture is lib.rs's table, checked: every module is in a layer, and no file imports
/// from a layer above its own.
#[test]
fn every_import_points_down_the_layers_of_lib_rs() {
    let layers = layers();
    assert!(layers.len() >= 6, "lib.rs names its layers: {layers:?}");
    let rank = |m: &str| layers.iter().position(|(_, mods)| mods.iter().any(|x| x == m));
    let mut up = Vec::new();
    for (file, code) in sources() {
        let from = top(&file);
        if file.ends_with("tests.rs") || from == "lib" || from == "main" {
            continue;
        }
        let Some(r) = rank(from) else { panic!("src/{file}: module {from} is in no layer of lib.rs") };
        for part in code.split("crate::").skip(1) {
            let to: String = part.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
            if let Some(t) = rank(&to).filter(|t| *t < r) {
                up.push(format!("src/{file}: {from} ({}) -> {to} ({})", layers[r].0, layers[t].0));
            }
        }
    }
    up.sort();
    up.dedup();
    assert!(up.is_empty(), "imports pointing up the layers:\n{}", up.join("\n"));
}

/// The tests' own rules (issue #35), checked on their source: no test skips but through the one
/// helper (tests/common/needs.rs), which scripts/test turns into a failure; none is ignored by
/// attribute; and the golden files can only be rewritten by hand (scripts/test refuses
/// UPDATE_GOLDEN).
#[test]
fn no_test_skips_or_is_ignored() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for tree in ["tests", "src", "kube-double", "fuzz/fuzz_targets", "test-vm/lane", "primes"] {
        rust_files(&root.join(tree), &mut files);
    }
    assert!(files.iter().any(|f| f.starts_with(root.join("kube-double"))), "the scan reads kube-double");
    // Spelled in two halves so this file does not match itself.
    let (skip, ignore) = (["skipp", "ed"].concat(), ["#[", "ignore"].concat());
    let mut bad = Vec::new();
    let helper = root.join("tests/common/needs.rs");
    for f in files.into_iter().filter(|f| *f != helper) {
        let text = std::fs::read_to_string(&f).expect("read");
        bad.extend(silent_returns(&text).into_iter().map(|(i, l)| format!("{}:{}: {l}", f.display(), i + 1)));
        for (i, line) in text.lines().enumerate() {
            let prints =
                ["eprintln!(", "println!(", "writeln!(", "eprint!(", "print!("].iter().any(|p| line.contains(p));
            if (prints && line.to_lowercase().contains(&skip)) || line.trim_start().starts_with(&ignore) {
                bad.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(bad.is_empty(), "tests that skip or are ignored:\n{}", bad.join("\n"));
    let test_script = std::fs::read_to_string(root.join("scripts/test")).expect("scripts/test");
    assert!(test_script.contains("UPDATE_GOLDEN is set"), "scripts/test must refuse UPDATE_GOLDEN");
    let (require, test) = ("\nexport KUBESTRAP_REQUIRE_ALL=1\n", "cargo test --workspace");
    let (r, t) = (test_script.find(require), test_script.find(test));
    assert!(
        r.is_some() && t.is_some() && r < t,
        "scripts/test must export KUBESTRAP_REQUIRE_ALL=1 before its cargo test"
    );
    for knob in ["KILL_TRIALS", "UPGRADE_BY"] {
        assert!(test_script.contains(knob), "scripts/test must refuse {knob}, which narrows the tests");
    }
    let leftovers = (test_script.find("leftovers mark"), test_script.find("leftovers check"));
    assert!(
        matches!(leftovers, (Some(m), Some(c)) if m < t.unwrap_or(0) && c > t.unwrap_or(0)),
        "scripts/test must check that no process its tests started outlives them"
    );
}

/// The lines of a `#[test]` function's body that end it early with a bare `return;` (a silent
/// pass: what follows is never asserted), as (index, line).
fn silent_returns(text: &str) -> Vec<(usize, String)> {
    let (mut found, mut armed, mut depth, mut nested) = (Vec::new(), false, None::<i64>, None::<i64>);
    let bare = ["return", ";"].concat();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t == "#[test]" {
            armed = true;
            continue;
        }
        if armed && depth.is_none() && t.contains("fn ") {
            depth = Some(0);
            armed = false;
        }
        if let Some(d) = depth.as_mut() {
            // A function nested in the test returns from itself: its body is skipped.
            if nested.is_none() && *d > 0 && t.starts_with("fn ") {
                nested = Some(*d);
            }
            if nested.is_none() && (t == bare || t.ends_with(&format!("{{ {bare} }}"))) {
                found.push((i, t.to_string()));
            }
            *d += line.matches('{').count() as i64 - line.matches('}').count() as i64;
            if nested.is_some_and(|n| *d <= n && line.contains('}')) {
                nested = None;
            }
            if *d <= 0 && line.contains('}') {
                depth = None;
            }
        }
    }
    found
}

#[test]
fn a_silent_return_in_a_test_is_found() {
    let bare = ["return", ";"].concat();
    let text = format!(
        "#[test]\nfn t() {{\n    fn inner() {{\n        {bare}\n    }}\n    if x {{\n        {bare}\n    }}\n    assert!(y);\n}}\nfn helper() {{\n    {bare}\n}}\n"
    );
    assert_eq!(silent_returns(&text), [(6, bare)]);
}

/// A skip is one line saying what is missing and what to run; under KUBESTRAP_REQUIRE_ALL=1
/// (scripts/test) the same line is a failure.
#[test]
fn a_missing_need_skips_with_one_line_or_fails_when_all_are_required() {
    use crate::common::needs::{Need, unmet};
    let tool = Need::tool("kubestrap-no-such-tool");
    assert!(!tool.met());
    let line = "skipped t: kubestrap-no-such-tool is not on PATH; run scripts/install-test-deps, or scripts/test which runs it";
    assert_eq!(unmet(&tool, "t", false).as_deref(), Ok(line));
    let failure = unmet(&tool, "t", true).unwrap_err();
    assert!(failure.starts_with(line) && failure.contains("KUBESTRAP_REQUIRE_ALL=1"), "{failure}");
    let real = Need::real_bin(Path::new("/nonexistent/k8s/v1.37.2/bin/kubeadm"));
    let line = unmet(&real, "t", false).unwrap();
    assert_eq!(
        line,
        "skipped t: /nonexistent/k8s/v1.37.2/bin/kubeadm is missing; run scripts/real-k8s, or scripts/test which runs it"
    );
    assert!(!line.contains('\n'));
    assert!(!Need::all([Need::tool("sh"), Need::tool("kubestrap-no-such-tool")]).met());
    assert!(Need::tool("sh").met() && Need::all([]).met());
}
