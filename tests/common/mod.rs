//! Shared helpers for the integration-test binaries: each `tests/<area>/main.rs` loads this file
//! with `#[path = "../common/mod.rs"] mod common;`. Runs the real binary against a scratch root,
//! reads the fixtures under tests/fixtures/, and drives the external tools the tests check with.
#![allow(dead_code)]

pub mod etcd;
pub mod kubeadm_oracle;
pub mod needs;
pub mod real_bins;

use std::fmt::Display;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

/// The kubestrap binary cargo built beside this test binary, found at run time: test binaries
/// are reused across checkouts that share a target directory (CI's clone and this one), and
/// the path cargo bakes in names the checkout that built them, which may be gone.
pub static BIN: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| beside_tests("kubestrap", env!("CARGO_BIN_EXE_kubestrap")));

/// `name` in the profile directory above this test binary's `deps/`, else `baked`.
pub fn beside_tests(name: &str, baked: &str) -> String {
    let exe = std::env::current_exe().ok();
    let beside = exe.as_deref().and_then(Path::parent).and_then(Path::parent).map(|d| d.join(name));
    match beside {
        Some(p) if p.is_file() => p.to_string_lossy().into_owned(),
        _ => baked.to_string(),
    }
}

/// The bootstrap token the fixtures and tests use.
pub const TOKEN: &str = "abcdef.0123456789abcdef";
/// Its secret half, which must never reach a log.
pub const SECRET: &str = "0123456789abcdef";

/// Proxy variables no child process may inherit from the test environment.
pub const PROXY_VARS: &[&str] = &["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"];

/// A file under tests/fixtures/, embedded at compile time: `fixture!("base/kubeadm.yaml")`.
macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/", $name))
    };
}
pub(crate) use fixture;

/// A minimal, deterministic control-plane config (explicit node name and address).
pub const BASE_CONFIG: &str = fixture!("base/kubeadm.yaml");

/// The head of an InitConfiguration document, for configs built up a field at a time.
pub const INIT_HEAD: &str = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n";

/// An InitConfiguration (node cp-1) ending in `body`.
pub fn init_doc(body: &str) -> String {
    format!("{}{body}", fixture!("bad-config/init-head.yaml"))
}

/// A valid InitConfiguration (node cp-1 on 10.0.0.10), then a ClusterConfiguration ending in
/// `body`.
pub fn cluster_doc(body: &str) -> String {
    format!("{}{body}", fixture!("bad-config/cluster-head.yaml"))
}

/// The path of a file or directory under tests/fixtures/, for tests that read it at run time.
pub fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// A fixture template with its `{name}` placeholders filled in; every name given must occur.
pub fn fill(template: &str, vars: &[(&str, &dyn Display)]) -> String {
    let mut out = template.to_string();
    for (name, value) in vars {
        let placeholder = format!("{{{name}}}");
        assert!(out.contains(&placeholder), "the template has no {placeholder}:\n{template}");
        out = out.replace(&placeholder, &value.to_string());
    }
    out
}

pub struct Run {
    pub out: Output,
}

impl Run {
    pub fn code(&self) -> i32 {
        self.out.status.code().unwrap_or(-1)
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    pub fn ok(self) -> Self {
        assert_eq!(self.code(), 0, "kubestrap failed:\nstdout:\n{}\nstderr:\n{}", self.stdout(), self.stderr());
        self
    }
}

/// Runs kubestrap with args; no proxy variables leak in from the test environment.
pub fn kubestrap(args: &[&str]) -> Run {
    let mut cmd = Command::new(&*BIN);
    cmd.args(args).env_remove("JOURNAL_STREAM");
    for v in PROXY_VARS {
        cmd.env_remove(v);
    }
    let run = Run { out: cmd.output().expect("run kubestrap") };
    assert_no_secrets(args, &run);
    run
}

/// The test token secret and private keys must never reach logs; stdout may carry the token only
/// where the user asked for it (init's join command, `token create`).
fn assert_no_secrets(args: &[&str], run: &Run) {
    const SECRETS: &[&str] = &[SECRET, "PRIVATE KEY-----"];
    let stdout_may_show_token = matches!(args.first(), Some(&"init") | Some(&"token") | Some(&"boot"));
    for s in SECRETS {
        assert!(!run.stderr().contains(s), "kubestrap {args:?} logged a secret ({s}):\n{}", run.stderr());
        if !(stdout_may_show_token && *s != "PRIVATE KEY-----") {
            assert!(!run.stdout().contains(s), "kubestrap {args:?} printed a secret ({s}):\n{}", run.stdout());
        }
    }
}

impl Run {
    /// The `KUBESTRAP-EVENT` JSON lines `boot` prints on stdout.
    pub fn events(&self) -> Vec<serde_json::Value> {
        self.stdout()
            .lines()
            .filter_map(|l| l.strip_prefix("KUBESTRAP-EVENT "))
            .map(|j| serde_json::from_str(j).expect("event is JSON"))
            .collect()
    }
}

/// `kubestrap certs ca-hash` of a CA certificate file.
pub fn ca_hash(ca_crt: &Path) -> String {
    kubestrap(&["certs", "ca-hash", ca_crt.to_str().expect("utf-8 path")]).ok().stdout().trim().to_string()
}

/// `kubestrap certs ca-hash --root`: the pin of `<root>/etc/kubernetes/pki/ca.crt`.
pub fn ca_hash_of_root(root: &Path) -> String {
    kubestrap(&["certs", "ca-hash", "--root", root.to_str().expect("utf-8 path")]).ok().stdout().trim().to_string()
}

/// A scratch dir holding `config.yaml` and a node root `root/`.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new(config: &str) -> Scratch {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("config.yaml"), config).expect("write config");
        std::fs::create_dir(dir.path().join("root")).expect("mkdir root");
        Scratch { dir }
    }
    pub fn config(&self) -> String {
        self.dir.path().join("config.yaml").display().to_string()
    }
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }
    pub fn root_str(&self) -> String {
        self.root().display().to_string()
    }
    /// A path under the node root, given as the host path.
    pub fn path(&self, host: &str) -> PathBuf {
        self.root().join(host.trim_start_matches('/'))
    }
    pub fn pki(&self, name: &str) -> PathBuf {
        self.path(&format!("/etc/kubernetes/pki/{name}"))
    }
    /// `init --on-disk-only`: everything before the kubelet runs.
    pub fn init(&self, extra: &[&str]) -> Run {
        let config = self.config();
        let root = self.root_str();
        let mut args = vec!["init", "--on-disk-only", "--config", config.as_str(), "--root", root.as_str()];
        args.extend_from_slice(extra);
        kubestrap(&args)
    }
    /// A full `init`, API phases included.
    pub fn init_full(&self, extra: &[&str]) -> Run {
        let config = self.config();
        let root = self.root_str();
        let mut args = vec!["init", "--config", config.as_str(), "--root", root.as_str()];
        args.extend_from_slice(extra);
        kubestrap(&args)
    }

    pub fn phase(&self, name: &str) -> Run {
        let config = self.config();
        let root = self.root_str();
        kubestrap(&["init", "phase", name, "--config", &config, "--root", &root])
    }
}

/// Plays the kubelet once the static Pod manifests exist: starts the API test double on the
/// node's PKI with the API server on `port` and the kubelet's healthz on `healthz` (after `tune`
/// adjusts its config), and registers the control-plane Node cp-1.
pub fn start_double(
    pki_dir: &Path,
    port: u16,
    healthz: u16,
    tune: impl FnOnce(&mut kube_double::Config),
) -> kube_double::Handle {
    let mut cfg = kube_double::Config::from_pki_dir(pki_dir).expect("double config");
    cfg.listen = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    cfg.kubelet_healthz = Some(std::net::SocketAddr::from(([127, 0, 0, 1], healthz)));
    tune(&mut cfg);
    let double = kube_double::start(cfg).expect("start double");
    double.register_node("cp-1", &[]).expect("register node");
    double
}

/// Every regular file under `dir` with its bytes, sorted by path.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, u32)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let e = e.expect("entry");
            let p = e.path();
            let meta = std::fs::symlink_metadata(&p).expect("meta");
            if meta.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).expect("read"), meta.permissions().mode() & 0o7777));
            }
        }
    }
    out.sort();
    out
}

/// A file's permission bits (with setuid, setgid and sticky).
pub fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o7777
}

/// Writes a file, creating its parent directories.
pub fn write_file(path: &Path, data: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().expect("a parent dir")).expect("mkdir -p");
    std::fs::write(path, data).expect("write file");
}

/// A TCP port on loopback that is free right now, below Linux's ephemeral range (32768+): a
/// port the kernel hands out for `bind(0)` or for an outgoing connection of another test could
/// be taken before the caller binds it ("Address already in use"). Each port is handed out
/// once per process.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOW: u32 = 20000;
    const SPAN: u32 = 12000;
    let start = std::process::id().wrapping_mul(2654435761) % SPAN;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(n < SPAN, "free_port: every port of {LOW}..{} handed out", LOW + SPAN);
        let port = (LOW + (start + n) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// Kills a child process (and reaps it) when the test ends, whether it passes or panics.
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs a command to the end, returning (status code, stdout, stderr).
pub fn capture(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs a shell command, returning (status code, stdout, stderr).
pub fn sh(cmd: &str) -> (i32, String, String) {
    capture(Command::new("bash").arg("-c").arg(cmd))
}

/// A command on PATH, for a helper that goes on to run it; a missing one fails the test with
/// what to run. The test itself says `need!(Need::tool(name))` first, to skip instead.
pub fn require_tool(name: &str) {
    needs::require(needs::Need::tool(name));
}

/// Runs kubectl with a clean environment (no ambient KUBECONFIG); returns (code, stdout, stderr).
pub fn kubectl(args: &[&str]) -> (i32, String, String) {
    capture(Command::new("kubectl").args(args).env_remove("KUBECONFIG"))
}

/// `kubernetes-validate --strict -k 1.37.0` on the files (the Kubernetes 1.37 schema, strict
/// mode); returns its exit code and its whole output.
pub fn kubernetes_validate(files: &[PathBuf]) -> (i32, String) {
    require_tool("kubernetes-validate");
    let list: Vec<String> = files.iter().map(|p| format!("'{}'", p.display())).collect();
    let (code, out, err) = sh(&format!("kubernetes-validate --strict -k 1.37.0 {} 2>&1", list.join(" ")));
    (code, format!("{out}{err}"))
}

/// `openssl verify -CAfile ca leaf`: Ok, or openssl's complaint.
pub fn openssl_verify(ca: &Path, leaf: &Path) -> Result<(), String> {
    let (code, out, err) = sh(&format!("openssl verify -CAfile '{}' '{}'", ca.display(), leaf.display()));
    if code == 0 { Ok(()) } else { Err(format!("{out}{err}")) }
}

/// A small, fast PRNG for kill delays (deterministic per seed, so a failure can be replayed).
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// Every entry under `dir` (directories and symlinks too) with its mode and, for files, bytes:
/// to show a refused run left a root byte-identical.
pub fn tree(dir: &Path) -> Vec<(PathBuf, u32, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let p = e.expect("entry").path();
            let meta = std::fs::symlink_metadata(&p).expect("meta");
            let bytes = if meta.is_file() { Some(std::fs::read(&p).expect("read")) } else { None };
            if meta.is_dir() {
                stack.push(p.clone());
            }
            out.push((p, meta.permissions().mode() & 0o7777, bytes));
        }
    }
    out.sort();
    out
}
