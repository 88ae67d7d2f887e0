//! Would an HTTPS request to a host go through a proxy? Go's ProxyFromEnvironment rules:
//! HTTPS_PROXY (or https_proxy) set, and the host not matched by NO_PROXY (or no_proxy), whose
//! entries are `*`, IPs, CIDRs, domain suffixes (`.example.com` or `example.com`), with
//! optional ports.

use std::net::IpAddr;

use crate::config::values::Cidr;
use crate::host::Host;

fn var(host: &dyn Host, upper: &str) -> Option<String> {
    host.env(upper).or_else(|| host.env(&upper.to_lowercase())).filter(|v| !v.is_empty())
}

/// The proxy an HTTPS request to `target` would use, if any.
pub(crate) fn proxy_for(host: &dyn Host, target: &str) -> Option<String> {
    let proxy = var(host, "HTTPS_PROXY")?;
    let no_proxy = var(host, "NO_PROXY").unwrap_or_default();
    let target_ip: Option<IpAddr> = target.parse().ok();
    let excluded = no_proxy.split(',').map(str::trim).filter(|e| !e.is_empty()).any(|entry| {
        if entry == "*" {
            return true;
        }
        if let (Some(ip), Ok(c)) = (target_ip, Cidr::parse(entry)) {
            return contains(&c, ip);
        }
        // Drop a port (`host:443`) unless the entry is a bare IPv6 address.
        let e = if entry.parse::<IpAddr>().is_ok() { entry } else { entry.rsplit_once(':').map_or(entry, |(h, _)| h) };
        if let (Some(ip), Ok(eip)) = (target_ip, e.trim_matches(['[', ']']).parse::<IpAddr>()) {
            return ip == eip;
        }
        let suffix = e.trim_start_matches('*').trim_start_matches('.');
        target == suffix || target.ends_with(&format!(".{suffix}"))
    });
    (!excluded).then_some(proxy)
}

fn contains(c: &Cidr, ip: IpAddr) -> bool {
    c.addr.is_ipv4() == ip.is_ipv4() && Cidr { addr: ip, prefix: c.prefix }.nth(0) == Some(c.addr)
}
