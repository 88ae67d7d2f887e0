//! Real processes for the tests: started in a private mount namespace with the node root's
//! directories bound over the host paths kubestrap's files name, logged to a file, and killed
//! with their whole process group when the test ends.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Binds each `(source, target)`, then execs the rest of the arguments.
const BIND_THEN_EXEC: &str = r#"set -e
while [ "$1" != -- ]; do mkdir -p "$2"; mount --bind "$1" "$2"; shift 2; done
shift; exec "$@""#;

/// A network namespace of the test's own, with only its loopback interface, which also holds
/// the test nodes' addresses (from 192.0.2.0/24, TEST-NET-1): the API server refuses an
/// advertise address in 127.0.0.0/8, and nothing sent here can leave the namespace.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(addrs: &[&str]) -> Netns {
        let name = format!("ks-real-{}", std::process::id());
        let n = Netns { name };
        let mut script = format!("ip netns add {0} && ip -n {0} link set lo up", n.name);
        for a in addrs {
            script += &format!(" && ip -n {} addr add {a}/32 dev lo", n.name);
        }
        let (code, out, err) = crate::common::sh(&script);
        assert_eq!(code, 0, "network namespace: {out}{err}");
        n
    }

    /// A command run inside the namespace (nsenter, not `ip netns exec`, which remounts /sys
    /// and so hides the cgroup mounts the kubelet needs).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", self.name)).arg("--").arg(program);
        for v in crate::common::PROXY_VARS {
            cmd.env_remove(v);
        }
        cmd
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "delete", &self.name]).status();
    }
}

pub struct Proc {
    pub name: String,
    pub log: PathBuf,
    child: Child,
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
        Proc { name: name.to_string(), log: log.to_path_buf(), child }
    }

    /// The last lines of the log, for failure messages.
    pub fn tail(&self) -> String {
        tail(&self.log, 40)
    }

    /// Fails the test with the log when the process has exited.
    pub fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("{} exited ({status}):\n{}", self.name, self.tail());
        }
    }

    /// Kills the whole process group (containerd's shims and the like go with it).
    pub fn kill(&mut self) {
        let _ = Command::new("kill").args(["-s", "KILL", "--", &format!("-{}", self.child.id())]).status();
        let _ = self.child.wait();
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

/// Polls `check` every 200 ms until it returns Some or `timeout` passes; `what` names it in the
/// panic, `procs` are checked for early exits on every round.
pub fn wait_for<T>(what: &str, timeout: Duration, procs: &mut [&mut Proc], mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        for p in procs.iter_mut() {
            p.assert_running();
        }
        if Instant::now() > deadline {
            let logs: Vec<String> = procs.iter().map(|p| format!("--- {}:\n{}", p.name, p.tail())).collect();
            panic!("timed out after {timeout:?} waiting for {what}\n{}", logs.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
