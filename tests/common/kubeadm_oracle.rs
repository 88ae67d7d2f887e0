//! The real kubeadm v1.37.2 as the oracle for "as kubeadm does" verdicts (issue #35). It runs in
//! network and mount namespaces of its own: the network's only way out is a veth pair ending in
//! the same namespace (kubeadm finds a default interface, 10.0.0.10, for the defaults it
//! computes, and nothing leaves); tmpfs over /etc/kubernetes and /var/lib, and a resolv.conf
//! naming 127.0.0.1 (lookups fail at once instead of timing out), so nothing on the host is read
//! or written. A run past its deadline is killed and fails the test.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The namespace's own address: the advertise address to give kubeadm (it refuses loopback).
pub const ADDR: &str = "10.0.0.10";

/// How long one kubeadm run may take before it counts as a hang.
pub const DEADLINE: Duration = Duration::from_secs(180);

/// The line kubeadm prints as its first workflow step (`init` and `join` alike), after it has
/// read and validated its flags and config.
pub const FIRST_WORKFLOW_LINE: &str = "[preflight] Running pre-flight checks";

/// The namespace's setup, as shell: loopback, the veth pair, the default route, the mounts.
const SETUP: &str = "set -e\n\
    ip link set lo up\n\
    ip link add v0 type veth peer name v1\n\
    ip addr add 10.0.0.10/24 dev v0\n\
    ip link set v0 up\n\
    ip link set v1 up\n\
    ip route add default via 10.0.0.1 dev v0\n\
    mkdir -p /etc/kubernetes\n\
    mount -t tmpfs none /etc/kubernetes\n\
    mount -t tmpfs none /var/lib\n\
    echo 'nameserver 127.0.0.1' > /etc/kubernetes/resolv.conf\n\
    mount --bind /etc/kubernetes/resolv.conf /etc/resolv.conf\n\
    set +e\n";

/// One oracle run.
#[derive(Debug)]
pub struct Run {
    /// The exit code; None when it was stopped at the `until` line (or died by a signal).
    pub code: Option<i32>,
    /// Did a stdout line start with `until`?
    pub saw: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// kubeadm's first error line (what it refused with), or its output's end.
    pub fn why(&self) -> String {
        let err = self.stderr.lines().find(|l| l.starts_with("error") || l.contains("] error"));
        let last = self.stderr.lines().chain(self.stdout.lines()).rfind(|l| !l.trim().is_empty());
        err.or(last).unwrap_or_default().to_string()
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// What the oracle needs: the real kubeadm and root; a test says `need!(kubeadm_oracle::need())`.
pub fn need() -> super::needs::Need {
    use super::needs::Need;
    Need::all([Need::real_bin(&super::real_bins::dir().join("kubeadm")), Need::root()])
}

/// The real kubeadm.
pub fn kubeadm() -> String {
    super::real_bins::bin("kubeadm").display().to_string()
}

/// Runs shell `body` in the isolated namespaces (from `dir`, which holds the script). Returns
/// when it exits, or, given `until`, as soon as a stdout line starts with it (the whole process
/// group is killed then). Past [`DEADLINE`] it is killed and the test fails.
pub fn run_isolated(dir: &std::path::Path, body: &str, until: Option<&str>) -> Run {
    // Namespaces of its own; a test skips first with `need!(kubeadm_oracle::need())`.
    super::needs::require(super::needs::Need::root());
    let script = dir.join("kubeadm-oracle.sh");
    std::fs::write(&script, format!("{SETUP}{body}\n")).expect("write the oracle script");
    let mut child = Command::new("unshare")
        .args(["--net", "--mount", "--propagation", "private", "sh"])
        .arg(&script)
        .env_clear()
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("start unshare");
    let pgid = child.id();
    let (tx, rx) = mpsc::channel::<Option<String>>();
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    let reader = std::thread::spawn(move || {
        for line in out.lines() {
            let Ok(line) = line else { break };
            if tx.send(Some(line)).is_err() {
                return;
            }
        }
        let _ = tx.send(None);
    });
    let mut err_pipe = child.stderr.take().expect("stderr");
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err_pipe.read_to_string(&mut s);
        s
    });
    let kill = || {
        let _ = Command::new("kill").args(["-s", "KILL", "--", &format!("-{pgid}")]).status();
    };
    let start = Instant::now();
    let mut stdout = String::new();
    let mut saw = false;
    loop {
        let left = DEADLINE.saturating_sub(start.elapsed());
        match rx.recv_timeout(left) {
            Ok(Some(line)) => {
                stdout.push_str(&line);
                stdout.push('\n');
                if until.is_some_and(|u| line.starts_with(u)) {
                    saw = true;
                    kill();
                    break;
                }
            }
            Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                kill();
                let _ = child.wait();
                panic!(
                    "the real kubeadm ran past {DEADLINE:?} (killed):\n{body}\n--- stdout\n{stdout}--- stderr\n{}",
                    err_reader.join().unwrap_or_default()
                );
            }
        }
    }
    let status = child.wait().expect("wait for kubeadm");
    drop(rx);
    let _ = reader.join();
    let stderr = err_reader.join().unwrap_or_default();
    Run { code: if saw { None } else { status.code() }, saw, stdout, stderr }
}

/// `kubeadm <args>` in the isolated namespaces: for `init`, `--dry-run --ignore-preflight-errors=all`
/// is added (`--skip-phases=preflight` for a line with its own --ignore-preflight-errors) and it
/// runs to the end (exit 0 is acceptance); `join` cannot get past discovery
/// offline, so seeing [`FIRST_WORKFLOW_LINE`] is acceptance, an exit before it a refusal.
/// `files` are written into a scratch directory first, and `{dir}` in the arguments names it.
/// Returns (accepted, kubeadm's reason).
pub fn verdict(args: &[String], files: &[(&str, &str)]) -> (bool, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().display().to_string();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("write an oracle file");
    }
    let mut line = format!("exec {}", quote(&kubeadm()));
    for a in args {
        line.push(' ');
        line.push_str(&quote(&a.replace("{dir}", &d)));
    }
    let init = args.first().map(String::as_str) == Some("init");
    if init {
        // Preflight's errors are this machine's (no container runtime), not the line's. A line
        // with its own --ignore-preflight-errors keeps it (kubeadm refuses `all` beside a check's
        // name) and skips the phase instead.
        let own = args.iter().any(|a| a.starts_with("--ignore-preflight-errors"));
        line.push_str(if own {
            " --dry-run --skip-phases=preflight"
        } else {
            " --dry-run --ignore-preflight-errors=all"
        });
    }
    let run = run_isolated(dir.path(), &line, (!init).then_some(FIRST_WORKFLOW_LINE));
    let accepted = if init { run.code == Some(0) } else { run.saw };
    let why = if accepted { "accepted".to_string() } else { run.why() };
    (accepted, why)
}
