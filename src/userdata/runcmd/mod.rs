//! cloud-init's `runcmd` (and `bootcmd`) entries → [`Command`]s, finding the one `kubeadm init`
//! or `kubeadm join` that kubestrap performs itself. An entry is a shell line or an argv list;
//! the kubeadm step may stand alone, sit in a `&&` chain (Cluster API's
//! `kubeadm init --config F && echo success > SENTINEL`) or inside `sh -c '...'`. kubestrap does
//! not run a shell around its own step, so a line whose kubeadm step it cannot split cleanly
//! (`;`, `||`, pipes, `$VAR`, redirects on kubeadm) is refused with the construct named.

use serde_yaml::Value;

use super::Notices;
use super::script::{Action, Command};
use crate::config::ConfigError;

/// One runcmd entry: plain commands, or the kubeadm step with the chain around it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Entry {
    Commands(Vec<Command>),
    Kubeadm { origin: String, argv: Vec<String>, before: Vec<Command>, after: Vec<Command> },
}

/// Parses `key` (`runcmd` or `bootcmd`); kubeadm steps are allowed only in runcmd.
pub(super) fn parse(src: &str, key: &str, v: &Value, notices: &mut Notices) -> Result<Vec<Entry>, ConfigError> {
    let items = match v {
        Value::Null => return Ok(Vec::new()),
        Value::Sequence(items) => items,
        _ => return Err(ConfigError::doc(src, "#cloud-config", key, "must be a list of commands".into())),
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let origin = format!("{key}[{i}]");
        let err = |m: String| ConfigError::doc(src, "#cloud-config", &origin, m);
        let entry = match item {
            Value::String(line) => line_entry(&origin, line, notices).map_err(err)?,
            Value::Sequence(words) => {
                let argv = words
                    .iter()
                    .map(|w| match w {
                        Value::String(s) => Ok(s.clone()),
                        Value::Number(n) => Ok(n.to_string()),
                        Value::Bool(b) => Ok(b.to_string()),
                        _ => Err(err("an argv list holds strings only".into())),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                argv_entry(&origin, argv, notices).map_err(err)?
            }
            Value::Null => continue,
            _ => return Err(err("must be a command line or an argv list of strings".into())),
        };
        if key != "runcmd" && matches!(entry, Entry::Kubeadm { .. }) {
            return Err(err(format!("kubeadm init/join belongs in runcmd, not {key}")));
        }
        out.push(entry);
    }
    Ok(out)
}

/// An argv list: cloud-init quotes it into a shell line; `[sh, -c, SCRIPT]` is SCRIPT.
fn argv_entry(origin: &str, argv: Vec<String>, notices: &mut Notices) -> Result<Entry, String> {
    if let Some(script) = sh_c(&argv) {
        return line_entry(origin, &script, notices);
    }
    if kubeadm_at(&argv).is_some() {
        return kubeadm_entry(origin, &argv, Vec::new(), Vec::new());
    }
    let line =
        shlex::try_join(argv.iter().map(String::as_str)).map_err(|e| format!("cannot quote the argv list: {e}"))?;
    Ok(Entry::Commands(vec![command(origin, &line)]))
}

/// A shell line.
fn line_entry(origin: &str, line: &str, notices: &mut Notices) -> Result<Entry, String> {
    let words = shlex::split(line);
    if let Some(script) = words.as_deref().and_then(sh_c) {
        return line_entry(origin, &script, notices);
    }
    if !mentions_kubeadm_step(line) {
        if let Some(w) = &words
            && is_image_pull(w)
        {
            notices
                .push(format!("{origin}: `{line}` skipped: the kubelet pulls the images kubestrap's manifests name"));
            return Ok(Entry::Commands(Vec::new()));
        }
        return Ok(Entry::Commands(vec![command(origin, line)]));
    }
    let specials = scan(line);
    if let Some(&(_, what)) = specials.iter().find(|(_, s)| !matches!(s, Special::And | Special::Other(_))) {
        return Err(format!(
            "runs kubeadm with {what} on the same line; kubestrap performs `kubeadm init|join` itself and can only \
             split a `&&` chain around it: put kubeadm on its own runcmd line"
        ));
    }
    let mut segments = Vec::new();
    let mut start = 0;
    for &(at, s) in &specials {
        if s == Special::And {
            segments.push(&line[start..at]);
            start = at + 2;
        }
    }
    segments.push(&line[start..]);
    let mut before = Vec::new();
    let mut after = Vec::new();
    let mut found: Option<Vec<String>> = None;
    for seg in segments {
        let seg = seg.trim();
        let words = shlex::split(seg).unwrap_or_default();
        if kubeadm_at(&words).is_some() {
            if found.is_some() {
                return Err("runs kubeadm init/join twice on one line".into());
            }
            if let Some(&(_, s)) = scan(seg).iter().find(|(_, s)| matches!(s, Special::Other(_))) {
                return Err(format!(
                    "passes kubeadm {s}: kubestrap runs kubeadm without a shell, so write the values out (or use --config)"
                ));
            }
            found = Some(words);
        } else if found.is_none() {
            before.push(command(origin, seg));
        } else {
            after.push(command(origin, seg));
        }
    }
    let argv =
        found.ok_or("mentions kubeadm init/join in a way kubestrap cannot take apart; put it on its own line")?;
    kubeadm_entry(origin, &argv, before, after)
}

/// The kubeadm argv from `kubeadm`/`sudo [-flags] kubeadm` on.
fn kubeadm_entry(origin: &str, words: &[String], before: Vec<Command>, after: Vec<Command>) -> Result<Entry, String> {
    let at = kubeadm_at(words).ok_or("does not start with kubeadm init|join")?;
    if words[..at].iter().any(|w| w != "sudo" && !w.starts_with('-')) {
        return Err(format!("runs kubeadm through {:?}; run it directly (runcmd already runs as root)", words[0]));
    }
    let mut argv = words[at..].to_vec();
    argv[0] = "kubeadm".into();
    Ok(Entry::Kubeadm { origin: origin.to_string(), argv, before, after })
}

/// Commands that run the command after them (with their own arguments first): `sudo kubeadm
/// join` executes kubeadm, `echo kubeadm join` does not. kubeadm_entry refuses all but sudo.
const WRAPPERS: &[&str] = &["sudo", "env", "exec", "nohup", "time", "timeout", "command", "nice", "ionice", "stdbuf"];

fn base(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
}

/// `NAME=value` before a command.
fn is_assignment(w: &str) -> bool {
    w.split_once('=').is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

/// Index of `kubeadm` when this simple command executes `kubeadm init|join`: kubeadm is its
/// command word, after assignments and wrappers (`sudo -E kubeadm join`, `timeout 600 kubeadm
/// init`), not an argument of another command (`echo kubeadm join`).
fn kubeadm_at<S: AsRef<str>>(words: &[S]) -> Option<usize> {
    let mut wrapped = false;
    for (i, w) in words.iter().map(AsRef::as_ref).enumerate() {
        if base(w) == "kubeadm" {
            let sub = words.get(i + 1).map(AsRef::as_ref);
            return matches!(sub, Some("init" | "join")).then_some(i);
        }
        if WRAPPERS.contains(&base(w)) {
            wrapped = true;
        } else if !wrapped && !is_assignment(w) {
            return None;
        }
    }
    None
}

/// Whether the line executes `kubeadm init`/`kubeadm join` in any of its commands (even where
/// kubestrap cannot take it apart, so that such a line is refused rather than run by a shell).
/// Data does not count, as cloud-init's shell would not run it: quoted text (`echo "kubeadm init
/// done"`), arguments of other commands (`echo kubeadm join ... >> /root/join.sh`) and heredoc
/// bodies (a script written for later).
fn mentions_kubeadm_step(line: &str) -> bool {
    const KEYWORDS: &[&str] = &["if", "then", "else", "elif", "do", "while", "until", "!", "{", "}"];
    let bare = unquoted(&without_heredoc_bodies(line));
    bare.split(|c: char| ";&|()`\n".contains(c)).any(|cmd| {
        let words: Vec<&str> = cmd.split_whitespace().skip_while(|w| KEYWORDS.contains(w)).collect();
        kubeadm_at(&words).is_some()
    })
}

/// The line without the bodies of its heredocs (`<<EOF` … `EOF`, `<<-'EOF'`): data, not commands.
fn without_heredoc_bodies(line: &str) -> String {
    let mut out = String::new();
    let mut pending: Vec<(String, bool)> = Vec::new();
    let mut lines = line.split('\n').peekable();
    while let Some(l) = lines.next() {
        if let Some((delim, strip_tabs)) = pending.first() {
            let end = if *strip_tabs { l.trim_start_matches('\t') } else { l };
            if end == delim {
                pending.remove(0);
            }
            continue;
        }
        out.push_str(l);
        if lines.peek().is_some() {
            out.push('\n');
        }
        let bare = unquoted(l);
        let mut rest = &bare[..];
        let mut at = 0;
        while let Some(i) = rest.find("<<") {
            let after = &rest[i + 2..];
            at += i + 2;
            if let Some(here_string) = after.strip_prefix('<') {
                // `<<<` is a here-string: its data is on this line.
                rest = here_string;
                at += 1;
                continue;
            }
            let strip_tabs = after.starts_with('-');
            let skip = usize::from(strip_tabs);
            // The delimiter from the original text (quotes say only "no expansion").
            let orig = l.get(at + skip..).unwrap_or_default();
            let word: String = orig
                .trim_start()
                .chars()
                .take_while(|c| !c.is_whitespace() && !";&|<>()".contains(*c))
                .filter(|c| !"'\"\\".contains(*c))
                .collect();
            if !word.is_empty() {
                pending.push((word, strip_tabs));
            }
            rest = &after[skip..];
            at += skip;
        }
    }
    out
}

/// The line with quoted and escaped characters blanked out.
fn unquoted(line: &str) -> String {
    let (mut single, mut double, mut escaped) = (false, false, false);
    line.chars()
        .map(|c| {
            let quoted = single || double || escaped;
            if escaped {
                escaped = false;
            } else if single {
                single = c != '\'';
            } else if c == '\\' {
                escaped = true;
            } else if double {
                double = c != '"';
            } else if c == '\'' {
                single = true;
            } else if c == '"' {
                double = true;
            }
            // One `_` per byte, so offsets in the result are offsets in the line.
            if quoted || c == '\'' || c == '"' { "_".repeat(c.len_utf8()) } else { c.to_string() }
        })
        .collect()
}

/// `kubeadm config images pull|list`: kubestrap needs no kubeadm binary for these.
fn is_image_pull(w: &[String]) -> bool {
    let Some(i) = w.iter().position(|x| x.rsplit('/').next() == Some("kubeadm")) else { return false };
    w[..i].iter().all(|x| x == "sudo") && w.get(i + 1..i + 3).is_some_and(|s| s[0] == "config" && s[1] == "images")
}

/// `[sh|bash, -c, SCRIPT]` → SCRIPT.
fn sh_c(words: &[String]) -> Option<String> {
    let shell = words.first()?.rsplit('/').next()?;
    (matches!(shell, "sh" | "bash" | "dash") && words.len() == 3 && words[1] == "-c").then(|| words[2].clone())
}

/// A shell line as a command; the simple forms Cluster API and homelab user-data use for marker
/// files are done natively so they honour the node root.
fn command(origin: &str, line: &str) -> Command {
    Command { origin: origin.to_string(), action: native(line).unwrap_or_else(|| Action::Shell(line.to_string())) }
}

fn native(line: &str) -> Option<Action> {
    let specials = scan(line);
    let words = shlex::split(line)?;
    match words.first().map(String::as_str)? {
        "mkdir" if specials.is_empty() && words.len() > 2 && words[1] == "-p" => {
            let dirs = &words[2..];
            dirs.iter().all(|d| plain_abs(d)).then(|| Action::Mkdir(dirs.to_vec()))
        }
        "echo" => {
            // Exactly one unquoted `>` or `>>`, then one absolute path, and nothing to expand.
            let redirects: Vec<_> = specials.iter().filter(|(_, s)| *s == Special::Other('>')).collect();
            let only_redirects = specials.iter().all(|(_, s)| *s == Special::Other('>'));
            let append = match redirects.as_slice() {
                [_] => false,
                [(a, _), (b, _)] if *b == a + 1 => true,
                _ => return None,
            };
            if !only_redirects || line.contains('\\') {
                return None;
            }
            let split = redirects[0].0;
            let target = line[split..].trim_start_matches('>').trim();
            let text_words = shlex::split(&line[..split])?;
            let text = &text_words[1..];
            if !plain_abs(target) || text.first().is_some_and(|w| w.starts_with('-')) {
                return None;
            }
            Some(Action::Echo { path: target.to_string(), text: format!("{}\n", text.join(" ")), append })
        }
        _ => None,
    }
}

/// An absolute path with nothing a shell would expand or a `..` to climb out with.
fn plain_abs(p: &str) -> bool {
    p.starts_with('/')
        && !p.split('/').any(|c| c == "..")
        && p.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+@:,".contains(c))
}

/// A shell metacharacter outside single quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Special {
    /// `&&`
    And,
    Or,
    Pipe,
    Background,
    Sequence,
    Subshell,
    /// `$`, a backtick, `<`, `>` or a glob: fine in commands run by a shell.
    Other(char),
}

impl std::fmt::Display for Special {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Special::And => f.write_str("`&&`"),
            Special::Or => f.write_str("`||`"),
            Special::Pipe => f.write_str("a pipe `|`"),
            Special::Background => f.write_str("a background `&`"),
            Special::Sequence => f.write_str("`;` or a line break"),
            Special::Subshell => f.write_str("a subshell `( )`"),
            Special::Other('$') => f.write_str("`$` (a variable or command substitution)"),
            Special::Other('`') => f.write_str("a backtick command substitution"),
            Special::Other(c) if "<>".contains(*c) => write!(f, "a redirect `{c}`"),
            Special::Other(c) => write!(f, "a glob `{c}`"),
        }
    }
}

/// The shell metacharacters of a line with their byte offsets, skipping quoted text (but not
/// `$` and backticks inside double quotes, which still expand) and backslash escapes.
fn scan(line: &str) -> Vec<(usize, Special)> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let (mut single, mut double) = (false, false);
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if single {
            single = c != b'\'';
        } else if c == b'\\' {
            i += 1;
        } else if double {
            match c {
                b'"' => double = false,
                b'$' | b'`' => out.push((i, Special::Other(c as char))),
                _ => {}
            }
        } else {
            let s = match c {
                b'\'' => {
                    single = true;
                    None
                }
                b'"' => {
                    double = true;
                    None
                }
                b'&' if next == Some(b'&') => Some(Special::And),
                b'|' if next == Some(b'|') => Some(Special::Or),
                b'&' => Some(Special::Background),
                b'|' => Some(Special::Pipe),
                b';' | b'\n' => Some(Special::Sequence),
                b'(' | b')' => Some(Special::Subshell),
                b'$' | b'`' | b'<' | b'>' | b'*' | b'?' | b'[' => Some(Special::Other(c as char)),
                _ => None,
            };
            if let Some(s) = s {
                out.push((i, s));
                if matches!(s, Special::And | Special::Or) {
                    i += 1;
                }
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests;
