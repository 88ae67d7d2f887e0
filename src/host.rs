//! The only place that asks the running machine about itself (syscalls via nix/rustix).
//! Everything else receives these facts as values, so it tests without a machine.

use std::net::IpAddr;

use crate::config::HostFacts;

/// The node's own hostname (uname nodename), lowercased as Kubernetes wants it.
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

pub fn facts() -> HostFacts {
    HostFacts { hostname: hostname(), default_address: default_address() }
}

/// Environment variables named `*_proxy` (any case), sorted, for the static Pods.
pub fn proxy_env() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::env::vars().filter(|(k, _)| k.to_lowercase().ends_with("_proxy")).collect();
    v.sort();
    v
}
