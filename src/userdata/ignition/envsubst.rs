//! The Afterburn idiom of Cluster API's Flatcar templates: preKubeadmCommands that run
//! `envsubst < /etc/kubeadm.yml > /etc/kubeadm.yml.tmp` then `mv /etc/kubeadm.yml.tmp
//! /etc/kubeadm.yml`, so `${COREOS_EC2_HOSTNAME}` in the kubeadm config becomes this node's
//! value. kubestrap reads the kubeadm config before anything runs, so it does the substitution
//! itself and drops those two lines; `export X=${Y%.*}` lines before them (CAPO strips the
//! domain this way) are evaluated when they are that simple, and a variable set any other way is
//! refused by name if the config uses it.

const CONFIG: &str = "/etc/kubeadm.yml";

/// A variable an earlier pre-command sets: its value, or why kubestrap cannot know it.
pub(super) type Assigned = (String, Result<String, String>);

/// The pre block without the idiom's two lines, and the assignments before it; None when the
/// block does not run the idiom.
pub(super) fn take_idiom(pre: &str, env: &dyn Fn(&str) -> Result<String, String>) -> Option<(String, Vec<Assigned>)> {
    let lines: Vec<&str> = pre.lines().collect();
    let (at, tmp) = lines.iter().enumerate().find_map(|(i, l)| envsubst_into(l).map(|t| (i, t)))?;
    let mv = (at + 1..lines.len()).find(|&j| is_move_back(lines[j], &tmp))?;
    let mut assigned: Vec<Assigned> = Vec::new();
    for l in &lines[..at] {
        if let Some((name, value)) = assignment(l) {
            let known = |n: &str| lookup(&assigned, env, n);
            let v = evaluate(value, &known);
            assigned.push((name.to_string(), v));
        }
    }
    let kept: String =
        lines.iter().enumerate().filter(|(i, _)| *i != at && *i != mv).map(|(_, l)| format!("{l}\n")).collect();
    Some((kept, assigned))
}

/// A name as the pre block sees it: the latest assignment, else the metadata environment.
pub(super) fn lookup(
    assigned: &[Assigned],
    env: &dyn Fn(&str) -> Result<String, String>,
    name: &str,
) -> Result<String, String> {
    match assigned.iter().rev().find(|(n, _)| n == name) {
        Some((_, v)) => v.clone(),
        None => env(name),
    }
}

/// `envsubst < /etc/kubeadm.yml > TMP` (spaces around the redirects optional) → TMP.
fn envsubst_into(line: &str) -> Option<String> {
    let words = words(line);
    match words.as_slice() {
        [cmd, lt, src, gt, tmp] if cmd == "envsubst" && lt == "<" && src == CONFIG && gt == ">" => Some(tmp.clone()),
        _ => None,
    }
}

/// `mv [-f] TMP /etc/kubeadm.yml`.
fn is_move_back(line: &str, tmp: &str) -> bool {
    let w = words(line);
    let w: Vec<&str> = w.iter().map(String::as_str).filter(|x| *x != "-f").collect();
    w == ["mv", tmp, CONFIG]
}

/// Whitespace-split words with `<x`/`>x` split into two.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    for w in line.split_whitespace() {
        match w.split_at_checked(1) {
            Some((r @ ("<" | ">"), rest)) if !rest.is_empty() => {
                out.push(r.to_string());
                out.push(rest.to_string());
            }
            _ => out.push(w.to_string()),
        }
    }
    out
}

/// The pre block's plain assignment lines (no command substitution, so re-running them does
/// nothing else), to run again ahead of the post block: in /etc/kubeadm.sh both blocks ran in one
/// shell, so the post-commands saw what the pre-commands set.
pub(super) fn carried_assignments(pre: &str) -> String {
    pre.lines()
        .filter(|l| assignment(l).is_some_and(|(_, v)| !v.contains("$(") && !v.contains('`')))
        .map(|l| format!("{}\n", l.trim()))
        .collect()
}

/// `[export ]NAME=VALUE` on a line of its own.
fn assignment(line: &str) -> Option<(&str, &str)> {
    let l = line.trim();
    let l = l.strip_prefix("export ").map(str::trim_start).unwrap_or(l);
    let (name, value) = l.split_once('=')?;
    is_name(name).then_some((name, value.trim()))
}

fn is_name(n: &str) -> bool {
    n.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A literal, `$Y`, `${Y}` or `${Y%PAT}`/`%%`/`#`/`##` with PAT `<text>*` (suffix) or
/// `*<text>` (prefix); anything else is a shell construct kubestrap does not evaluate.
fn evaluate(value: &str, known: &dyn Fn(&str) -> Result<String, String>) -> Result<String, String> {
    let v = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(value);
    if !v.contains(['$', '`', '\\', '\'', '"', ' ']) {
        return Ok(v.to_string());
    }
    let unsupported = || Err(format!("it is set by `{value}`, which kubestrap does not evaluate"));
    let inner = match v.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
        Some(inner) => inner,
        None => match v.strip_prefix('$') {
            Some(n) if is_name(n) => return known(n),
            _ => return unsupported(),
        },
    };
    let Some(cut) = inner.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) else {
        return known(inner);
    };
    let (name, op) = inner.split_at(cut);
    let base = known(name)?;
    let stripped = if let Some(p) = op.strip_prefix("%%").or(op.strip_prefix('%')) {
        let longest = op.starts_with("%%");
        p.strip_suffix('*').filter(|t| !t.contains(['*', '?', '['])).map(|t| {
            let at = if longest { base.find(t) } else { base.rfind(t) };
            at.map_or(base.clone(), |i| base[..i].to_string())
        })
    } else if let Some(p) = op.strip_prefix("##").or(op.strip_prefix('#')) {
        let longest = op.starts_with("##");
        p.strip_prefix('*').filter(|t| !t.contains(['*', '?', '['])).map(|t| {
            let at = if longest { base.rfind(t) } else { base.find(t) };
            at.map_or(base.clone(), |i| base[i + t.len()..].to_string())
        })
    } else {
        None
    };
    stripped.map_or_else(unsupported, Ok)
}

/// envsubst over `text`: `$NAME` and `${NAME}` replaced, any other `$` left as is. The first
/// name that cannot be resolved is the error, with why.
pub(super) fn substitute(
    text: &str,
    value: &dyn Fn(&str) -> Result<String, String>,
) -> Result<String, (String, String)> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, len) = if let Some(r) = after.strip_prefix('{') {
            match r.find('}') {
                Some(end) if is_name(&r[..end]) => (&r[..end], end + 2),
                _ => ("", 0),
            }
        } else {
            let end = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
            if is_name(&after[..end]) { (&after[..end], end) } else { ("", 0) }
        };
        if name.is_empty() {
            out.push('$');
            rest = after;
            continue;
        }
        out.push_str(&value(name).map_err(|e| (name.to_string(), e))?);
        rest = &after[len..];
    }
    out.push_str(rest);
    Ok(out)
}
