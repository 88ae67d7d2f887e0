//! Running Debian's real etcd (3.4) the way a kubelet would run our etcd.yaml: flags from the
//! manifest with host paths moved under the test root and the standard ports replaced by free
//! ones, and etcdctl with the client certificates kubeadm hands out.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{ChildGuard, PROXY_VARS, Scratch};

/// Flags kubeadm emits for newer etcd (3.6 renamed the `experimental-*` ones) that etcd 3.4
/// legitimately does not know. Any other unknown flag is a bug in our manifest.
pub const NEWER_THAN_3_4: &[&str] = &["feature-gates", "watch-progress-notify-interval"];

/// `args` without the flags of [`NEWER_THAN_3_4`], for tests that start etcd many times
/// (`validate/etcd_real` checks that etcd 3.4 rejects exactly these).
pub fn without_newer_flags(mut args: Vec<String>) -> Vec<String> {
    args.retain(|a| !NEWER_THAN_3_4.contains(&flag_name(a)));
    args
}

/// Three distinct ports free on every address (bound together, then released): client, peer,
/// metrics.
pub fn free_ports() -> (u16, u16, u16) {
    let a = TcpListener::bind("0.0.0.0:0").expect("bind");
    let b = TcpListener::bind("0.0.0.0:0").expect("bind");
    let c = TcpListener::bind("0.0.0.0:0").expect("bind");
    let ports = (a.local_addr().unwrap().port(), b.local_addr().unwrap().port(), c.local_addr().unwrap().port());
    drop((a, b, c));
    ports
}

/// Maps a flag value onto the scratch copy: host paths under /etc/kubernetes and /var/lib/etcd
/// move under the root, and the standard etcd ports become the test's free ports.
pub fn rewrite_value(s: &Scratch, v: &str, ports: (u16, u16, u16)) -> String {
    if v.starts_with("/etc/kubernetes/") || v == "/var/lib/etcd" || v.starts_with("/var/lib/etcd/") {
        return s.path(v).display().to_string();
    }
    v.split(',')
        .map(|piece| {
            for (old, new) in [(":2379", ports.0), (":2380", ports.1), (":2381", ports.2)] {
                if let Some(prefix) = piece.strip_suffix(old) {
                    return format!("{prefix}:{new}");
                }
            }
            piece.to_string()
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The manifest's command after `etcd`, every value rewritten for the scratch root and ports.
pub fn args_from_command(s: &Scratch, command: &[String], ports: (u16, u16, u16)) -> Vec<String> {
    assert_eq!(command[0], "etcd");
    command[1..]
        .iter()
        .map(|a| {
            let (name, value) = a.split_once('=').unwrap_or_else(|| panic!("flag {a:?} is not --name=value"));
            format!("{name}={}", rewrite_value(s, value, ports))
        })
        .collect()
}

/// The manifest's command after `etcd` for a member that keeps etcd's standard ports on its own
/// advertise address `addr` (the URLs kubestrap computes for a joining member): host paths move
/// under the root; the loopback client URL is dropped and the metrics URL moves to `addr`,
/// because every member of the test shares 127.0.0.1.
pub fn args_on_own_address(s: &Scratch, command: &[String], addr: &str) -> Vec<String> {
    assert_eq!(command[0], "etcd");
    command[1..]
        .iter()
        .map(|a| {
            let (name, value) = a.split_once('=').unwrap_or_else(|| panic!("flag {a:?} is not --name=value"));
            let value = match name {
                "--listen-client-urls" => {
                    let own: Vec<&str> = value.split(',').filter(|u| !u.contains("://127.0.0.1:")).collect();
                    own.join(",")
                }
                "--listen-metrics-urls" => format!("http://{addr}:2381"),
                _ if value.starts_with('/') => rewrite_value(s, value, (2379, 2380, 2381)),
                _ => value.to_string(),
            };
            format!("{name}={value}")
        })
        .collect()
}

/// The container command of a static Pod manifest file.
pub fn manifest_command(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let pod: serde_yaml::Value = serde_yaml::from_str(&text).expect("parse manifest");
    pod["spec"]["containers"][0]["command"]
        .as_sequence()
        .expect("command list")
        .iter()
        .map(|v| v.as_str().expect("string").to_string())
        .collect()
}

pub fn flag_name(arg: &str) -> &str {
    arg.trim_start_matches('-').split('=').next().unwrap()
}

/// Runs etcdctl (v3 API, bounded timeouts, no ambient proxy or ETCDCTL_ settings).
pub fn etcdctl(endpoint: &str, tls: &[&str], args: &[&str]) -> (i32, String) {
    let mut cmd = Command::new("etcdctl");
    cmd.env("ETCDCTL_API", "3")
        .arg("--endpoints")
        .arg(endpoint)
        .arg("--dial-timeout=2s")
        .arg("--command-timeout=3s")
        .args(tls)
        .args(args);
    for v in PROXY_VARS {
        cmd.env_remove(v);
    }
    for (k, _) in std::env::vars() {
        if k.starts_with("ETCDCTL_") && k != "ETCDCTL_API" {
            cmd.env_remove(k);
        }
    }
    let out = cmd.output().expect("run etcdctl");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// `--cacert` (a file under the node's pki dir) and optionally `--cert`/`--key` of a client.
pub fn tls_args(s: &Scratch, ca: &str, client: Option<&str>) -> Vec<String> {
    let pki = |n: &str| s.pki(n).display().to_string();
    let mut v = vec!["--cacert".to_string(), pki(ca)];
    if let Some(c) = client {
        v.push("--cert".to_string());
        v.push(pki(&format!("{c}.crt")));
        v.push("--key".to_string());
        v.push(pki(&format!("{c}.key")));
    }
    v
}

/// The healthcheck client's etcdctl TLS flags (what kubeadm's etcd client uses).
pub fn health_tls(s: &Scratch) -> Vec<String> {
    tls_args(s, "etcd/ca.crt", Some("etcd/healthcheck-client"))
}

pub fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

pub fn is_healthy(out: &str) -> bool {
    out.contains("is healthy")
}

/// `etcdctl member list -w json`: the members (IDs as numbers).
pub fn member_list(endpoint: &str, tls: &[String]) -> Vec<serde_json::Value> {
    let (code, out) = etcdctl(endpoint, &refs(tls), &["member", "list", "-w", "json"]);
    assert_eq!(code, 0, "etcdctl member list failed:\n{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    v["members"].as_array().cloned().unwrap_or_default()
}

pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Where `start_etcd` writes etcd's log for a scratch root.
pub fn log_path(s: &Scratch) -> PathBuf {
    s.dir.path().join("etcd.log")
}

/// Starts etcd, dropping flags etcd 3.4 rejects as undefined (it exits before touching its data
/// dir), until `ready` says yes. Returns the guard and the flags that had to be dropped.
pub fn start_etcd(
    s: &Scratch,
    mut args: Vec<String>,
    ready: &dyn Fn() -> bool,
    deadline: Instant,
) -> (ChildGuard, Vec<String>) {
    let log_path = log_path(s);
    let mut dropped = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "etcd did not come up in time; log:\n{}", read(&log_path));
        let log = File::create(&log_path).expect("create etcd log");
        let mut cmd = Command::new("/usr/bin/etcd");
        cmd.args(&args).stdin(Stdio::null()).stdout(Stdio::from(log.try_clone().unwrap())).stderr(Stdio::from(log));
        for v in PROXY_VARS {
            cmd.env_remove(v);
        }
        for (k, _) in std::env::vars() {
            if k.starts_with("ETCD_") {
                cmd.env_remove(k);
            }
        }
        let mut guard = ChildGuard(cmd.spawn().expect("spawn /usr/bin/etcd"));

        let mut restart = false;
        while Instant::now() < deadline {
            if let Some(status) = guard.0.try_wait().expect("try_wait") {
                let text = read(&log_path);
                let marker = "flag provided but not defined: -";
                let bad = text
                    .lines()
                    .find_map(|l| l.split_once(marker).map(|(_, rest)| rest.trim().to_string()))
                    .unwrap_or_else(|| panic!("etcd exited ({status}) with args {args:?}; log:\n{text}"));
                let before = args.len();
                args.retain(|a| flag_name(a) != bad);
                assert!(args.len() < before, "etcd rejected --{bad}, which we did not pass: {args:?}");
                dropped.push(bad);
                restart = true;
                break;
            }
            if ready() {
                return (guard, dropped);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(restart, "etcd did not become ready in time; log:\n{}", read(&log_path));
    }
}

/// The real clock, for waits on a real etcd (a learner catching up, another join finishing),
/// recording each wait's reason so a test can say what it waited for.
#[derive(Default)]
pub struct RecordingClock {
    waits: Mutex<Vec<(Duration, String)>>,
}

impl RecordingClock {
    pub fn waits(&self) -> Vec<(Duration, String)> {
        self.waits.lock().unwrap().clone()
    }
    pub fn waited_for(&self, reason: &str) -> usize {
        self.waits.lock().unwrap().iter().filter(|(_, why)| why.contains(reason)).count()
    }
}

impl kubestrap::clock::Clock for RecordingClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn sleep(&self, d: Duration, why: &str) {
        self.waits.lock().unwrap().push((d, why.to_string()));
        std::thread::sleep(d);
    }
}
