//! The failure file a fleet manager reads: when a boot stage fails, `/run/cluster-api/
//! bootstrap-failure.json` (next to Cluster API's success sentinel) says why — reason, stage,
//! phase, exit code, time and the last lines of our log — and the console gets the same facts as
//! one `KUBESTRAP-FAILURE {...}` line. A stage that succeeds removes the file, so its presence
//! always means "the last stage run failed". Never a secret: every text goes through [`scrub`].
//!
//! Cluster API's contract defines only the success sentinel (`bootstrap-success.complete`,
//! content `success`); a failure must never be written into that file (its consumers only test
//! that it exists), so this is a separate file with the sentinel's `bootstrap-` prefix and JSON
//! content a controller or an SSH probe can parse.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Kind};
use crate::fsutil::NodeFs;
use crate::paths::BOOT_FAILURE;
use crate::status::Status;

/// The line prefix of the console line.
pub(crate) const CONSOLE_PREFIX: &str = "KUBESTRAP-FAILURE ";

/// What the failure file holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    /// A CamelCase reason for a condition (`PreflightFailed`, `ConfigInvalid`, ...).
    pub reason: String,
    /// The error message (one line, scrubbed).
    pub message: String,
    /// The boot stage: `pre-kubelet` or `post-kubelet`.
    pub stage: String,
    /// The phase that was running (`gather`, `preflight`, `certs`, `kubelet-start`, ...).
    pub phase: String,
    /// The exit code of `kubestrap boot` (see docs/cli.md's exit codes).
    pub exit_code: i32,
    /// Which attempt of the stage this was (a failed stage is retried at the next boot).
    pub attempt: u32,
    /// When it failed, RFC 3339 UTC.
    pub time: String,
    /// The last lines of this run's log, oldest first, scrubbed.
    pub log_tail: Vec<String>,
}

/// A reason for an error kind, in the style of Kubernetes condition reasons.
pub(crate) fn reason(kind: Kind) -> &'static str {
    match kind {
        Kind::Usage => "UsageInvalid",
        Kind::Config => "ConfigInvalid",
        Kind::State => "NodeStateInvalid",
        Kind::Preflight => "PreflightFailed",
        Kind::Runtime => "BootstrapFailed",
        Kind::Conflict => "OtherClusterAtEndpoint",
        Kind::Skew => "UpgradeRefused",
    }
}

/// Builds the record for a failed stage from the reporter's status, the error and the log tail.
pub(crate) fn record(status: &Status, e: &Error, log_tail: &[String], time: String) -> Failure {
    Failure {
        reason: reason(e.kind).into(),
        message: scrub(&e.message),
        stage: status.stage.clone(),
        phase: status.phase.clone(),
        exit_code: e.kind.exit_code(),
        attempt: status.attempt,
        time,
        log_tail: log_tail.iter().map(|l| scrub(l)).collect(),
    }
}

/// Writes the failure file (atomically) and prints the console line. A report, not the work:
/// failing to write it is said, never fatal.
pub(crate) fn report(fs: &NodeFs, f: &Failure) {
    let line = serde_json::json!({
        "reason": f.reason, "stage": f.stage, "phase": f.phase, "exitCode": f.exit_code,
        "attempt": f.attempt, "time": f.time, "message": f.message, "file": BOOT_FAILURE.as_str(),
    });
    println!("{CONSOLE_PREFIX}{line}");
    let written = serde_json::to_vec_pretty(f)
        .map_err(|e| format!("encoding {BOOT_FAILURE}: {e}"))
        .and_then(|json| fs.write_unsynced(&BOOT_FAILURE, &json).map_err(|e| e.to_string()));
    if let Err(e) = written {
        log::warn!("[boot] could not write the failure file: {e}");
    }
}

/// Removes the failure file after a stage succeeded (absent is fine).
pub(crate) fn clear(fs: &NodeFs) {
    if let Err(e) = fs.remove(&BOOT_FAILURE) {
        log::warn!("[boot] could not remove {BOOT_FAILURE}: {e}");
    }
}

/// Reads the failure file, if there is one.
pub fn read(fs: &NodeFs) -> Option<Failure> {
    fs.read(&BOOT_FAILURE).ok().flatten().and_then(|b| serde_json::from_slice(&b).ok())
}

/// Flags whose value is a secret wherever a command line is logged.
const SECRET_FLAGS: &[&str] = &["--token", "--discovery-token", "--tls-bootstrap-token", "--certificate-key"];

/// `text` without anything secret: bootstrap-token shapes, the values of secret flags, long hex
/// runs (a certificate key; `sha256:` pins are public and kept), and any line that looks like
/// PEM (a key).
pub(crate) fn scrub(text: &str) -> String {
    if text.contains("PRIVATE KEY") || text.contains("-----BEGIN") {
        return "<line withheld: it may hold a key>".into();
    }
    let text = crate::argv::redact_token_shapes(text);
    let mut words: Vec<String> = Vec::new();
    let mut secret_next = false;
    for w in text.split(' ') {
        if secret_next && !w.is_empty() {
            words.push("<redacted>".into());
            secret_next = false;
            continue;
        }
        match w.split_once('=') {
            Some((flag, _)) if SECRET_FLAGS.contains(&flag) => words.push(format!("{flag}=<redacted>")),
            _ => {
                secret_next = SECRET_FLAGS.contains(&w);
                words.push(redact_hex(w));
            }
        }
    }
    words.join(" ")
}

/// Replaces runs of 32 or more hex digits (key material) unless they follow `sha256:`.
fn redact_hex(word: &str) -> String {
    let b = word.as_bytes();
    let mut out = String::with_capacity(word.len());
    let mut i = 0;
    while i < b.len() {
        let run = b[i..].iter().take_while(|c| c.is_ascii_hexdigit()).count();
        if run >= 32 && !word[..i].ends_with("sha256:") {
            out.push_str("<redacted>");
            i += run;
        } else if run > 0 {
            out.push_str(&word[i..i + run]);
            i += run;
        } else {
            let ch = word[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&word[i..i + ch]);
            i += ch;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_survive_the_scrub() {
        let key = "0f".repeat(32);
        let line = format!(
            "kubeadm join x:6443 --token abcdef.0123456789abcdef --certificate-key {key} --discovery-token=zzzzzz.zzzzzzzzzzzzzzzz --discovery-token-ca-cert-hash sha256:{key}"
        );
        let s = scrub(&line);
        assert!(!s.contains("abcdef.0123456789abcdef") && !s.contains("zzzzzz.zzzz"), "{s}");
        assert_eq!(s.matches(&key).count(), 1, "only the public pin is kept: {s}");
        assert!(s.contains(&format!("sha256:{key}")), "{s}");
        assert!(s.contains("--certificate-key <redacted>") && s.contains("--discovery-token=<redacted>"), "{s}");
        assert_eq!(scrub("-----BEGIN PRIVATE KEY-----"), "<line withheld: it may hold a key>");
        assert_eq!(scrub("[certs] Using existing ca.crt ünïcode"), "[certs] Using existing ca.crt ünïcode");
        assert_eq!(scrub(&format!("certificateKey: {key}")), "certificateKey: <redacted>");
    }
}
