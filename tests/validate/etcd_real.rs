//! Runs a real etcd (Debian's /usr/bin/etcd 3.4) with the flags from our etcd.yaml and the
//! certificates from our PKI, then talks to it with etcdctl using the client certificates
//! kubeadm hands out. Proves that the etcd certs, SANs and mTLS flags work together.

use crate::common::{ChildGuard, PROXY_VARS, Scratch, fixture, mode, require_tool};
use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A control plane advertising 127.0.0.2: etcd's advertised URLs and server SANs use it.
const CONFIG: &str = fixture!("etcd-loopback/kubeadm.yaml");

/// Flags kubeadm emits for newer etcd (3.6 renamed the `experimental-*` ones) that etcd 3.4
/// legitimately does not know. Any other unknown flag is a bug in our manifest.
const NEWER_THAN_3_4: &[&str] = &["feature-gates", "watch-progress-notify-interval"];

/// Three distinct ports free on every address (bound together, then released).
fn free_ports() -> (u16, u16, u16) {
    let a = TcpListener::bind("0.0.0.0:0").expect("bind");
    let b = TcpListener::bind("0.0.0.0:0").expect("bind");
    let c = TcpListener::bind("0.0.0.0:0").expect("bind");
    let ports = (a.local_addr().unwrap().port(), b.local_addr().unwrap().port(), c.local_addr().unwrap().port());
    drop((a, b, c));
    ports
}

/// Maps a flag value onto the scratch copy: host paths under /etc/kubernetes and /var/lib/etcd
/// move under the root, and the standard etcd ports become the test's free ports.
fn rewrite_value(s: &Scratch, v: &str, ports: (u16, u16, u16)) -> String {
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

fn flag_name(arg: &str) -> &str {
    arg.trim_start_matches('-').split('=').next().unwrap()
}

/// Runs etcdctl (v3 API, bounded timeouts, no ambient proxy or ETCDCTL_ settings).
fn etcdctl(endpoint: &str, tls: &[&str], args: &[&str]) -> (i32, String) {
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

fn tls_args(s: &Scratch, ca: &str, client: Option<&str>) -> Vec<String> {
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

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn is_healthy(out: &str) -> bool {
    out.contains("is healthy")
}

/// Starts etcd, dropping flags etcd 3.4 rejects as undefined, until it answers a health check.
/// Returns the guard and the flags that had to be dropped.
fn start_etcd(s: &Scratch, mut args: Vec<String>, client_url: &str, deadline: Instant) -> (ChildGuard, Vec<String>) {
    let log_path: PathBuf = s.dir.path().join("etcd.log");
    let health_tls = tls_args(s, "etcd/ca.crt", Some("etcd/healthcheck-client"));
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
            let (_, out) = etcdctl(client_url, &refs(&health_tls), &["endpoint", "health"]);
            if is_healthy(&out) {
                return (guard, dropped);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(restart, "etcd did not become healthy in time; log:\n{}", read(&log_path));
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Plain HTTP GET on the metrics listener, which the static Pod probes use.
fn http_get(port: u16, path: &str) -> String {
    let mut st = TcpStream::connect(("127.0.0.1", port)).expect("connect metrics port");
    st.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(st, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut buf = String::new();
    let _ = st.read_to_string(&mut buf);
    buf
}

#[test]
fn real_etcd_accepts_our_certs_and_flags() {
    require_tool("etcd");
    require_tool("etcdctl");
    assert!(Path::new("/usr/bin/etcd").exists(), "/usr/bin/etcd is required");
    let deadline = Instant::now() + Duration::from_secs(20);

    let s = Scratch::new(CONFIG);
    s.init(&[]).ok();
    let data_dir = s.path("/var/lib/etcd");
    assert_eq!(mode(&data_dir), 0o700, "etcd data dir mode");

    let manifest = std::fs::read_to_string(s.path("/etc/kubernetes/manifests/etcd.yaml")).expect("etcd.yaml");
    let pod: serde_yaml::Value = serde_yaml::from_str(&manifest).expect("parse etcd.yaml");
    let command: Vec<String> = pod["spec"]["containers"][0]["command"]
        .as_sequence()
        .expect("command list")
        .iter()
        .map(|v| v.as_str().expect("string").to_string())
        .collect();
    assert_eq!(command[0], "etcd");

    let ports = free_ports();
    let (client, peer, metrics) = ports;
    let args: Vec<String> = command[1..]
        .iter()
        .map(|a| {
            let (name, value) = a.split_once('=').unwrap_or_else(|| panic!("flag {a:?} is not --name=value"));
            format!("{name}={}", rewrite_value(&s, value, ports))
        })
        .collect();
    for a in &args {
        for p in [":2379", ":2380", ":2381"] {
            assert!(!a.contains(p), "standard etcd port left in {a}");
        }
        assert!(!a.contains("=/etc/kubernetes") && !a.contains("=/var/lib/etcd"), "host path left in {a}");
    }
    println!("etcd args: {args:?}");

    let client_url = format!("https://127.0.0.1:{client}");
    let (guard, dropped) = start_etcd(&s, args, &client_url, deadline);
    println!("flags dropped for etcd 3.4 (unknown to it): {dropped:?}");
    for d in &dropped {
        assert!(
            NEWER_THAN_3_4.contains(&d.as_str()),
            "etcd 3.4 rejected --{d}, which is not a known post-3.4 flag (typo in our manifest?)"
        );
    }

    let health = tls_args(&s, "etcd/ca.crt", Some("etcd/healthcheck-client"));
    let apiserver = tls_args(&s, "etcd/ca.crt", Some("apiserver-etcd-client"));

    // Health with the healthcheck client cert over localhost.
    let (code, out) = etcdctl(&client_url, &refs(&health), &["endpoint", "health"]);
    assert!(code == 0 && is_healthy(&out), "endpoint health via 127.0.0.1 failed ({code}):\n{out}");

    // Write and read back with the API server's etcd client cert.
    let (code, out) = etcdctl(&client_url, &refs(&apiserver), &["put", "/kubestrap/probe", "hello"]);
    assert!(code == 0 && out.contains("OK"), "put with apiserver-etcd-client failed ({code}):\n{out}");
    let (code, out) = etcdctl(&client_url, &refs(&apiserver), &["get", "/kubestrap/probe", "--print-value-only"]);
    assert_eq!(code, 0, "get failed:\n{out}");
    assert_eq!(out.trim(), "hello", "get returned the wrong value");

    // The advertise address: the server cert's IP SANs must cover 127.0.0.2.
    let adv_url = format!("https://127.0.0.2:{client}");
    let (code, out) = etcdctl(&adv_url, &refs(&health), &["endpoint", "health"]);
    assert!(code == 0 && is_healthy(&out), "endpoint health via advertise address 127.0.0.2 failed ({code}):\n{out}");
    let (code, out) = etcdctl(&adv_url, &refs(&apiserver), &["get", "/kubestrap/probe", "--print-value-only"]);
    assert!(code == 0 && out.trim() == "hello", "get via 127.0.0.2 failed ({code}):\n{out}");

    // Member identity and peer URL come from our flags.
    let (code, out) = etcdctl(&client_url, &refs(&health), &["member", "list"]);
    assert_eq!(code, 0, "member list failed:\n{out}");
    assert!(out.contains("cp-1"), "member name cp-1 missing:\n{out}");
    assert!(out.contains(&format!("https://127.0.0.2:{peer}")), "peer URL missing:\n{out}");
    assert!(out.contains(&format!("https://127.0.0.2:{client}")), "advertised client URL missing:\n{out}");

    // Mutual TLS is enforced: no client cert is refused...
    let no_cert = tls_args(&s, "etcd/ca.crt", None);
    let (code, out) = etcdctl(&client_url, &refs(&no_cert), &["put", "/kubestrap/anon", "x"]);
    println!("no-client-cert attempt ({code}): {}", out.trim());
    assert_ne!(code, 0, "etcd accepted a client without a certificate:\n{out}");
    assert!(!out.contains("OK"), "anonymous put succeeded:\n{out}");
    let log = read(&s.dir.path().join("etcd.log"));
    let rejected = log
        .lines()
        .find(|l| l.contains("rejected connection") && l.contains("certificate"))
        .unwrap_or_else(|| panic!("etcd did not log a certificate rejection; log:\n{log}"));
    println!("etcd: {rejected}");

    // ...and so is a cert from the cluster CA rather than the etcd CA.
    let wrong_ca_client = tls_args(&s, "etcd/ca.crt", Some("apiserver-kubelet-client"));
    let (code, out) = etcdctl(&client_url, &refs(&wrong_ca_client), &["put", "/kubestrap/wrongca", "x"]);
    assert_ne!(code, 0, "etcd accepted a client cert not signed by the etcd CA:\n{out}");

    // The client really verifies the server: trusting only the cluster CA fails.
    let wrong_trust = tls_args(&s, "ca.crt", Some("etcd/healthcheck-client"));
    let (code, out) = etcdctl(&client_url, &refs(&wrong_trust), &["get", "/kubestrap/probe"]);
    assert_ne!(code, 0, "etcd's server cert verified against the wrong CA:\n{out}");

    // The metrics listener the probes use is plain HTTP on localhost.
    let resp = http_get(metrics, "/health");
    assert!(resp.starts_with("HTTP/1.") && resp.contains(" 200 "), "metrics /health:\n{resp}");
    assert!(resp.contains("\"health\":\"true\""), "metrics /health body:\n{resp}");

    drop(guard);
    assert!(Instant::now() < deadline + Duration::from_secs(30), "test took too long");
}
