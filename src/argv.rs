//! kubeadm's command-line spellings (pflag) rewritten into what argh parses: `--flag=value`,
//! `--switch=true|false`, the last of a repeated single-valued flag winning, and klog's `--v=N`
//! wherever it appears. Plus the redaction every usage error goes through, so a token secret
//! typed on a command line never comes back in an error.

/// Flags without a value (argh switches), in every subcommand.
pub const SWITCHES: &[&str] = &[
    "cleanup-tmp-dir",
    "control-plane",
    "discovery-token-unsafe-skip-ca-verification",
    "dry-run",
    "force",
    "help",
    "on-disk-only",
    "print-join-command",
    "skip-certificate-key-print",
    "skip-token-print",
    "upload-certs",
    "verbose",
];

/// Boolean flags that default to true (pflag `BoolVar`s): `--flag` is `--flag true`, and
/// `--flag=false` turns them off; argh reads them as `Option<bool>` options.
const TRUE_BY_DEFAULT: &[&str] = &["certificate-renewal", "etcd-upgrade"];

/// Flags that may be given several times, each value adding to a list (pflag's StringSlice).
pub(crate) const REPEATABLE: &[&str] =
    &["apiserver-cert-extra-sans", "discovery-token-ca-cert-hash", "ignore-preflight-errors", "skip-phases"];

/// Flags whose value is a secret: never echoed, whatever its shape.
const SECRET_FLAGS: &[&str] = &["certificate-key", "discovery-token", "tls-bootstrap-token", "token"];

/// One word or flag of a command line after rewriting.
#[derive(Debug, Clone, PartialEq)]
enum Item {
    Word(String),
    Switch(String),
    /// A flag with its value; `None` when the line ended first (argh reports it).
    Opt(String, Option<String>),
}

/// The rewritten argument list (without the program name), or a message naming the bad flag.
pub fn rewrite(args: &[String]) -> Result<Vec<String>, String> {
    let mut items = Vec::new();
    let mut verbose = false;
    let mut rest = args.iter().peekable();
    while let Some(a) = rest.next() {
        if a == "--" {
            items.push(Item::Word(a.clone()));
            items.extend(rest.by_ref().cloned().map(Item::Word));
            break;
        }
        if let Some(level) = klog_level(a, &mut rest)? {
            verbose |= level > 0;
            continue;
        }
        if a == "-v" || a == "--verbose" {
            verbose = true;
            continue;
        }
        // pflag's shorthand for -o/--output: `-o json`, `-o=json`, `-ojson`.
        if let Some(v) = a.strip_prefix("-o").filter(|_| !a.starts_with("--")) {
            let value = if v.is_empty() { rest.next().cloned() } else { Some(v.trim_start_matches('=').to_string()) };
            items.push(Item::Opt("output".into(), value));
            continue;
        }
        let Some(flag) = a.strip_prefix("--").filter(|f| !f.is_empty()) else {
            items.push(Item::Word(a.clone()));
            continue;
        };
        let (name, attached) = match flag.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (flag.to_string(), None),
        };
        if SWITCHES.contains(&name.as_str()) {
            match attached {
                None => items.push(Item::Switch(name)),
                Some(v) => {
                    if parse_bool(&v).ok_or_else(|| {
                        format!("invalid argument {v:?} for \"--{name}\" flag: expected true or false")
                    })? {
                        items.push(Item::Switch(name));
                    }
                }
            }
        } else if TRUE_BY_DEFAULT.contains(&name.as_str()) {
            let v = attached.unwrap_or_else(|| "true".into());
            let b = parse_bool(&v)
                .ok_or_else(|| format!("invalid argument {v:?} for \"--{name}\" flag: expected true or false"))?;
            items.push(Item::Opt(name, Some(b.to_string())));
        } else {
            let value = attached.or_else(|| rest.next().cloned());
            items.push(Item::Opt(name, value));
        }
    }
    let mut out = Vec::new();
    if verbose {
        out.push("-v".to_string());
    }
    for (i, item) in items.iter().enumerate() {
        match item {
            Item::Word(w) => out.push(w.clone()),
            Item::Switch(s) => out.push(format!("--{s}")),
            Item::Opt(name, value) => {
                // pflag keeps the last value of a single-valued flag; argh would refuse the repeat.
                let repeated_later = items[i + 1..].iter().any(|x| matches!(x, Item::Opt(n, _) if n == name));
                if repeated_later && !REPEATABLE.contains(&name.as_str()) {
                    continue;
                }
                out.push(format!("--{name}"));
                out.extend(value.clone());
            }
        }
    }
    Ok(out)
}

/// klog's verbosity flag: `--v=N`, `-v=N`, `--v N`, `-v N` (N a number). `Some(N)` when `a` is one.
fn klog_level<'a>(
    a: &str,
    rest: &mut std::iter::Peekable<impl Iterator<Item = &'a String>>,
) -> Result<Option<u32>, String> {
    let bad = |v: &str| format!("invalid argument {v:?} for \"-v, --v\" flag: expected a log level number");
    if let Some(v) = a.strip_prefix("--v=").or_else(|| a.strip_prefix("-v=")) {
        return v.parse().map(Some).map_err(|_| bad(v));
    }
    if a == "--v" || a == "-v" {
        if let Some(n) = rest.peek().and_then(|n| n.parse::<u32>().ok()) {
            rest.next();
            return Ok(Some(n));
        }
        if a == "--v" {
            return Err(bad(""));
        }
    }
    Ok(None)
}

/// Go's strconv.ParseBool, which pflag uses for `--switch=value`.
fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// `message` with every bootstrap-token-shaped string (`[a-z0-9]{6}.[a-z0-9]{16}`) and every
/// value given to a secret flag in `args` replaced by `<redacted>`.
pub(crate) fn redact(message: &str, args: &[String]) -> String {
    let mut out = redact_token_shapes(message);
    for v in secret_values(args) {
        // Short values would blank out ordinary words; those are not secrets worth the name.
        if v.len() >= 4 {
            out = out.replace(v.as_str(), "<redacted>");
        }
    }
    out
}

fn secret_values(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let Some(flag) = a.strip_prefix("--") else { continue };
        match flag.split_once('=') {
            Some((n, v)) if SECRET_FLAGS.contains(&n) => out.push(v.to_string()),
            None if SECRET_FLAGS.contains(&flag) => out.extend(it.next().cloned()),
            _ => {}
        }
    }
    out
}

/// Replaces each `[a-z0-9]{6}\.[a-z0-9]{16}` match, scanning left to right.
pub(crate) fn redact_token_shapes(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        // The one token parser; a slice ending inside a character holds non-ASCII: no token.
        let m = i + 23 <= b.len() && s.is_char_boundary(i + 23) && crate::token::is_valid_token(&s[i..i + 23]);
        if m {
            out.push_str("<redacted>");
            i += 23;
        } else {
            // Multi-byte characters are copied whole: token characters are all ASCII.
            let ch = s[i..].chars().next().unwrap_or('\u{fffd}');
            out.push(ch);
            i += ch.len_utf8().max(1);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn output_shorthand_in_pflags_spellings() {
        for form in [&["-o", "json"][..], &["-o=json"], &["-ojson"], &["--output=json"], &["--output", "json"]] {
            let mut args = v(&["certs", "check-expiration"]);
            args.extend(v(form));
            assert_eq!(rewrite(&args).unwrap(), v(&["certs", "check-expiration", "--output", "json"]), "{form:?}");
        }
        // The last one wins, as pflag's.
        assert_eq!(rewrite(&v(&["x", "-o", "yaml", "-ojson"])).unwrap(), v(&["x", "--output", "json"]));
    }

    #[test]
    fn equals_spellings_become_separate_words() {
        let r = rewrite(&v(&["join", "--token=abc", "--node-name", "n1", "10.0.0.1:6443"])).unwrap();
        assert_eq!(r, v(&["join", "--token", "abc", "--node-name", "n1", "10.0.0.1:6443"]));
        // An empty value stays an (empty) value.
        assert_eq!(rewrite(&v(&["init", "--cri-socket="])).unwrap(), v(&["init", "--cri-socket", ""]));
        // The value may itself contain '='.
        assert_eq!(
            rewrite(&v(&["init", "--feature-gates=A=true"])).unwrap(),
            v(&["init", "--feature-gates", "A=true"])
        );
    }

    #[test]
    fn switches_take_go_booleans() {
        assert_eq!(rewrite(&v(&["init", "--dry-run=true"])).unwrap(), v(&["init", "--dry-run"]));
        assert_eq!(rewrite(&v(&["init", "--dry-run=false"])).unwrap(), v(&["init"]));
        assert_eq!(rewrite(&v(&["init", "--upload-certs=1"])).unwrap(), v(&["init", "--upload-certs"]));
        let e = rewrite(&v(&["init", "--dry-run=yes"])).unwrap_err();
        assert!(e.contains("--dry-run") && e.contains("yes"), "{e}");
        // A switch never swallows the next word.
        assert_eq!(rewrite(&v(&["init", "--dry-run", "x"])).unwrap(), v(&["init", "--dry-run", "x"]));
    }

    #[test]
    fn last_single_value_wins_and_lists_accumulate() {
        let r = rewrite(&v(&["init", "--node-name=a", "--pod-network-cidr", "p", "--node-name", "b"])).unwrap();
        assert_eq!(r, v(&["init", "--pod-network-cidr", "p", "--node-name", "b"]));
        let r = rewrite(&v(&["init", "--apiserver-cert-extra-sans=a", "--apiserver-cert-extra-sans", "b"])).unwrap();
        assert_eq!(r, v(&["init", "--apiserver-cert-extra-sans", "a", "--apiserver-cert-extra-sans", "b"]));
    }

    #[test]
    fn klog_verbosity_anywhere_becomes_the_top_level_switch() {
        assert_eq!(rewrite(&v(&["init", "--v=5", "--dry-run"])).unwrap(), v(&["-v", "init", "--dry-run"]));
        assert_eq!(rewrite(&v(&["join", "-v", "2", "x:1"])).unwrap(), v(&["-v", "join", "x:1"]));
        assert_eq!(rewrite(&v(&["-v", "init"])).unwrap(), v(&["-v", "init"]));
        assert_eq!(rewrite(&v(&["init", "--v=0"])).unwrap(), v(&["init"]));
        assert!(rewrite(&v(&["init", "--v=loud"])).is_err());
    }

    #[test]
    fn after_double_dash_nothing_is_rewritten() {
        assert_eq!(rewrite(&v(&["join", "--", "--token=x"])).unwrap(), v(&["join", "--", "--token=x"]));
    }

    #[test]
    fn token_shapes_and_secret_flag_values_are_redacted() {
        let s = "Unrecognized argument: --tokn=abcdef.0123456789abcdef and abcdef.0123456789abcdefXYZ";
        let r = redact_token_shapes(s);
        assert!(!r.contains("0123456789abcdef"), "{r}");
        assert_eq!(r.matches("<redacted>").count(), 2, "{r}");
        // Not a token: too short a secret.
        assert_eq!(redact_token_shapes("abcdef.0123456789"), "abcdef.0123456789");
        // A mistyped token after a secret flag is hidden too, in both spellings.
        let args = v(&["join", "--token=abcdef.01234", "--discovery-token", "zzzzzz.9"]);
        let r = redact("bad abcdef.01234 and zzzzzz.9 here", &args);
        assert_eq!(r, "bad <redacted> and <redacted> here");
        assert_eq!(redact_token_shapes("ünïcode abcdef.0123456789abcdef"), "ünïcode <redacted>");
    }
}
