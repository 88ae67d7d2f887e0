//! The field checks the sections share: addresses, ports, paths, args, SANs, subnets, etcd.

use std::net::IpAddr;

use super::{Ctx, Endpoint};
use crate::config::ConfigError;
use crate::config::types::{Arg, ControlPlaneComponent, ExternalEtcd};
use crate::config::values::{Cidr, Version, is_dns_san, is_dns1123_subdomain};
use crate::constants::DEFAULT_KUBERNETES_VERSION;

/// kubeadm's MinimumAddressesInPodSubnet.
const MIN_POD_ADDRESSES: u128 = 14;
/// kubeadm's PodSubnetNodeMaskMaxDiff.
const MAX_POD_NODE_MASK_DIFF: u8 = 16;

pub(super) fn parse_ip(c: &Ctx, path: &str, s: &str) -> Result<IpAddr, ConfigError> {
    s.parse().map_err(|_| c.err(path, format!("{s:?} is not an IP address")))
}

pub(super) fn port(c: &Ctx, path: &str, p: i64) -> Result<u16, ConfigError> {
    u16::try_from(p).ok().filter(|p| *p != 0).ok_or_else(|| c.err(path, format!("{p} is not a port (1-65535)")))
}

pub(super) fn absolute(c: &Ctx, path: &str, v: &str) -> Result<(), ConfigError> {
    if v.starts_with('/') { Ok(()) } else { Err(c.err(path, format!("{v:?} must be an absolute path"))) }
}

pub(super) fn parse_endpoint(c: &Ctx, s: &str, default_port: u16) -> Result<Endpoint, ConfigError> {
    let path = "controlPlaneEndpoint";
    let bad =
        |why: &str| c.err(path, format!("{s:?} {why} (expected HOST or HOST:PORT, IPv6 in brackets with a port)"));
    let (host, port_str) = if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or_else(|| bad("has an unclosed ["))?;
        (h.to_string(), after.strip_prefix(':').map(str::to_string))
    } else if s.parse::<std::net::Ipv6Addr>().is_ok() {
        (s.to_string(), None)
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p.to_string())),
            None => (s.to_string(), None),
        }
    };
    let port_num = match port_str {
        Some(p) => p.parse::<i64>().map_err(|_| bad("has a bad port")).and_then(|p| port(c, path, p))?,
        None => default_port,
    };
    if host.parse::<IpAddr>().is_err() && !is_dns1123_subdomain(&host) {
        return Err(bad("has a host that is neither an IP address nor a DNS name"));
    }
    Ok(Endpoint { host, port: port_num })
}

/// kubeadm's ValidateExtraArgs refuses only a missing name; a name with dashes or `=` is
/// passed on as kubeadm passes it (`----v=4`), with a warning.
pub(super) fn check_args(c: &Ctx, path: &str, args: &[Arg], warnings: &mut Vec<String>) -> Result<(), ConfigError> {
    for (i, a) in args.iter().enumerate() {
        if a.name.is_empty() {
            return Err(c.err(&format!("{path}[{i}].name"), "argument has no name".into()));
        }
        if a.name.starts_with('-') || a.name.contains('=') {
            warnings.push(format!(
                "{}: {}: {path}[{i}].name: {:?} is written as --{}=...; give the flag name without dashes or '='",
                c.source, c.doc, a.name, a.name
            ));
        }
    }
    Ok(())
}

/// kubeadm checks only the extra args; volumes and env vars it does not check are warnings here,
/// naming what the kubelet will refuse.
pub(super) fn check_component(
    c: &Ctx,
    path: &str,
    comp: &ControlPlaneComponent,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    check_args(c, &format!("{path}.extraArgs"), &comp.extra_args, warnings)?;
    const PATH_TYPES: [&str; 8] =
        ["", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice"];
    let mut warn = |field: String, why: String| warnings.push(format!("{}: {}: {field}: {why}", c.source, c.doc));
    for (i, v) in comp.extra_volumes.iter().enumerate() {
        let p = format!("{path}.extraVolumes[{i}]");
        if !is_dns1123_subdomain(&v.name) || v.name.contains('.') {
            warn(format!("{p}.name"), format!("{:?} is not a DNS label; the kubelet will refuse the Pod", v.name));
        }
        for (f, val) in [("hostPath", &v.host_path), ("mountPath", &v.mount_path)] {
            if !val.starts_with('/') {
                warn(format!("{p}.{f}"), format!("{val:?} is not an absolute path; the kubelet will refuse the Pod"));
            }
        }
        if !PATH_TYPES.contains(&v.path_type.as_str()) {
            warn(format!("{p}.pathType"), format!("{:?} is not a hostPath type", v.path_type));
        }
    }
    for (i, e) in comp.extra_envs.iter().enumerate() {
        if e.name.is_empty() {
            warn(format!("{path}.extraEnvs[{i}].name"), "is empty; the kubelet will refuse the Pod".into());
        }
    }
    Ok(())
}

/// kubeadm's ValidateCertSANs: each SAN is an IP, a DNS name or a wildcard DNS name.
pub(super) fn check_sans(c: &Ctx, path: &str, sans: &[String]) -> Result<(), ConfigError> {
    for (i, s) in sans.iter().enumerate() {
        if s.parse::<IpAddr>().is_err() && !is_dns_san(s) {
            return Err(c.err(
                &format!("{path}[{i}]"),
                format!("{s:?} is not a valid IP address, DNS name or wildcard DNS name (*.example.com)"),
            ));
        }
    }
    Ok(())
}

/// kubeadm's ValidateIPNetFromString (at least 14 addresses) and ValidatePodSubnetNodeMask: each
/// node's range (`node-cidr-mask-size-ipv4/6`, default /24 and /64) must fit in the pod subnet,
/// at most 16 bits smaller, unless the controller-manager does not allocate node CIDRs.
pub(super) fn check_pod_subnets(c: &Ctx, subnets: &[Cidr], cm_args: &[Arg]) -> Result<(), ConfigError> {
    let path = "networking.podSubnet";
    let arg = |name: &str| cm_args.iter().rev().find(|a| a.name == name).map(|a| a.value.as_str());
    for p in subnets {
        let bits = p.host_bits();
        if bits < 128 && (1u128 << bits) < MIN_POD_ADDRESSES {
            return Err(c.err(
                path,
                format!(
                    "{p}: subnet with {} address(es) is too small, the minimum is {MIN_POD_ADDRESSES}",
                    1u128 << bits
                ),
            ));
        }
        if arg("allocate-node-cidrs") == Some("false") {
            continue;
        }
        let (flag, default) =
            if p.addr.is_ipv4() { ("node-cidr-mask-size-ipv4", 24) } else { ("node-cidr-mask-size-ipv6", 64) };
        let node_mask: u8 = match arg(flag) {
            Some(v) => v.parse().map_err(|_| {
                c.err(
                    path,
                    format!(
                        "could not parse the value of the kube-controller-manager flag {flag} ({v:?}) as an integer"
                    ),
                )
            })?,
            None => default,
        };
        if p.prefix > node_mask {
            return Err(c.err(
                path,
                format!("{p}: the size of pod subnet with mask {} is smaller than the size of node subnet with mask {node_mask}", p.prefix),
            ));
        }
        if node_mask - p.prefix > MAX_POD_NODE_MASK_DIFF {
            return Err(c.err(
                path,
                format!(
                    "{p}: pod subnet mask ({}) and node-mask ({node_mask}) difference is greater than {MAX_POD_NODE_MASK_DIFF}",
                    p.prefix
                ),
            ));
        }
    }
    Ok(())
}

/// kubeadm's ValidateEtcd for an external cluster: cert and key come together and need the CA;
/// with any of them the endpoints must be https.
pub(super) fn check_external_etcd(c: &Ctx, ext: &ExternalEtcd, warnings: &mut Vec<String>) -> Result<(), ConfigError> {
    let (ca, cert, key) = (&ext.ca_file, &ext.cert_file, &ext.key_file);
    if cert.is_empty() != key.is_empty() {
        return Err(c.err("etcd.external", "either both or none of certFile and keyFile must be set".into()));
    }
    if !cert.is_empty() && ca.is_empty() {
        return Err(c.err("etcd.external", "setting certFile and keyFile requires caFile".into()));
    }
    let tls = !(ca.is_empty() && cert.is_empty() && key.is_empty());
    if ext.endpoints.is_empty() {
        warnings.push(format!(
            "{}: {}: etcd.external.endpoints: is empty; the API server has no etcd to talk to",
            c.source, c.doc
        ));
    }
    for (i, e) in ext.endpoints.iter().enumerate() {
        let p = format!("etcd.external.endpoints[{i}]");
        let Some((scheme, _)) = e.split_once("://") else {
            return Err(c.err(&p, format!("{e:?}: the URL without scheme is not allowed")));
        };
        if tls && scheme != "https" {
            return Err(c.err(&p, format!("{e:?}: the URL must be using the HTTPS scheme (TLS files are set)")));
        }
    }
    for (f, v) in [("caFile", ca), ("certFile", cert), ("keyFile", key)] {
        if !v.is_empty() {
            absolute(c, &format!("etcd.external.{f}"), v)?;
        }
    }
    Ok(())
}

/// kubeadm's release labels (`stable`, `stable-1`, `latest-1.36`, optionally `release/`, `ci/` or
/// `ci-cross/` in front) resolve over the internet; offline kubeadm falls back to its own version,
/// and so does kubestrap, always. A bucket prefix before an exact version is dropped. `None`:
/// not a label, parse it as a version.
pub(super) fn offline_version(v: &str) -> Option<String> {
    let label = ["release/", "ci/", "ci-cross/"].iter().find_map(|p| v.strip_prefix(p)).unwrap_or(v);
    if Version::parse(label).is_ok() {
        return (label != v).then(|| label.to_string());
    }
    let rest = label.strip_prefix("stable").or_else(|| label.strip_prefix("latest"))?;
    let ok = match rest.strip_prefix('-') {
        None => rest.is_empty(),
        Some(tail) => {
            let (major, minor) = tail.split_once('.').unwrap_or((tail, ""));
            let digit_1_9 = |s: &str| s.len() == 1 && s.bytes().all(|b| (b'1'..=b'9').contains(&b));
            digit_1_9(major)
                && (minor.is_empty() && !tail.contains('.')
                    || (1..=2).contains(&minor.len())
                        && minor.bytes().all(|b| b.is_ascii_digit())
                        && !minor.starts_with('0'))
        }
    };
    ok.then(|| DEFAULT_KUBERNETES_VERSION.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_labels_fall_back_offline() {
        for l in ["stable", "stable-1", "latest", "latest-1.36", "stable-1.9", "ci/latest", "release/stable-1"] {
            assert_eq!(offline_version(l).as_deref(), Some(DEFAULT_KUBERNETES_VERSION), "{l}");
        }
        assert_eq!(offline_version("ci/v1.36.1").as_deref(), Some("v1.36.1"));
        for not_label in ["v1.36.0", "1.36.0", "stable-0", "stable-1.x", "stablest", "latest-1.036", "beta"] {
            assert_eq!(offline_version(not_label), None, "{not_label}");
        }
    }
}
