//! The test's own network: a "LAN" namespace holding a bridge, and one namespace per node joined
//! to it by a veth pair, so each node has its own 127.0.0.1 and kubeadm's fixed ports (etcd
//! 2379/2381, controller-manager 10257, scheduler 10259, kubelet 10250/10248), as on real
//! machines. Node addresses come from 192.0.2.0/24 (TEST-NET-1); the API server refuses an
//! advertise address in 127.0.0.0/8, and nothing sent here can leave these namespaces.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::common::sh;

/// Names are per process and per LAN, so a leftover namespace never collides.
static LANS: AtomicU32 = AtomicU32::new(0);

pub struct Lan {
    pub name: String,
    prefix: String,
    /// A symlink per node to its containerd's state directory, so every node's CRI socket is
    /// `unix://<cri_dir>/<node>/containerd.sock`: one string for all nodes' user-data.
    pub cri_dir: PathBuf,
}

impl Lan {
    pub fn new() -> Lan {
        let prefix = format!("ks{}-{}", std::process::id(), LANS.fetch_add(1, Ordering::SeqCst));
        let name = format!("{prefix}-lan");
        let (code, out, err) = sh(&format!(
            "ip netns add {name} && ip -n {name} link add br0 type bridge && ip -n {name} link set br0 up"
        ));
        assert_eq!(code, 0, "LAN namespace: {out}{err}");
        let cri_dir = std::env::temp_dir().join(format!("{prefix}-cri"));
        std::fs::create_dir_all(&cri_dir).expect("cri dir");
        Lan { name, prefix, cri_dir }
    }

    /// The CRI socket of node `name` whose root is `root` (its containerd keeps its state beside
    /// the root).
    pub fn cri_socket(&self, name: &str, root: &Path) -> String {
        let link = self.cri_dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(root.with_file_name(format!("{name}-containerd")), &link).expect("cri link");
        format!("unix://{}/containerd.sock", link.display())
    }

    /// A node's namespace on the LAN with `addr`/24 on its eth0, which also carries the default
    /// route (as on a machine: kubeadm and kubestrap take the advertise address from it).
    pub fn host(&self, node: &str, addr: &str) -> Netns {
        let name = format!("{}-{node}", self.prefix);
        let port = format!("v-{node}");
        let lan = &self.name;
        let (code, out, err) = sh(&format!(
            "ip netns add {name} && ip -n {name} link set lo up && \
             ip link add eth0 netns {name} type veth peer name {port} netns {lan} && \
             ip -n {name} addr add {addr}/24 dev eth0 && ip -n {name} link set eth0 up && \
             ip -n {name} route add default dev eth0 && \
             ip -n {lan} link set {port} master br0 && ip -n {lan} link set {port} up"
        ));
        assert_eq!(code, 0, "node namespace {name}: {out}{err}");
        Netns { name }
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.cri_dir);
        let _ = Command::new("ip").args(["netns", "delete", &self.name]).status();
    }
}

pub struct Netns {
    pub name: String,
}

impl Netns {
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
