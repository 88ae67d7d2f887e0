use super::*;

fn parse_words(s: &str) -> Result<Parsed, UsageError> {
    let argv: Vec<String> = std::iter::once("kubestrap").chain(s.split_whitespace()).map(str::to_string).collect();
    parse(&argv)
}

fn run(s: &str) -> Cli {
    match parse_words(s) {
        Ok(Parsed::Run(c)) => *c,
        other => panic!("{s}: {other:?}"),
    }
}

#[test]
fn kubeadm_spellings_parse() {
    let Command::Join(j) = run("join 10.0.0.1:6443 --token=abcdef.0123456789abcdef --node-name=w1 --discovery-token-ca-cert-hash=sha256:aa,sha256:bb --ignore-preflight-errors=all").command else { panic!() };
    assert_eq!(j.words, ["10.0.0.1:6443"]);
    assert_eq!(j.token.as_deref(), Some("abcdef.0123456789abcdef"));
    assert_eq!(j.node_name.as_deref(), Some("w1"));
    assert_eq!(split_all(&j.discovery_token_ca_cert_hash), ["sha256:aa", "sha256:bb"]);
    assert_eq!(split_all(&j.ignore_preflight_errors), ["all"]);
    let Command::Init(i) =
        run("init --pod-network-cidr 10.244.0.0/16 --dry-run=true --apiserver-bind-port=7443 --v=5").command
    else {
        panic!()
    };
    assert_eq!(i.pod_network_cidr.as_deref(), Some("10.244.0.0/16"));
    assert!(i.dry_run);
    assert_eq!(i.apiserver_bind_port, Some(7443));
}

#[test]
fn errors_are_usage_errors_without_secrets() {
    // The type is the usage error (error.rs gives it exit 2).
    let UsageError(m) = parse_words("join --tokn=abcdef.0123456789abcdef 10.0.0.1:6443").unwrap_err();
    assert!(m.contains("--tokn") && !m.contains("0123456789abcdef"), "{m}");
    let UsageError(m) = parse_words("init --apiserver-bind-port=abc").unwrap_err();
    assert!(m.contains("--apiserver-bind-port"), "{m}");
    assert!(parse_words("init --dry-run=maybe").is_err());
}

#[test]
fn help_is_not_an_error_but_parse_args_will_not_run_it() {
    assert!(matches!(parse_words("init --help"), Ok(Parsed::Help(h)) if h.contains("--pod-network-cidr")));
    let argv: Vec<String> = ["kubeadm", "init", "--help"].iter().map(|s| s.to_string()).collect();
    assert!(parse_args(&argv).is_err());
}

/// argv::SWITCHES must name exactly the switches the argh structs declare, or `--x=true`
/// would be split into a flag and a stray word.
#[test]
fn switch_table_matches_the_argh_structs() {
    let mut found = std::collections::BTreeSet::new();
    for sub in [
        &["init"][..],
        &["init", "phase", "x"],
        &["join"],
        &["preflight"],
        &["token", "create"],
        &["boot"],
        &["reset"],
        &["reset", "phase", "x"],
    ] {
        let mut args: Vec<&str> = sub.to_vec();
        args.push("--help");
        let help = match Cli::from_args(&["kubestrap"], &args) {
            Err(e) if e.status.is_ok() => e.output,
            other => panic!("{sub:?}: {other:?}"),
        };
        // The usage line: `[--switch]` or `[--option <option>]`.
        let usage = help.lines().next().unwrap_or_default();
        for part in usage.split('[').filter_map(|p| p.strip_prefix("--")) {
            let item = part.split(']').next().unwrap_or_default();
            if !item.contains('<') && !item.trim().is_empty() {
                found.insert(item.trim().to_string());
            }
        }
    }
    for f in &found {
        assert!(crate::argv::SWITCHES.contains(&f.as_str()), "switch --{f} missing from argv::SWITCHES");
    }
    for s in crate::argv::SWITCHES {
        assert!(
            // Switches with a short form show only it in the usage line (`[-f]`).
            found.contains(*s) || ["verbose", "help", "force"].contains(s),
            "argv::SWITCHES has --{s}, which no command declares"
        );
    }
}
