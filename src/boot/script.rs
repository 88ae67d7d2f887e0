//! Runs the cloud-config around kubestrap's own init or join: `bootcmd`, `write_files` (atomic,
//! under the node root, mode and owner as given) and `runcmd` entries, in cloud-init's order.
//! Shell lines go to `/bin/sh -c` through a [`Runner`]; under a node root other than `/` they
//! cannot be confined to it, so they are logged and not run. Each finished step is counted in
//! a progress file, so a retried stage neither runs a command nor appends a file twice.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use log::info;

use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::paths;
use crate::status::Reporter;
use crate::userdata::{Action, Command, WriteFile};

/// Mode of a file a shell redirect creates (0666 under umask 022).
const REDIRECT_MODE: u32 = 0o644;

/// Runs one shell line; the seam tests replace.
pub trait Runner {
    fn run(&self, origin: &str, line: &str) -> Result<()>;
}

/// `/bin/sh -c LINE`, output to the journal and console as the unit's own.
pub(crate) struct Shell {
    pub program: PathBuf,
}

impl Runner for Shell {
    fn run(&self, origin: &str, line: &str) -> Result<()> {
        let status = std::process::Command::new(&self.program)
            .arg("-c")
            .arg(line)
            .stdin(Stdio::null())
            .status()
            .map_err(|e| Error::failed(format!("{origin}: starting {}: {e}", self.program.display())))?;
        if status.success() {
            return Ok(());
        }
        Err(Error::failed(format!("{origin}: `{}` failed ({status})", crate::boot::hide_tokens(line))))
    }
}

/// Under a node root other than `/`: a shell command would act on this machine, not the root.
pub(crate) struct NotUnderRoot {
    pub root: PathBuf,
}

impl Runner for NotUnderRoot {
    fn run(&self, origin: &str, line: &str) -> Result<()> {
        info!(
            "[runcmd] {origin}: not run, the node root is {} (a shell command would act on this machine): {}",
            self.root.display(),
            crate::boot::hide_tokens(line)
        );
        Ok(())
    }
}

/// The runner for a node root: the real shell only for `/`.
pub(crate) fn runner_for(root: &Path) -> Box<dyn Runner> {
    if crate::node::is_live(root) {
        Box::new(Shell { program: PathBuf::from("/bin/sh") })
    } else {
        Box::new(NotUnderRoot { root: root.to_path_buf() })
    }
}

/// Counts a stage's finished steps in its progress file.
pub struct Progress<'a> {
    fs: &'a NodeFs,
    file: paths::File,
    done: usize,
    next: usize,
}

impl<'a> Progress<'a> {
    pub fn new(fs: &'a NodeFs, stage: &str) -> Result<Progress<'a>> {
        let file = paths::boot_script_progress(stage);
        // A torn or foreign count restarts from zero: every step is safe to redo once.
        let done = fs.read(&file)?.map_or(0, |b| String::from_utf8_lossy(&b).trim().parse().unwrap_or(0));
        Ok(Progress { fs, file, done, next: 0 })
    }

    /// Runs `step` unless an earlier attempt finished it, then counts it.
    fn step(&mut self, what: &str, step: impl FnOnce() -> Result<()>) -> Result<()> {
        let index = self.next;
        self.next += 1;
        if index < self.done {
            info!("[runcmd] {what}: done by an earlier attempt");
            return Ok(());
        }
        step()?;
        self.done = index + 1;
        self.fs.write(&self.file, self.done.to_string().as_bytes())?;
        Ok(self.fs.commit()?)
    }
}

/// Runs commands in order; the first failure stops the stage with the command named.
pub fn commands(
    fs: &NodeFs,
    cmds: &[Command],
    runner: &dyn Runner,
    progress: &mut Progress,
    report: &Reporter,
) -> Result<()> {
    for c in cmds {
        let shown = crate::boot::hide_tokens(&c.action.to_string());
        progress.step(&format!("{} `{shown}`", c.origin), || {
            report.phase(c.origin.split('[').next().unwrap_or("runcmd"));
            info!("[runcmd] {}: {shown}", c.origin);
            match &c.action {
                Action::Shell(line) => runner.run(&c.origin, line),
                Action::Echo { path, text, append } => {
                    let mut data = if *append { fs.read(path)?.unwrap_or_default() } else { Vec::new() };
                    data.extend_from_slice(text.as_bytes());
                    fs.write(&paths::File::at(path.clone(), REDIRECT_MODE), &data)?;
                    Ok(fs.commit()?)
                }
                Action::Mkdir(dirs) => {
                    let made = dirs
                        .iter()
                        .try_for_each(|d| fs.mkdir(&paths::Dir { path: d.clone(), mode: paths::DIR_DEFAULT }));
                    Ok(made?)
                }
            }
            .map_err(|e| e.context(format_args!("{} `{shown}`", c.origin)))
        })?;
    }
    Ok(())
}

/// Writes the files (all in one atomic batch, in order, appends onto what is there), then sets
/// their owners when the node root is `/` (elsewhere the names mean nothing).
pub fn write_files(fs: &NodeFs, files: &[WriteFile], progress: &mut Progress, report: &Reporter) -> Result<()> {
    if files.is_empty() {
        return Ok(());
    }
    progress.step("write_files", || {
        report.phase("write_files");
        let mut pending: Vec<(&str, Vec<u8>, u32)> = Vec::new();
        for f in files {
            let base = match pending.iter().rposition(|(p, _, _)| *p == f.path) {
                Some(i) => Some(pending.remove(i).1),
                None if f.append => fs.read(&f.path)?,
                None => None,
            };
            let mut data = if f.append { base.unwrap_or_default() } else { Vec::new() };
            data.extend_from_slice(&f.content);
            pending.push((&f.path, data, f.mode));
        }
        for (path, data, mode) in &pending {
            info!("[write_files] {path} ({mode:04o}, {} bytes)", data.len());
            fs.write(&paths::File::at(path.to_string(), *mode), data)?;
        }
        fs.commit()?;
        if crate::node::is_live(fs.root()) {
            for f in files {
                chown(&f.path, &f.owner)?;
            }
        }
        Ok(())
    })
}

/// `user[:group]` by name (from /etc/passwd and /etc/group) or number.
fn chown(path: &str, owner: &str) -> Result<()> {
    let (user, group) = owner.split_once(':').map_or((owner, None), |(u, g)| (u, Some(g)));
    let uid =
        id_of(user.trim(), "/etc/passwd").map_err(|m| Error::bad_config(format!("write_files {path}: owner {m}")))?;
    let gid = match group {
        Some(g) => Some(
            id_of(g.trim(), "/etc/group").map_err(|m| Error::bad_config(format!("write_files {path}: owner {m}")))?,
        ),
        None => None,
    };
    std::os::unix::fs::chown(path, Some(uid), gid).map_err(|e| Error::failed(format!("chown {owner} {path}: {e}")))
}

/// A number, or the third field of the name's line in a passwd/group file.
fn id_of(name: &str, db: &str) -> std::result::Result<u32, String> {
    if let Ok(n) = name.parse() {
        return Ok(n);
    }
    let text = std::fs::read_to_string(db).map_err(|e| format!("{name:?}: reading {db}: {e}"))?;
    lookup_id(&text, name).ok_or_else(|| format!("{name:?} is not in {db}"))
}

fn lookup_id(db_text: &str, name: &str) -> Option<u32> {
    db_text.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next() == Some(name)).then(|| f.nth(1).and_then(|id| id.parse().ok())).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Records what it is asked to run; fails lines containing "fail".
    #[derive(Default)]
    struct Recorder(RefCell<Vec<String>>);

    impl Runner for Recorder {
        fn run(&self, origin: &str, line: &str) -> Result<()> {
            self.0.borrow_mut().push(line.to_string());
            if line.contains("fail") {
                return Err(Error::failed(format!("{origin}: `{line}` failed (exit status: 1)")));
            }
            Ok(())
        }
    }

    fn cmd(origin: &str, action: Action) -> Command {
        Command { origin: origin.into(), action }
    }

    fn file(path: &str, content: &str, append: bool) -> WriteFile {
        WriteFile { path: path.into(), content: content.into(), mode: 0o600, owner: "nobody:nogroup".into(), append }
    }

    #[test]
    fn script_runs_in_order_and_stops_at_the_first_failure_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let fs = NodeFs::new(d.path());
        let report = Reporter::new(&fs, "pre-kubelet", 1);
        let r = Recorder::default();
        let cmds = [
            cmd("runcmd[0]", Action::Shell("swapoff -a".into())),
            cmd("runcmd[1]", Action::Mkdir(vec!["/run/cluster-api".into()])),
            cmd(
                "runcmd[1]",
                Action::Echo { path: "/run/cluster-api/x".into(), text: "success\n".into(), append: false },
            ),
            cmd("runcmd[2]", Action::Shell("false && fail".into())),
            cmd("runcmd[3]", Action::Shell("never".into())),
        ];
        let mut p = Progress::new(&fs, "pre-kubelet").unwrap();
        let e = commands(&fs, &cmds, &r, &mut p, &report).unwrap_err();
        assert!(e.message.contains("runcmd[2]") && e.message.contains("false && fail"), "{}", e.message);
        assert_eq!(*r.0.borrow(), ["swapoff -a", "false && fail"]);
        assert_eq!(std::fs::read_to_string(d.path().join("run/cluster-api/x")).unwrap(), "success\n");

        // The retry skips what was done: the shell line is not run again.
        let r = Recorder::default();
        let mut p = Progress::new(&fs, "pre-kubelet").unwrap();
        let fixed = [&cmds[..3], &[cmd("runcmd[2]", Action::Shell("true".into())), cmds[4].clone()]].concat();
        commands(&fs, &fixed, &r, &mut p, &report).unwrap();
        assert_eq!(*r.0.borrow(), ["true", "never"]);
    }

    #[test]
    fn write_files_are_atomic_with_modes_and_appends_once() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("etc")).unwrap();
        std::fs::write(d.path().join("etc/motd"), "hello\n").unwrap();
        let fs = NodeFs::new(d.path());
        let report = Reporter::new(&fs, "pre-kubelet", 1);
        let files = [
            file("/etc/kubernetes/pki/ca.key", "KEY", false),
            file("/etc/motd", "more\n", true),
            file("/etc/a", "one\n", false),
            file("/etc/a", "two\n", true),
        ];
        let mut p = Progress::new(&fs, "pre-kubelet").unwrap();
        write_files(&fs, &files, &mut p, &report).unwrap();
        let key = d.path().join("etc/kubernetes/pki/ca.key");
        assert_eq!(std::fs::read_to_string(&key).unwrap(), "KEY");
        assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o7777, 0o600);
        assert_eq!(std::fs::read_to_string(d.path().join("etc/motd")).unwrap(), "hello\nmore\n");
        assert_eq!(std::fs::read_to_string(d.path().join("etc/a")).unwrap(), "one\ntwo\n");
        // A retried stage does not append again.
        let mut p = Progress::new(&fs, "pre-kubelet").unwrap();
        write_files(&fs, &files, &mut p, &report).unwrap();
        assert_eq!(std::fs::read_to_string(d.path().join("etc/motd")).unwrap(), "hello\nmore\n");
    }

    #[test]
    fn owners_resolve_by_name_or_number() {
        let passwd = "root:x:0:0:root:/root:/bin/sh\netcd:x:107:112::/var/lib/etcd:/usr/sbin/nologin\n";
        assert_eq!(lookup_id(passwd, "etcd"), Some(107));
        assert_eq!(lookup_id(passwd, "root"), Some(0));
        assert_eq!(lookup_id(passwd, "nobody"), None);
        assert_eq!(id_of("1000", "/nonexistent"), Ok(1000));
    }

    use std::os::unix::fs::PermissionsExt;
}
