//! Cluster API's `/etc/kubeadm.sh` taken apart by its fixed shape: `set -e`, the
//! preKubeadmCommands, the `kubeadm init|join --config /etc/kubeadm.yml` line, the
//! bootstrap-success sentinel, `mv /etc/kubeadm.yml /tmp/`, the postKubeadmCommands. The two
//! command blocks stay whole (entries may be multi-line heredocs) and run as one `bash -e`
//! script each, as they did inside the original script.

/// The sentinel line Cluster API writes right after the kubeadm line.
pub(super) const SENTINEL_LINE: &str =
    "mkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete";
pub(super) const SENTINEL_DIR: &str = "/run/cluster-api";
pub(super) const SENTINEL_FILE: &str = "/run/cluster-api/bootstrap-success.complete";
/// The run-once move of the kubeadm config out of /etc.
pub(super) const MOVE_LINE: &str = "mv /etc/kubeadm.yml /tmp/";

/// The script's parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Parts {
    /// Between `set -e` and the kubeadm line, blank edges trimmed.
    pub pre: String,
    /// The kubeadm line's words.
    pub argv: Vec<String>,
    /// 1-based line of the kubeadm command, for origins.
    pub line: usize,
    /// The `mv /etc/kubeadm.yml /tmp/` line was there.
    pub moves_config: bool,
    /// After the sentinel (and the move).
    pub post: String,
}

/// Splits the script; the error says which part of the shape is missing.
pub(super) fn split(text: &str) -> Result<Parts, String> {
    let lines: Vec<&str> = text.lines().collect();
    let set_e = lines.iter().position(|l| l.trim() == "set -e").ok_or(
        "has no `set -e` line: it is not the /etc/kubeadm.sh Cluster API renders, which kubestrap takes apart",
    )?;
    let sentinel = lines.iter().position(|l| l.trim() == SENTINEL_LINE).ok_or_else(|| {
        format!("has no `{SENTINEL_LINE}` line after the kubeadm command, so kubestrap cannot find Cluster API's shape")
    })?;
    let kubeadm = (set_e + 1..sentinel)
        .rev()
        .find(|&i| !lines[i].trim().is_empty())
        .ok_or("has no kubeadm line before the bootstrap-success sentinel")?;
    let argv = shlex::split(lines[kubeadm].trim())
        .filter(|w| {
            w.first().is_some_and(|k| k.rsplit('/').next() == Some("kubeadm"))
                && w.get(1).is_some_and(|s| s == "init" || s == "join")
        })
        .ok_or_else(|| format!("line {}: expected `kubeadm init|join --config /etc/kubeadm.yml`", kubeadm + 1))?;
    let mut rest = sentinel + 1;
    while rest < lines.len() && lines[rest].trim().is_empty() {
        rest += 1;
    }
    let moves_config = lines.get(rest).is_some_and(|l| l.trim() == MOVE_LINE);
    if moves_config {
        rest += 1;
    }
    let block = |from: usize, to: usize| trim_blank_lines(&lines[from.min(to)..to]);
    Ok(Parts { pre: block(set_e + 1, kubeadm), argv, line: kubeadm + 1, moves_config, post: block(rest, lines.len()) })
}

fn trim_blank_lines(lines: &[&str]) -> String {
    let start = lines.iter().position(|l| !l.trim().is_empty()).unwrap_or(lines.len());
    let end = lines.iter().rposition(|l| !l.trim().is_empty()).map_or(start, |e| e + 1);
    lines[start..end].iter().map(|l| format!("{l}\n")).collect()
}

/// A block as one command: `bash -e` over the block, with `env` exported first (quoted, so
/// values are never expanded by the shell).
pub(super) fn bash_block(env: &[(String, String)], block: &str) -> String {
    let mut script: String = env.iter().map(|(k, v)| format!("export {k}={}\n", quote(v))).collect();
    script.push_str(block);
    format!("exec bash -e -c {}", quote(&script))
}

/// POSIX single quotes: everything literal, a `'` closed, escaped and reopened.
pub(super) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}
