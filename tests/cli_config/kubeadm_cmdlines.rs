//! Real kubeadm command lines (tests/fixtures/kubeadm-cmdlines, origins in its README) run
//! through `kubestrap init|join --dry-run`: what kubeadm accepts is accepted and planned; what
//! kubeadm refuses is refused with the flag named, exit 2, nothing written. Endpoints are pointed
//! at loopback first. Which lines kubeadm accepts is the real kubeadm v1.37.2's word
//! (tests/common/kubeadm_oracle.rs), asked with the same arguments; a row may record a deliberate
//! difference (`differs:<reason>`), which must still be one.

use crate::common::*;

use crate::common::needs::need;
use serde_json::Value;

/// Whitespace and double quotes, as a shell splits these lines (the kernel command line's rule).
fn words(line: &str) -> Vec<String> {
    kubestrap::datasource::cmdline::words(line)
}

/// `host:port` or `host` with the host replaced by 127.0.0.1.
fn loopback(endpoint: &str) -> String {
    match endpoint.rsplit_once(':') {
        Some((_, port)) if port.parse::<u16>().is_ok() => format!("127.0.0.1:{port}"),
        _ => "127.0.0.1".to_string(),
    }
}

/// The kubestrap arguments for one line: endpoints on loopback, `--config` on a stand-in file.
fn rewrite(line: &str, s: &Scratch, join_endpoint: &str) -> Vec<String> {
    let mut out = rewrite_at(line, s, join_endpoint, "127.0.0.1");
    out.extend(["--dry-run".to_string(), "--root".to_string(), s.root_str()]);
    out
}

/// The arguments for one line, the node's advertise address `addr` (the real kubeadm refuses a
/// loopback one: it gets its namespace's own), without kubestrap's dry-run options.
fn rewrite_at(line: &str, s: &Scratch, join_endpoint: &str, addr: &str) -> Vec<String> {
    let mut w = words(line);
    if w.first().map(String::as_str) == Some("sudo") {
        w.remove(0);
    }
    assert_eq!(w.first().map(String::as_str), Some("kubeadm"), "{line}");
    w.remove(0);
    let init = w[0] == "init";
    let config_file = |s: &Scratch| -> String {
        let p = s.dir.path().join("stand-in.yaml");
        let text = if init {
            BASE_CONFIG.replace("10.0.0.10", addr)
        } else {
            fill(fixture!("kubeadm-cmdlines/join-config.yaml"), &[("endpoint", &join_endpoint)])
        };
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let mut out: Vec<String> = Vec::new();
    let mut it = w.into_iter().peekable();
    let mut has_config = false;
    let mut has_address = false;
    while let Some(a) = it.next() {
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if a.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let rewritten = match name.as_str() {
            "--config" => {
                has_config = true;
                Some(config_file(s))
            }
            "--apiserver-advertise-address" => {
                has_address = true;
                Some(addr.to_string())
            }
            "--control-plane-endpoint" => {
                let v = inline.clone().or_else(|| it.peek().cloned()).unwrap_or_default();
                Some(loopback(&v))
            }
            _ => None,
        };
        match rewritten {
            Some(v) => {
                if inline.is_none() {
                    it.next();
                }
                out.push(format!("{name}={v}"));
            }
            // A flag's value, kept as it is.
            None if a.starts_with("--") && inline.is_none() && !kubestrap::argv::SWITCHES.contains(&&a[2..]) => {
                out.push(a);
                out.extend(it.next());
            }
            // Join's positional API server endpoint.
            None if !init && !a.starts_with('-') && a.contains(':') => out.push(join_endpoint.to_string()),
            None => out.push(a),
        }
    }
    if init && !has_config && !has_address {
        out.push(format!("--apiserver-advertise-address={addr}"));
    }
    out
}

#[test]
fn shell_words_and_loopback_rewriting() {
    assert_eq!(words(r#"a  --x "b c" --y="d""#), ["a", "--x", "b c", "--y=d"]);
    let s = Scratch::new("");
    let args = rewrite("sudo kubeadm join 10.1.2.3:6443 --token t --control-plane-endpoint lb:7443", &s, "127.0.0.1:9");
    assert_eq!(
        &args[..6],
        ["join", "127.0.0.1:9", "--token", "t", "--control-plane-endpoint=127.0.0.1:7443", "--dry-run"]
    );
    let args = rewrite("kubeadm init --apiserver-advertise-address 192.168.1.1 --pod-network-cidr p", &s, "x");
    assert_eq!(&args[..4], ["init", "--apiserver-advertise-address=127.0.0.1", "--pod-network-cidr", "p"]);
}

/// The oracle tells a refusal from an acceptance for join too (the corpus has no refused join):
/// a malformed token is refused before the workflow starts.
#[test]
fn the_oracle_refuses_a_malformed_join() {
    need!(kubeadm_oracle::need());
    let s = Scratch::new("");
    let line = "kubeadm join 10.1.2.3:6443 --token not-a-token --discovery-token-unsafe-skip-ca-verification";
    let args = rewrite_at(line, &s, &format!("127.0.0.1:{}", free_port()), kubeadm_oracle::ADDR);
    let (accepts, why) = kubeadm_oracle::verdict(&args, &[]);
    assert!(!accepts && why.contains("token"), "{why}");
}

#[test]
fn real_kubeadm_command_lines() {
    need!(kubeadm_oracle::need());
    let cases = fixture!("kubeadm-cmdlines/cmdlines.tsv");
    let mut table = Vec::new();
    let mut failures = Vec::new();
    for line in cases.lines().filter(|l| !l.trim().is_empty()) {
        let mut cols = line.splitn(3, '\t');
        let (id, column, cmdline) = (cols.next().unwrap(), cols.next().unwrap(), cols.next().unwrap());
        let (expected, differs) = match column.split_once(" differs:") {
            Some((v, why)) => (v, Some(why)),
            None => (column, None),
        };
        let s = Scratch::new("");
        let endpoint = format!("127.0.0.1:{}", free_port());
        let args = rewrite(cmdline, &s, &endpoint);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = kubestrap(&argv);
        assert!(snapshot(&s.root()).is_empty(), "{id}: a dry run wrote under the root");
        let ours = match expected.strip_prefix("refused:") {
            None => {
                assert_eq!(expected, "ok", "{id}: the verdict is ok or refused:<text>");
                assert_eq!(r.code(), 0, "{id}: {argv:?}\n{}", r.stderr());
                let plan: Value = serde_json::from_str(&r.stdout()).unwrap_or_else(|e| panic!("{id}: {e}"));
                let objects = plan["objects"].as_array().unwrap();
                if argv[0] == "init" {
                    assert!(objects.iter().any(|o| o["name"] == "cluster-info"), "{id}: {plan}");
                } else {
                    assert!(objects.iter().any(|o| o["kind"] == "CertificateSigningRequest"), "{id}: {plan}");
                    assert_eq!(plan["discovery"]["apiServerEndpoint"], endpoint.as_str(), "{id}");
                }
                "accepted".to_string()
            }
            Some(why) => {
                assert_eq!(r.code(), 2, "{id}: {argv:?}\n{}{}", r.stdout(), r.stderr());
                assert!(r.stderr().contains(why), "{id}: expected {why:?} in:\n{}", r.stderr());
                format!("refused ({why})")
            }
        };
        // The same line, as the real kubeadm gets it, decides whether `ok` is right.
        let (accepts, why) = kubeadm_oracle::verdict(&rewrite_at(cmdline, &s, &endpoint, kubeadm_oracle::ADDR), &[]);
        match (accepts == (expected == "ok"), differs) {
            (true, None) | (false, Some(_)) => {}
            (true, Some(reason)) => {
                failures.push(format!("{id}: records a difference ({reason}) but the real kubeadm agrees ({expected})"))
            }
            (false, None) => failures.push(format!(
                "{id}: says {expected:?}, the real kubeadm v1.37.2 {}: {why}",
                if accepts { "accepts it" } else { "refuses it" }
            )),
        }
        let theirs = if accepts { "accepted".to_string() } else { format!("refused ({why})") };
        table.push(format!(
            "{id}: {ours}; kubeadm: {theirs}{}",
            differs.map(|d| format!("; differs: {d}")).unwrap_or_default()
        ));
    }
    assert!(table.len() >= 10, "the corpus shrank: {table:?}");
    println!("{}", table.join("\n"));
    assert!(failures.is_empty(), "{} disagreements with the real kubeadm:\n{}", failures.len(), failures.join("\n"));
}
