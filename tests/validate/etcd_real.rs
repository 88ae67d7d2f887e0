//! Runs a real etcd (Debian's /usr/bin/etcd 3.4) with the flags from our etcd.yaml and the
//! certificates from our PKI, then talks to it with etcdctl using the client certificates
//! kubeadm hands out. Proves that the etcd certs, SANs and mTLS flags work together.

use crate::common::etcd::{
    NEWER_THAN_3_4, args_from_command, etcdctl, free_ports, health_tls, is_healthy, log_path, manifest_command, read,
    refs, start_etcd, tls_args,
};
use crate::common::needs::{Need, need};
use crate::common::{Scratch, fixture, mode};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A control plane advertising 127.0.0.2: etcd's advertised URLs and server SANs use it.
const CONFIG: &str = fixture!("etcd-loopback/kubeadm.yaml");

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
    need!(Need::etcd());
    // A bound on etcd's start (polled for its health), generous for a loaded machine.
    let deadline = Instant::now() + Duration::from_secs(120);

    let s = Scratch::new(CONFIG);
    s.init(&[]).ok();
    let data_dir = s.path("/var/lib/etcd");
    assert_eq!(mode(&data_dir), 0o700, "etcd data dir mode");

    let command = manifest_command(&s.path("/etc/kubernetes/manifests/etcd.yaml"));
    let ports = free_ports();
    let (client, peer, metrics) = ports;
    let args = args_from_command(&s, &command, ports);
    for a in &args {
        for p in [":2379", ":2380", ":2381"] {
            assert!(!a.contains(p), "standard etcd port left in {a}");
        }
        assert!(!a.contains("=/etc/kubernetes") && !a.contains("=/var/lib/etcd"), "host path left in {a}");
    }
    println!("etcd args: {args:?}");

    let client_url = format!("https://127.0.0.1:{client}");
    let health = health_tls(&s);
    let ready = || is_healthy(&etcdctl(&client_url, &refs(&health), &["endpoint", "health"]).1);
    let (guard, dropped) = start_etcd(&s, args, &ready, deadline);
    println!("flags dropped for etcd 3.4 (unknown to it): {dropped:?}");
    for d in &dropped {
        assert!(
            NEWER_THAN_3_4.contains(&d.as_str()),
            "etcd 3.4 rejected --{d}, which is not a known post-3.4 flag (typo in our manifest?)"
        );
    }

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
    let log = read(&log_path(&s));
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
}
