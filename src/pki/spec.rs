//! The certificates a control-plane node needs, as data (kubeadm's certlist).

use std::net::IpAddr;

use crate::config::InitConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    Ca,
    Server,
    Client,
    ServerAndClient,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cn {
    Fixed(&'static str),
    NodeName,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sans {
    None,
    /// A CA names itself.
    OwnName,
    ApiServer,
    EtcdServer,
    EtcdPeer,
}

#[derive(Debug, Clone, Copy)]
pub struct CertSpec {
    /// File base name under certificatesDir: `etcd/server` → etcd/server.crt + .key.
    pub name: &'static str,
    /// The CA that signs it; `None` for a self-signed CA.
    pub ca: Option<&'static str>,
    pub cn: Cn,
    pub orgs: &'static [&'static str],
    pub usage: Usage,
    pub sans: Sans,
    /// Only made with local (stacked) etcd.
    pub local_etcd_only: bool,
}

const fn cert(
    name: &'static str,
    ca: Option<&'static str>,
    cn: Cn,
    orgs: &'static [&'static str],
    usage: Usage,
    sans: Sans,
    local_etcd_only: bool,
) -> CertSpec {
    CertSpec { name, ca, cn, orgs, usage, sans, local_etcd_only }
}

/// In dependency order: every CA before the leaves it signs.
pub(crate) const CERTS: &[CertSpec] = &[
    cert("ca", None, Cn::Fixed("kubernetes"), &[], Usage::Ca, Sans::OwnName, false),
    cert("apiserver", Some("ca"), Cn::Fixed("kube-apiserver"), &[], Usage::Server, Sans::ApiServer, false),
    // No O since kubeadm 1.37 (and 1.36.1/1.35.5): the kubelet API access comes from the
    // kubeadm:apiserver-kubelet-client binding to its CN, not from the cluster-admins group.
    cert(
        "apiserver-kubelet-client",
        Some("ca"),
        Cn::Fixed("kube-apiserver-kubelet-client"),
        &[],
        Usage::Client,
        Sans::None,
        false,
    ),
    cert("front-proxy-ca", None, Cn::Fixed("front-proxy-ca"), &[], Usage::Ca, Sans::OwnName, false),
    cert(
        "front-proxy-client",
        Some("front-proxy-ca"),
        Cn::Fixed("front-proxy-client"),
        &[],
        Usage::Client,
        Sans::None,
        false,
    ),
    cert("etcd/ca", None, Cn::Fixed("etcd-ca"), &[], Usage::Ca, Sans::OwnName, true),
    cert("etcd/server", Some("etcd/ca"), Cn::NodeName, &[], Usage::ServerAndClient, Sans::EtcdServer, true),
    cert("etcd/peer", Some("etcd/ca"), Cn::NodeName, &[], Usage::ServerAndClient, Sans::EtcdPeer, true),
    cert(
        "etcd/healthcheck-client",
        Some("etcd/ca"),
        Cn::Fixed("kube-etcd-healthcheck-client"),
        &[],
        Usage::Client,
        Sans::None,
        true,
    ),
    cert(
        "apiserver-etcd-client",
        Some("etcd/ca"),
        Cn::Fixed("kube-apiserver-etcd-client"),
        &[],
        Usage::Client,
        Sans::None,
        true,
    ),
];

/// Subject alternative names, deduplicated: DNS names sorted, IPs in order (as kubeadm).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SanList {
    pub dns: Vec<String>,
    pub ips: Vec<IpAddr>,
}

impl SanList {
    fn add(&mut self, s: &str) {
        match s.parse::<IpAddr>() {
            Ok(ip) => {
                if !self.ips.contains(&ip) {
                    self.ips.push(ip);
                }
            }
            Err(_) => {
                if !self.dns.iter().any(|d| d == s) {
                    self.dns.push(s.to_string());
                }
            }
        }
    }
    fn finish(mut self) -> Self {
        self.dns.sort();
        self
    }
}

impl CertSpec {
    pub fn is_ca(&self) -> bool {
        self.usage == Usage::Ca
    }

    pub fn common_name(&self, cfg: &InitConfig) -> String {
        match self.cn {
            Cn::Fixed(s) => s.to_string(),
            Cn::NodeName => cfg.node_name.clone(),
        }
    }

    pub fn sans(&self, cfg: &InitConfig) -> SanList {
        let mut l = SanList::default();
        let adv = cfg.advertise_address.to_string();
        let loopback: &[&str] = &["127.0.0.1", "::1"];
        match self.sans {
            Sans::None => {}
            Sans::OwnName => {
                if let Cn::Fixed(n) = self.cn {
                    l.add(n);
                }
            }
            Sans::ApiServer => {
                let domain = &cfg.cluster.networking.dns_domain;
                for d in [cfg.node_name.as_str(), "kubernetes", "kubernetes.default", "kubernetes.default.svc"] {
                    l.add(d);
                }
                l.add(&format!("kubernetes.default.svc.{domain}"));
                l.add(&cfg.api_service_ip.to_string());
                l.add(&adv);
                if !cfg.cluster.control_plane_endpoint.is_empty() {
                    l.add(&cfg.endpoint.host);
                }
                for s in &cfg.cluster.api_server.cert_sans {
                    l.add(s);
                }
            }
            Sans::EtcdServer | Sans::EtcdPeer => {
                l.add(&cfg.node_name);
                l.add("localhost");
                l.add(&adv);
                for s in loopback {
                    l.add(s);
                }
                if let Some(local) = cfg.local_etcd() {
                    let extra =
                        if self.sans == Sans::EtcdServer { &local.server_cert_sans } else { &local.peer_cert_sans };
                    for s in extra {
                        l.add(s);
                    }
                }
            }
        }
        l.finish()
    }
}

pub fn find(name: &str) -> Option<&'static CertSpec> {
    CERTS.iter().find(|c| c.name == name)
}
