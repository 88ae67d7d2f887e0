//! What kubeadm's CoreDNS preflight asks of a Corefile (corefile-migration v1.0.34, which kubeadm
//! 1.37 pins): the plugins and options the migration tool does not know, for each CoreDNS version
//! between the deployed one and the target, and whether a migration between the two exists.
//! The Corefile is read as that tool reads it (Caddy's tokens: whitespace-separated, `"`-quoted,
//! `#` to the line's end; `{`/`}` give the depth: servers, plugins, options). Kubernetes 1.36's
//! CoreDNS is 1.14.2 and 1.37's 1.14.6, and every 1.14.x shares one plugin table, the only one
//! kept here: from an older CoreDNS the checks refuse and say so (docs/differences.md).

/// Every CoreDNS version corefile-migration knows, newest first; each one's next is the entry
/// before it.
const VERSIONS: [&str; 57] = [
    "1.14.6", "1.14.4", "1.14.3", "1.14.2", "1.14.1", "1.14.0", "1.13.2", "1.13.1", "1.13.0", "1.12.4", "1.12.3",
    "1.12.2", "1.12.1", "1.12.0", "1.11.4", "1.11.3", "1.11.1", "1.11.0", "1.10.1", "1.10.0", "1.9.4", "1.9.3",
    "1.9.2", "1.9.1", "1.9.0", "1.8.7", "1.8.6", "1.8.5", "1.8.4", "1.8.3", "1.8.0", "1.7.1", "1.7.0", "1.6.9",
    "1.6.7", "1.6.6", "1.6.5", "1.6.4", "1.6.3", "1.6.2", "1.6.1", "1.6.0", "1.5.2", "1.5.1", "1.5.0", "1.4.0",
    "1.3.1", "1.3.0", "1.2.6", "1.2.5", "1.2.4", "1.2.3", "1.2.2", "1.2.1", "1.2.0", "1.1.4", "1.1.3",
];

/// The oldest version whose plugin table is kept here (every 1.14.x has the same one): a walk
/// from the version before it still reads only this table.
const OLDEST_KEPT: usize = 5;

/// CoreDNS 1.14.x's plugins as the migration tool knows them, each with its option names.
const PLUGINS: [(&str, &[&str]); 16] = [
    ("errors", &["consolidate", "stacktrace"]),
    ("log", &["class"]),
    ("health", &["lameduck"]),
    ("ready", &[]),
    ("autopath", &[]),
    (
        "kubernetes",
        &[
            "endpoint",
            "tls",
            "kubeconfig",
            "namespaces",
            "labels",
            "pods",
            "endpoint_pod_names",
            "ttl",
            "noendpoints",
            "fallthrough",
            "ignore",
        ],
    ),
    ("k8s_external", &["apex", "ttl", "fallthrough"]),
    ("prometheus", &[]),
    (
        "forward",
        &[
            "except",
            "force_tcp",
            "prefer_udp",
            "expire",
            "max_fails",
            "tls",
            "tls_servername",
            "policy",
            "health_check",
            "max_concurrent",
            "next",
            "failfast_all_unhealthy_upstreams",
        ],
    ),
    ("cache", &["success", "denial", "prefetch", "serve_stale", "disable", "servfail", "keepttl"]),
    ("loop", &[]),
    ("reload", &[]),
    ("loadbalance", &[]),
    // Its entries' names are addresses, matched by shape below.
    ("hosts", &["ttl", "no_reverse", "reload", "fallthrough"]),
    ("rewrite", &["type", "class", "name", "answer name", "edns0", "ttl", "cname_target"]),
    ("transfer", &["to"]),
];

/// A Corefile as the migration tool sees it: servers, their plugins, the plugins' options.
#[derive(Debug, Default, PartialEq)]
pub struct Corefile {
    pub servers: Vec<Server>,
}

#[derive(Debug, Default, PartialEq)]
pub struct Server {
    pub keys: Vec<String>,
    pub plugins: Vec<Plugin>,
}

#[derive(Debug, Default, PartialEq)]
pub struct Plugin {
    pub name: String,
    pub args: Vec<String>,
    pub options: Vec<(String, Vec<String>)>,
}

/// A token and the line it starts on.
struct Token {
    text: String,
    line: usize,
}

/// Caddy's lexer: a leading BOM dropped, `\r` ignored, `#` starts a comment to the line's end
/// (or, glued to a word, to the word's end), `"` quotes (with `\"`) span lines.
fn tokens(s: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let (mut val, mut line, mut start) = (String::new(), 1, 1);
    let (mut comment, mut quoted, mut escaped) = (false, false, false);
    for ch in s.strip_prefix('\u{feff}').unwrap_or(s).chars() {
        if quoted {
            if !escaped && ch == '\\' {
                escaped = true;
                continue;
            }
            if !escaped && ch == '"' {
                quoted = false;
                out.push(Token { text: std::mem::take(&mut val), line: start });
                continue;
            }
            if ch == '\n' {
                line += 1;
            }
            if escaped && ch != '"' {
                val.push('\\');
            }
            val.push(ch);
            escaped = false;
            continue;
        }
        if ch.is_whitespace() {
            if ch == '\r' {
                continue;
            }
            if ch == '\n' {
                line += 1;
                comment = false;
            }
            if !val.is_empty() {
                out.push(Token { text: std::mem::take(&mut val), line: start });
                // Caddy's comment state lives in one token's scan: `a#b c` yields `a` and `c`.
                comment = false;
            }
            continue;
        }
        if ch == '#' {
            comment = true;
        }
        if comment {
            continue;
        }
        if val.is_empty() {
            start = line;
            if ch == '"' {
                quoted = true;
                continue;
            }
        }
        val.push(ch);
    }
    if !val.is_empty() {
        out.push(Token { text: val, line: start });
    }
    out
}

impl Corefile {
    pub fn parse(s: &str) -> Corefile {
        let toks = tokens(s);
        let mut c = Corefile::default();
        let mut depth: i64 = 0;
        let mut i = 0;
        while i < toks.len() {
            let val = toks[i].text.clone();
            if val == "{" || val == "}" {
                depth += if val == "{" { 1 } else { -1 };
                i += 1;
                continue;
            }
            // The rest of this token's line, up to a `{`.
            let mut args = Vec::new();
            while i + 1 < toks.len() && toks[i].line + toks[i].text.matches('\n').count() == toks[i + 1].line {
                if toks[i + 1].text == "{" {
                    break;
                }
                i += 1;
                args.push(toks[i].text.clone());
            }
            i += 1;
            match depth {
                0 => c.servers.push(Server { keys: [vec![val], args].concat(), plugins: Vec::new() }),
                1 => {
                    if let Some(s) = c.servers.last_mut() {
                        s.plugins.push(Plugin { name: val, args, options: Vec::new() });
                    }
                }
                2 => {
                    if let Some(p) = c.servers.last_mut().and_then(|s| s.plugins.last_mut()) {
                        p.options.push((val, args));
                    }
                }
                _ => {}
            }
        }
        c
    }
}

/// An option's name the table knows for `plugin` (hosts' entries by their address's shape).
fn known_option(plugin: &[&str], plugin_name: &str, option: &str) -> bool {
    plugin.contains(&option) || (plugin_name == "hosts" && (looks_ipv4(option) || looks_ipv6(option)))
}

/// Holds `\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}` somewhere (the tool's unanchored pattern).
fn looks_ipv4(s: &str) -> bool {
    let b = s.as_bytes();
    (0..b.len()).any(|i| {
        let mut at = i;
        for group in 0..4 {
            let digits = b[at..].iter().take_while(|c| c.is_ascii_digit()).count();
            // The first and last groups may take one digit of a longer run: unanchored.
            let ok = if group == 0 || group == 3 { digits >= 1 } else { (1..=3).contains(&digits) };
            if !ok {
                return false;
            }
            at += if group == 3 { 1 } else { digits };
            if group < 3 {
                if b.get(at) != Some(&b'.') {
                    return false;
                }
                at += 1;
            }
        }
        true
    })
}

/// Holds `[0-9A-Fa-f]{1,4}:[:0-9A-Fa-f]+:[0-9A-Fa-f]{1,4}` somewhere: a hex digit, a colon,
/// one or more of hex digits and colons, a colon, a hex digit.
fn looks_ipv6(s: &str) -> bool {
    let b = s.as_bytes();
    let mid = |c: &u8| c.is_ascii_hexdigit() || *c == b':';
    (0..b.len().saturating_sub(4)).any(|i| {
        if !(b[i].is_ascii_hexdigit() && b[i + 1] == b':') {
            return false;
        }
        let run = b[i + 2..].iter().take_while(|c| mid(c)).count();
        // Some split of the run into `[:hex]+ :` followed by a hex digit.
        (i + 3..i + 2 + run).any(|j| b[j] == b':' && b.get(j + 1).is_some_and(u8::is_ascii_hexdigit))
    })
}

fn position(v: &str) -> Option<usize> {
    VERSIONS.iter().position(|x| *x == v)
}

/// corefile-migration's ValidUpMigration: `from` known and `to` on its way up.
pub fn valid_up(from: &str, to: &str) -> Result<(), String> {
    let Some(f) = position(from) else { return Err(format!("start version '{from}' not supported")) };
    if from == to || position(to).is_some_and(|t| t < f) {
        return Ok(());
    }
    Err(format!("cannot migrate up to '{to}' from '{from}'"))
}

/// corefile-migration's Unsupported: for each version after `from` up to `to`, each plugin and
/// option it does not know, in kubeadm's words (`Plugin "x" is unsupported by this migration
/// tool in 1.14.3.`). None when the versions are equal.
pub fn unsupported(from: &str, to: &str, corefile: &str) -> Result<Vec<String>, String> {
    if from == to {
        return Ok(Vec::new());
    }
    valid_up(from, to)?;
    let (f, t) = (position(from).unwrap_or(0), position(to).unwrap_or(0));
    older_than_kept(f)?;
    let cf = Corefile::parse(corefile);
    let mut out = Vec::new();
    for v in VERSIONS[t..f].iter().rev() {
        for s in &cf.servers {
            for p in &s.plugins {
                // The tool's wording: an empty option name reads as the plugin's notice.
                let notice = |o: &str| match o {
                    "" => format!("Plugin \"{}\" is unsupported by this migration tool in {v}.", p.name),
                    o => {
                        format!("Option \"{o}\" in plugin \"{}\" is unsupported by this migration tool in {v}.", p.name)
                    }
                };
                match PLUGINS.iter().find(|(n, _)| *n == p.name) {
                    None => out.push(notice("")),
                    Some((_, opts)) => out.extend(
                        p.options.iter().filter(|(o, _)| !known_option(opts, &p.name, o)).map(|(o, _)| notice(o)),
                    ),
                }
            }
        }
    }
    Ok(out)
}

/// corefile-migration's Migrate, as kubeadm's CoreDNSMigration check uses it: whether the
/// Corefile can be taken from `from` to `to`. Between 1.14.x versions the tool changes nothing
/// (no version there deprecates, removes or adds a default), so only the versions are judged.
pub fn migratable(from: &str, to: &str) -> Result<(), String> {
    if from == to {
        return Ok(());
    }
    valid_up(from, to)?;
    older_than_kept(position(from).unwrap_or(0))
}

/// A walk from the version at `f` would need a plugin table older than the one kept.
fn older_than_kept(f: usize) -> Result<(), String> {
    if f <= OLDEST_KEPT + 1 {
        return Ok(());
    }
    Err(format!(
        "kubestrap checks Corefiles from CoreDNS {} on, and this cluster runs CoreDNS {}: check its Corefile against the new CoreDNS yourself, then skip this check (--ignore-preflight-errors)",
        VERSIONS[OLDEST_KEPT + 1],
        VERSIONS[f]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corefile_is_read_as_caddy_reads_it() {
        let cf = Corefile::parse(
            "\u{feff}.:53 {\n    errors # a comment {\n    forward . /etc/resolv.conf {\n       max_concurrent 1000\n    }\n    hosts {\n  \"10.0.0.1 a\" b\n}\n}\nexample.org:53 {forward . 1.2.3.4}\n",
        );
        assert_eq!(cf.servers.len(), 2);
        let s = &cf.servers[0];
        assert_eq!(s.keys, [".:53"]);
        assert_eq!(s.plugins.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["errors", "forward", "hosts"]);
        assert_eq!(s.plugins[1].args, [".", "/etc/resolv.conf"]);
        assert_eq!(s.plugins[1].options, [("max_concurrent".to_string(), vec!["1000".to_string()])]);
        assert_eq!(s.plugins[2].options, [("10.0.0.1 a".to_string(), vec!["b".to_string()])]);
        // `{forward` is one word (only whitespace separates), so the second server has no plugins.
        assert_eq!(cf.servers[1].keys, ["example.org:53", "{forward", ".", "1.2.3.4}"]);
    }

    #[test]
    fn unknown_plugins_and_options_are_named_for_each_version_on_the_way() {
        let corefile = ".:53 {\n    whoami\n    cache 30 {\n        jitter 1\n    }\n    hosts {\n        10.0.0.1 a.example\n        fd00::1:2 b.example\n        fallthrough\n        nope\n    }\n}\n";
        let got = unsupported("1.14.3", "1.14.6", corefile).unwrap();
        assert_eq!(
            got,
            [
                "Plugin \"whoami\" is unsupported by this migration tool in 1.14.4.",
                "Option \"jitter\" in plugin \"cache\" is unsupported by this migration tool in 1.14.4.",
                "Option \"nope\" in plugin \"hosts\" is unsupported by this migration tool in 1.14.4.",
                "Plugin \"whoami\" is unsupported by this migration tool in 1.14.6.",
                "Option \"jitter\" in plugin \"cache\" is unsupported by this migration tool in 1.14.6.",
                "Option \"nope\" in plugin \"hosts\" is unsupported by this migration tool in 1.14.6.",
            ]
        );
        assert_eq!(unsupported("1.14.6", "1.14.6", corefile).unwrap(), Vec::<String>::new());
        assert_eq!(unsupported("1.14.6-x", "1.14.6", corefile).unwrap_err(), "start version '1.14.6-x' not supported");
        assert_eq!(unsupported("", "1.14.6", "").unwrap_err(), "start version '' not supported");
        assert_eq!(migratable("1.14.6", "1.14.2").unwrap_err(), "cannot migrate up to '1.14.2' from '1.14.6'");
        assert!(migratable("1.14.2", "1.14.6").is_ok());
        assert!(migratable("1.13.1", "1.14.6").unwrap_err().contains("CoreDNS 1.13.2 on"));
        assert!(migratable("1.13.2", "1.14.6").is_ok());
        // From 1.13.2 every version walked (1.14.0 on) has the kept table.
        assert_eq!(unsupported("1.13.2", "1.14.0", ".:53 {\n    whoami\n}\n").unwrap().len(), 1);
    }

    #[test]
    fn hosts_entries_are_matched_by_the_tools_unanchored_address_patterns() {
        for yes in ["10.0.0.1", "x1.2.3.4y", "1234.5.6.7890", "fd00::1:2", "a:b:c", "::ffff:1:2"] {
            assert!(looks_ipv4(yes) || looks_ipv6(yes), "{yes}");
        }
        for no in ["1.2.3", "1234.56789.1.1", "a:b", "example.org", "::1", "1::", "fd00::1"] {
            assert!(!(looks_ipv4(no) || looks_ipv6(no)), "{no}");
        }
    }
}
