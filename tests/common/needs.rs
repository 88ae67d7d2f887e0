//! What a test needs from the machine that a fresh clone does not have (the real components,
//! root, Debian's etcd, a tool on PATH), and the one way a test goes without it. A plain
//! `cargo test` skips it with one line saying what is missing and what to run; under
//! `KUBESTRAP_REQUIRE_ALL=1`, which `scripts/test` (hence CI) sets, that line is a failure, so
//! nothing skips there. The crate's own unit tests include this file too (src/datasource), so
//! it names nothing else of tests/common.
#![allow(dead_code)]

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Set to 1 by scripts/test: every need is required.
pub const REQUIRE_ALL: &str = "KUBESTRAP_REQUIRE_ALL";

const INSTALL: &str = "scripts/install-test-deps, or scripts/test which runs it";
const REAL_K8S: &str = "scripts/real-k8s, or scripts/test which runs it";
const AS_ROOT: &str = "the tests as root, as scripts/test does in CI";

/// A need: what is missing (None when met) and what to run to get it.
pub struct Need {
    missing: Option<String>,
    run: &'static str,
}

impl Need {
    /// A command on PATH.
    pub fn tool(name: &str) -> Need {
        Need { missing: (!on_path(name)).then(|| format!("{name} is not on PATH")), run: INSTALL }
    }

    /// Root: network and mount namespaces, mounts, loop devices, chroot.
    pub fn root() -> Need {
        let missing =
            (!rustix::process::geteuid().is_root()).then(|| "not run as root (namespaces, mounts)".to_string());
        Need { missing, run: AS_ROOT }
    }

    /// A real component scripts/real-k8s builds, at `path`.
    pub fn real_bin(path: &Path) -> Need {
        Need { missing: (!executable(path)).then(|| format!("{} is missing", path.display())), run: REAL_K8S }
    }

    /// Debian's etcd 3.4 (`/usr/bin/etcd`) and etcdctl (`common::etcd`).
    pub fn etcd() -> Need {
        Need::all([
            Need {
                missing: (!executable(Path::new("/usr/bin/etcd"))).then(|| "/usr/bin/etcd is missing".into()),
                run: INSTALL,
            },
            Need::tool("etcdctl"),
        ])
    }

    /// python3 with `modules` importable (the independent implementations the cross-checks run).
    pub fn python(modules: &[&str]) -> Need {
        if !on_path("python3") {
            return Need::tool("python3");
        }
        let import = format!("import {}", modules.join(", "));
        let ok = std::process::Command::new("python3")
            .args(["-c", &import])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        Need { missing: (!ok).then(|| format!("python3 cannot {import}")), run: INSTALL }
    }

    /// The first of `needs` that is missing, or met when none is.
    pub fn all(needs: impl IntoIterator<Item = Need>) -> Need {
        needs.into_iter().find(|n| n.missing.is_some()).unwrap_or(Need { missing: None, run: "" })
    }

    pub fn met(&self) -> bool {
        self.missing.is_none()
    }

    /// [`needs`] as a method, so [`need!`] names no module path (it works in the unit tests too).
    pub fn check(self) -> bool {
        needs(self)
    }

    fn line(&self, what: &str) -> String {
        let missing = self.missing.as_deref().unwrap_or_default();
        format!("skipped {what}: {missing}; run {}", self.run)
    }
}

fn required() -> bool {
    std::env::var_os(REQUIRE_ALL).is_some_and(|v| v == "1")
}

/// Shown past the test harness's capture, which hides what a passing test prints; once, though
/// a test may check the same need in a loop.
fn say(line: &str) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if !said.iter().any(|l| l == line) {
        said.push(line.to_string());
        let _ = writeln!(std::io::stderr(), "{line}");
    }
}

/// The running test's name (libtest names its thread after it).
fn this_test() -> String {
    std::thread::current().name().unwrap_or("a test").to_string()
}

/// True when `need` is met. Otherwise one line on stderr and false, for the caller to return on
/// (see [`need!`]); under `KUBESTRAP_REQUIRE_ALL=1` that line is a panic instead.
pub fn needs(need: Need) -> bool {
    if need.met() {
        return true;
    }
    match unmet(&need, &this_test(), required()) {
        Ok(line) => say(&line),
        Err(failure) => panic!("{failure}"),
    }
    false
}

/// What an unmet need does to `test`: the skip line, or (`required`) the failure with that line.
pub fn unmet(need: &Need, test: &str, required: bool) -> Result<String, String> {
    let line = need.line(test);
    if required { Err(format!("{line} ({REQUIRE_ALL}=1: nothing may skip)")) } else { Ok(line) }
}

/// For lookups that cannot return for the test (a path it goes on to run): an unmet need fails
/// the test with the same line. The test's own [`need!`] comes first on a plain `cargo test`.
pub fn require(need: Need) {
    if !need.met() {
        panic!("{}", need.line(&this_test()).replacen("skipped", "failed", 1));
    }
}

/// Every test of this binary needs all of `needs`: when one is missing, one line and the whole
/// binary exits 0 before the harness starts (see tests/real/main.rs). Under
/// `KUBESTRAP_REQUIRE_ALL=1` it does nothing, and each test fails at the missing piece.
/// Never panics: it runs before `main`, where a panic would abort.
pub fn skip_binary_unless(binary: &str, needs: impl IntoIterator<Item = Need>) {
    if required() {
        return;
    }
    let need = Need::all(needs);
    if !need.met() {
        say(&need.line(&format!("every test of {binary}")));
        std::process::exit(0);
    }
}

/// Returns from the test unless every need is met: `need!(Need::tool("openssl"), Need::root())`.
#[allow(unused_macros)] // not every binary skips a test of its own
macro_rules! need {
    ($($need:expr),+ $(,)?) => {
        $(
            if !$need.check() {
                return;
            }
        )+
    };
}
#[allow(unused_imports)]
pub(crate) use need;

fn on_path(name: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|d| executable(&d.join(name)))
}

fn executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
