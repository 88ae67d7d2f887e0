//! Real processes for the tests: started in a private mount namespace with the node root's
//! directories bound over the host paths kubestrap's files name, logged to a file, and killed
//! with their whole process group when the test ends.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::net::Netns;

/// Binds each `(source, target)`, then execs the rest of the arguments.
pub const BIND_THEN_EXEC: &str = r#"set -e
while [ "$1" != -- ]; do mkdir -p "$2"; mount --bind "$1" "$2"; shift 2; done
shift; exec "$@""#;

pub struct Proc {
    pub log: PathBuf,
    child: Child,
    reaped: bool,
}

impl Proc {
    /// Starts `argv` in a new mount namespace with `binds` in place; stdout and stderr go to
    /// `log`.
    pub fn start(
        netns: &Netns,
        name: &str,
        binds: &[(PathBuf, PathBuf)],
        argv: &[String],
        env: &[(&str, String)],
        log: &Path,
    ) -> Proc {
        let out = File::create(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        let mut cmd = netns.command("unshare");
        cmd.args(["--mount", "--propagation", "private", "sh", "-c", BIND_THEN_EXEC, "sh"]);
        for (src, dst) in binds {
            std::fs::create_dir_all(src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
            cmd.arg(src).arg(dst);
        }
        cmd.arg("--").args(argv);
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        cmd.stdin(Stdio::null()).stdout(out.try_clone().expect("dup log")).stderr(out);
        cmd.process_group(0);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("start {name}: {e}"));
        Proc { log: log.to_path_buf(), child, reaped: false }
    }

    /// Has it exited? Then its status.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Kills the whole process group, once (a second call finds it gone and says nothing).
    pub fn kill(&mut self) {
        if self.reaped {
            return;
        }
        let _ = Command::new("kill")
            .args(["-s", "KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
        self.reaped = true;
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The first klog error lines (`E…`/`F…`), then the last `lines` lines.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    let errors: Vec<&str> = all.iter().copied().filter(|l| l.starts_with('E') || l.starts_with('F')).take(10).collect();
    format!(
        "{} (log: {})\nerrors:\n{}\nlast lines:\n{}",
        path.display(),
        path.display(),
        errors.join("\n"),
        all[all.len().saturating_sub(lines)..].join("\n")
    )
}

/// Polls `check` every 200 ms until it returns Some or `timeout` passes; `health` is asked on
/// every round and fails the wait at once with its message (a component that died).
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    health: &dyn Fn() -> Result<(), String>,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        if let Err(e) = health() {
            panic!("while waiting for {what}: {e}");
        }
        if Instant::now() > deadline {
            let state = health().err().unwrap_or_default();
            panic!("timed out after {timeout:?} waiting for {what}\n{state}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
