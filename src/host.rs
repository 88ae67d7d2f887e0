//! The only place that asks the running machine about itself (syscalls via nix/rustix).
//! Everything else receives these facts through the `Host` trait or as values, so it tests
//! without a machine: tests use a plain-field fake.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cri::CriError;

/// A question to the machine that failed. Names the port or the program asked.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("port {port} is in use or cannot be bound: {}", .errno.desc())]
    PortUnavailable { port: u16, errno: nix::errno::Errno },
    #[error("port {port} on {address} is in use or cannot be bound: {source}")]
    AddressUnavailable { address: String, port: u16, source: std::io::Error },
    #[error("running {} --version: {source}", .program.display())]
    Exec { program: PathBuf, source: std::io::Error },
    #[error("{} --version exited with {status}", .program.display())]
    Exited { program: PathBuf, status: std::process::ExitStatus },
    #[error("systemctl stop {unit}: {why}")]
    Stop { unit: String, why: String },
}

/// What preflight and config defaults need from the machine. Paths are real paths (the caller
/// joins `--root` where the file is node state).
pub trait Host: Sync {
    fn euid(&self) -> u32;
    fn num_cpus(&self) -> usize;
    /// Total RAM in bytes.
    fn total_memory(&self) -> u64;
    fn kernel_release(&self) -> String;
    fn hostname(&self) -> String;
    fn read_file(&self, path: &Path) -> Option<String>;
    fn exists(&self, path: &Path) -> bool;
    /// Entry names of a directory; `None` if it does not exist or is unreadable.
    fn list_dir(&self, path: &Path) -> Option<Vec<String>>;
    /// Is `path` the mount point of a cgroup v2 filesystem (statfs magic)?
    fn is_cgroup2(&self, path: &Path) -> bool;
    /// Can we listen on TCP `port` (SO_REUSEADDR, as Go's net.Listen), on `address` or, without
    /// one, on all addresses?
    fn can_listen(&self, address: Option<&str>, port: u16) -> Result<(), HostError>;
    /// The first executable `name` on PATH (access X_OK), without running it.
    fn find_in_path(&self, name: &str) -> Option<PathBuf>;
    /// Asks the CRI runtime on a unix socket for its version (gRPC over HTTP/2).
    fn cri_version(&self, socket: &Path, timeout: Duration) -> Result<String, CriError>;
    /// Does the CRI runtime implement RuntimeConfig? `Ok(false)`: it answered Unimplemented.
    fn cri_runtime_config(&self, socket: &Path, timeout: Duration) -> Result<bool, CriError>;
    /// Does the CRI runtime hold `image` (ImageStatus)?
    fn cri_image_present(&self, socket: &Path, image: &str, timeout: Duration) -> Result<bool, CriError>;
    /// Has the CRI runtime pull `image` (PullImage), waiting at most `timeout`.
    fn cri_pull_image(&self, socket: &Path, image: &str, timeout: Duration) -> Result<(), CriError>;
    /// The ids of every pod sandbox the CRI runtime holds (ListPodSandbox).
    fn cri_pod_sandboxes(&self, socket: &Path, timeout: Duration) -> Result<Vec<String>, CriError>;
    /// Stops and removes one pod sandbox and its containers (StopPodSandbox, RemovePodSandbox).
    fn cri_remove_pod_sandbox(&self, socket: &Path, id: &str, timeout: Duration) -> Result<(), CriError>;
    /// `systemctl stop <unit>` (reset stops the kubelet).
    fn stop_service(&self, unit: &str) -> Result<(), HostError>;
    /// `kubelet --version` output (the one child process preflight may start).
    fn kubelet_version(&self, kubelet: &Path) -> Result<String, HostError>;
    /// Does `name` resolve (files, then DNS)? `None`: no answer within `within`.
    fn resolves(&self, name: &str, within: Duration) -> Option<bool>;
    fn env(&self, name: &str) -> Option<String>;
    /// Is a process with this command name running (from /proc/*/comm)?
    fn process_running(&self, comm: &str) -> bool;
    /// Bytes available to unprivileged users on the filesystem holding `path`.
    fn free_space(&self, path: &Path) -> Option<u64>;
    /// Has the kernel's random pool been initialised (getrandom with GRND_NONBLOCK)?
    fn entropy_ready(&self) -> bool;
    fn now(&self) -> time::OffsetDateTime;
    /// When the running kubestrap binary was built into the image (its file mtime).
    fn own_mtime(&self) -> Option<time::OffsetDateTime>;
}

/// The real machine.
pub struct LinuxHost;

impl LinuxHost {
    /// Starts the kubelet's `--version` (for preflight's KubeletVersion) on a thread of its own:
    /// under emulation the binary's start costs seconds, which then overlap the image import.
    pub(crate) fn warm_kubelet_version() {
        let _ = std::thread::Builder::new().name("kubelet-version".into()).spawn(|| {
            if let Some(k) = LinuxHost.find_in_path("kubelet") {
                let _ = LinuxHost.kubelet_version(&k);
            }
        });
    }

    fn run_kubelet_version(kubelet: &Path) -> Result<String, HostError> {
        let out = std::process::Command::new(kubelet)
            .arg("--version")
            .output()
            .map_err(|source| HostError::Exec { program: kubelet.to_path_buf(), source })?;
        if !out.status.success() {
            return Err(HostError::Exited { program: kubelet.to_path_buf(), status: out.status });
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

impl Host for LinuxHost {
    fn euid(&self) -> u32 {
        rustix::process::geteuid().as_raw()
    }

    fn num_cpus(&self) -> usize {
        // The CPUs we may run on, as Go's runtime.NumCPU counts them.
        nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
            .map(|set| (0..nix::sched::CpuSet::count()).filter(|i| set.is_set(*i).unwrap_or(false)).count())
            .unwrap_or(1)
    }

    fn total_memory(&self) -> u64 {
        nix::sys::sysinfo::sysinfo().map(|s| s.ram_total()).unwrap_or(0)
    }

    fn kernel_release(&self) -> String {
        rustix::system::uname().release().to_string_lossy().into_owned()
    }

    fn hostname(&self) -> String {
        hostname()
    }

    fn read_file(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }

    fn exists(&self, path: &Path) -> bool {
        std::fs::symlink_metadata(path).is_ok()
    }

    fn list_dir(&self, path: &Path) -> Option<Vec<String>> {
        let rd = std::fs::read_dir(path).ok()?;
        Some(rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
    }

    fn is_cgroup2(&self, path: &Path) -> bool {
        nix::sys::statfs::statfs(path)
            .map(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC)
            .unwrap_or(false)
    }

    fn can_listen(&self, address: Option<&str>, port: u16) -> Result<(), HostError> {
        if let Some(address) = address {
            // std sets SO_REUSEADDR on Unix, as Go does; a name resolves as net.Listen would.
            return std::net::TcpListener::bind((address, port))
                .map(drop)
                .map_err(|source| HostError::AddressUnavailable { address: address.to_string(), port, source });
        }
        use nix::sys::socket::{
            AddressFamily, SockFlag, SockType, SockaddrIn6, bind, listen, setsockopt, socket, sockopt,
        };
        // Go listens on ":port" as a dual-stack IPv6 socket; fall back to IPv4 without IPv6.
        let try_family = |v6: bool| -> nix::Result<()> {
            let fam = if v6 { AddressFamily::Inet6 } else { AddressFamily::Inet };
            let fd = socket(fam, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)?;
            setsockopt(&fd, sockopt::ReuseAddr, &true)?;
            if v6 {
                setsockopt(&fd, sockopt::Ipv6V6Only, &false)?;
                bind(
                    fd.as_raw_fd_compat(),
                    &SockaddrIn6::from(std::net::SocketAddrV6::new(std::net::Ipv6Addr::UNSPECIFIED, port, 0, 0)),
                )?;
            } else {
                bind(fd.as_raw_fd_compat(), &nix::sys::socket::SockaddrIn::new(0, 0, 0, 0, port))?;
            }
            listen(&fd, nix::sys::socket::Backlog::new(1).unwrap_or(nix::sys::socket::Backlog::MAXCONN))
        };
        match try_family(true) {
            Err(nix::errno::Errno::EAFNOSUPPORT) => try_family(false),
            r => r,
        }
        .map_err(|errno| HostError::PortUnavailable { port, errno })
    }

    fn find_in_path(&self, name: &str) -> Option<PathBuf> {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path).map(|d| d.join(name)).find(|p| is_executable(p))
    }

    fn cri_version(&self, socket: &Path, timeout: Duration) -> Result<String, CriError> {
        crate::cri::version_over_unix_socket(socket, timeout)
    }

    fn cri_runtime_config(&self, socket: &Path, timeout: Duration) -> Result<bool, CriError> {
        crate::cri::runtime_config_over_unix_socket(socket, timeout)
    }

    fn cri_image_present(&self, socket: &Path, image: &str, timeout: Duration) -> Result<bool, CriError> {
        crate::cri::image_present_over_unix_socket(socket, image, timeout)
    }

    fn cri_pull_image(&self, socket: &Path, image: &str, timeout: Duration) -> Result<(), CriError> {
        crate::cri::pull_image_over_unix_socket(socket, image, timeout)
    }

    fn cri_pod_sandboxes(&self, socket: &Path, timeout: Duration) -> Result<Vec<String>, CriError> {
        crate::cri::pod_sandboxes(socket, timeout)
    }

    fn cri_remove_pod_sandbox(&self, socket: &Path, id: &str, timeout: Duration) -> Result<(), CriError> {
        crate::cri::remove_pod_sandbox(socket, id, timeout)
    }

    fn stop_service(&self, unit: &str) -> Result<(), HostError> {
        let stop = |why: String| HostError::Stop { unit: unit.to_string(), why };
        if !Path::new("/run/systemd/system").exists() {
            return Err(stop("systemd is not running here".into()));
        }
        match std::process::Command::new("systemctl").args(["stop", unit]).status() {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(stop(format!("exited with {s}"))),
            Err(e) => Err(stop(e.to_string())),
        }
    }

    fn kubelet_version(&self, kubelet: &Path) -> Result<String, HostError> {
        // A join asks twice (preflight, then against the cluster's version once discovery has
        // read it); under emulation each start of the kubelet's binary costs most of a second.
        // Held while the kubelet runs: a second asker (preflight, after warm_kubelet_version's
        // thread) waits for that answer rather than starting the binary again.
        type Seen = Vec<(PathBuf, Option<std::time::SystemTime>, String)>;
        static SEEN: std::sync::Mutex<Seen> = std::sync::Mutex::new(Vec::new());
        let mut seen = SEEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let stamp = std::fs::metadata(kubelet).and_then(|m| m.modified()).ok();
        if let Some(e) = seen.iter().find(|(p, t, _)| p == kubelet && *t == stamp && t.is_some()) {
            return Ok(e.2.clone());
        }
        let v = Self::run_kubelet_version(kubelet)?;
        seen.push((kubelet.to_path_buf(), stamp, v.clone()));
        Ok(v)
    }

    fn resolves(&self, name: &str, within: Duration) -> Option<bool> {
        use std::net::ToSocketAddrs;
        // getaddrinfo cannot be cancelled: the lookup runs on a thread of its own, left to finish
        // (or not) by itself, so that an unreachable nameserver (glibc retries for 10 s) does
        // not hold a first boot for a check that only warns.
        let lookup = |n: &str| (n, 0).to_socket_addrs().map(|mut a| a.next().is_some()).unwrap_or(false);
        let (tx, rx) = std::sync::mpsc::channel();
        let owned = name.to_string();
        let spawned = std::thread::Builder::new().name("hostname-lookup".into()).spawn(move || {
            let _ = tx.send(lookup(&owned));
        });
        match spawned {
            Ok(_) => rx.recv_timeout(within).ok(),
            Err(_) => Some(lookup(name)),
        }
    }

    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn process_running(&self, comm: &str) -> bool {
        let Ok(rd) = std::fs::read_dir("/proc") else { return false };
        rd.flatten()
            .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
            .any(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == comm))
    }

    fn free_space(&self, path: &Path) -> Option<u64> {
        let s = rustix::fs::statvfs(path).ok()?;
        Some(s.f_bavail.saturating_mul(s.f_frsize))
    }

    fn entropy_ready(&self) -> bool {
        let mut b = [0u8; 16];
        rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::NONBLOCK).is_ok()
    }

    fn now(&self) -> time::OffsetDateTime {
        time::OffsetDateTime::now_utc()
    }

    fn own_mtime(&self) -> Option<time::OffsetDateTime> {
        let exe = std::fs::read_link("/proc/self/exe").ok()?;
        std::fs::metadata(exe).ok()?.modified().ok().map(time::OffsetDateTime::from)
    }
}

/// nix 0.31 takes raw fds for bind; keep the conversion in one place.
trait AsRawFdCompat {
    fn as_raw_fd_compat(&self) -> std::os::fd::RawFd;
}

impl AsRawFdCompat for std::os::fd::OwnedFd {
    fn as_raw_fd_compat(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.as_raw_fd()
    }
}

/// The node's own hostname (uname nodename), lowercased as Kubernetes wants it.
/// A regular file this process may execute.
pub fn is_executable(p: &Path) -> bool {
    p.is_file() && rustix::fs::access(p, rustix::fs::Access::EXEC_OK).is_ok()
}

pub fn hostname() -> String {
    rustix::system::uname().nodename().to_string_lossy().to_lowercase()
}

/// The name of the interface that carries the IPv4 default route, from /proc/net/route.
fn default_route_interface() -> Option<String> {
    let table = std::fs::read_to_string("/proc/net/route").ok()?;
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 2 && f[1] == "00000000").then(|| f[0].to_string())
    })
}

/// The first global IPv4 address of the default-route interface, as kubeadm picks the
/// advertise address.
pub fn default_address() -> Option<IpAddr> {
    let iface = default_route_interface()?;
    let addrs = nix::ifaddrs::getifaddrs().ok()?;
    for a in addrs {
        if a.interface_name != iface {
            continue;
        }
        if let Some(sin) = a.address.as_ref().and_then(|s| s.as_sockaddr_in()) {
            let ip = IpAddr::V4(sin.ip());
            if !ip.is_loopback() {
                return Some(ip);
            }
        }
    }
    None
}

/// What the config needs to know about the machine it runs on: config takes it as a value.
#[derive(Debug, Clone, Default)]
pub struct HostFacts {
    pub hostname: String,
    /// The address of the interface that holds the default route, when there is one.
    pub default_address: Option<std::net::IpAddr>,
}

pub fn facts() -> HostFacts {
    HostFacts { hostname: hostname(), default_address: default_address() }
}

/// Environment variables named `*_proxy` (any case), sorted, for the static Pods.
pub(crate) fn proxy_env() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::env::vars().filter(|(k, _)| k.to_lowercase().ends_with("_proxy")).collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelet_is_asked_once_per_binary() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (bin, runs) = (dir.path().join("kubelet"), dir.path().join("runs"));
        let script = |v: &str| format!("#!/bin/sh\necho x >> {}\necho 'Kubernetes {v}'\n", runs.display());
        let install = |v: &str| {
            let next = dir.path().join("kubelet.next");
            std::fs::write(&next, script(v)).unwrap();
            std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::rename(&next, &bin).unwrap();
        };
        install("v1.37.2");
        assert_eq!(LinuxHost.kubelet_version(&bin).unwrap(), "Kubernetes v1.37.2");
        assert_eq!(LinuxHost.kubelet_version(&bin).unwrap(), "Kubernetes v1.37.2");
        assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 1);
        // Another binary at the same path (a newer mtime) is asked again.
        std::thread::sleep(Duration::from_millis(20));
        install("v1.38.0");
        assert_eq!(LinuxHost.kubelet_version(&bin).unwrap(), "Kubernetes v1.38.0");
        assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 2);
    }

    #[test]
    fn errors_name_the_port_and_program() {
        let e = HostError::PortUnavailable { port: 6443, errno: nix::errno::Errno::EADDRINUSE };
        assert_eq!(e.to_string(), "port 6443 is in use or cannot be bound: Address already in use");
        let missing = Path::new("/nonexistent/kubelet");
        let e = LinuxHost.kubelet_version(missing).unwrap_err();
        assert!(e.to_string().starts_with("running /nonexistent/kubelet --version: "), "{e}");
        let e = LinuxHost.kubelet_version(Path::new("/bin/false")).unwrap_err();
        assert!(e.to_string().starts_with("/bin/false --version exited with "), "{e}");
    }
}
