//! The house rules of src/ (issue #19), checked on the source: errors flow one way (only the
//! orchestration imports the app error), init never imports join, config never reaches up to
//! the command layer.

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

/// Files under `prefix` that name `what`.
fn naming(prefix: &str, what: &str) -> Vec<String> {
    sources().into_iter().filter(|(f, code)| f.starts_with(prefix) && code.contains(what)).map(|(f, _)| f).collect()
}

#[test]
fn only_the_orchestration_imports_the_app_error() {
    let orchestration =
        ["phases/", "init/", "join/", "reset/", "boot", "commands/", "status.rs", "main.rs", "error.rs", "lib.rs"];
    let below: Vec<String> =
        naming("", "crate::error").into_iter().filter(|f| !orchestration.iter().any(|o| f.starts_with(o))).collect();
    assert!(below.is_empty(), "lower layers importing crate::error: {below:?}");
}

#[test]
fn init_never_imports_join_and_config_never_reaches_the_commands() {
    assert_eq!(naming("init/", "crate::join"), Vec::<String>::new());
    assert_eq!(naming("config/", "crate::commands"), Vec::<String>::new());
}
