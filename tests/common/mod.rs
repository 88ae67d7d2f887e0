//! Shared helpers for integration tests: run the real binary against a scratch root.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_kubestrap");

/// A minimal, deterministic control-plane config (explicit node name and address).
pub const BASE_CONFIG: &str = "\
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration:
  name: cp-1
localAPIEndpoint:
  advertiseAddress: 10.0.0.10
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.37.0
";

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
    let out = Command::new(BIN)
        .args(args)
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("NO_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("no_proxy")
        .env_remove("JOURNAL_STREAM")
        .output()
        .expect("run kubestrap");
    let run = Run { out };
    assert_no_secrets(args, &run);
    run
}

/// The test token secret and private keys must never reach logs; stdout may carry the token only
/// where the user asked for it (init's join command, `token create`).
fn assert_no_secrets(args: &[&str], run: &Run) {
    const SECRETS: &[&str] = &["0123456789abcdef", "PRIVATE KEY-----"];
    let stdout_may_show_token = matches!(args.first(), Some(&"init") | Some(&"token") | Some(&"boot"));
    for s in SECRETS {
        assert!(!run.stderr().contains(s), "kubestrap {args:?} logged a secret ({s}):\n{}", run.stderr());
        if !(stdout_may_show_token && *s != "PRIVATE KEY-----") {
            assert!(!run.stdout().contains(s), "kubestrap {args:?} printed a secret ({s}):\n{}", run.stdout());
        }
    }
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

/// Every regular file under `dir` with its bytes, sorted by path.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, u32)> {
    use std::os::unix::fs::PermissionsExt;
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

/// A TCP port on loopback that is free right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Runs a shell command, returning (status code, stdout, stderr).
pub fn sh(cmd: &str) -> (i32, String, String) {
    let out = Command::new("bash").arg("-c").arg(cmd).output().expect("run bash");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Is a command on PATH? Tests that need an external tool fail loudly when it is missing
/// (.ci/run installs them), never skip silently.
pub fn require_tool(name: &str) {
    let (code, _, _) = sh(&format!("command -v {name}"));
    assert_eq!(code, 0, "{name} is required for this test; .ci/run installs it");
}
