//! kubeadm marshals the whole KubeProxyConfiguration (v1alpha1) struct, so every field the user
//! left out is still written, with Go's zero value. ZERO is that struct with nothing set, as
//! kubeadm v1.37.2 prints it (`init phase addon kube-proxy --print-manifest`), minus apiVersion
//! and kind.

use serde_yaml::{Mapping, Value};

const ZERO: &str = r#"
bindAddress: ""
bindAddressHardFail: false
clientConnection:
  acceptContentTypes: ""
  burst: 0
  contentType: ""
  kubeconfig: ""
  qps: 0
clusterCIDR: ""
configSyncPeriod: 0s
conntrack:
  maxPerCore: null
  min: null
  tcpBeLiberal: false
  tcpCloseWaitTimeout: null
  tcpEstablishedTimeout: null
  udpStreamTimeout: 0s
  udpTimeout: 0s
detectLocal:
  bridgeInterface: ""
  interfaceNamePrefix: ""
detectLocalMode: ""
enableProfiling: false
healthzBindAddress: ""
hostnameOverride: ""
iptables:
  localhostNodePorts: null
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
ipvs:
  excludeCIDRs: null
  minSyncPeriod: 0s
  scheduler: ""
  strictARP: false
  syncPeriod: 0s
  tcpFinTimeout: 0s
  tcpTimeout: 0s
  udpTimeout: 0s
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
metricsBindAddress: ""
mode: ""
nftables:
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
nodePortAddresses: null
oomScoreAdj: null
portRange: ""
showHiddenMetricsForVersion: ""
winkernel:
  enableDSR: false
  forwardHealthCheckVip: false
  networkName: ""
  rootHnsEndpointName: ""
  sourceVip: ""
"#;

/// The user's document laid over the zero struct: nested mappings merge, anything else the user
/// set replaces the zero value (a null keeps it, as Go decodes null into the zero struct).
pub(crate) fn with_zero_values(user: Mapping) -> Mapping {
    let mut base: Mapping = serde_yaml::from_str(ZERO).unwrap_or_default();
    merge(&mut base, user);
    base
}

fn merge(base: &mut Mapping, over: Mapping) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(Value::Mapping(b)), Value::Mapping(o)) => merge(b, o),
            (Some(Value::Mapping(_)), Value::Null) => {}
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// kubeadm v1.37.2's config.conf for podSubnet 10.244.0.0/16 on an IPv4 node.
    pub(crate) const KUBEADM_1_37_2_CONFIG_CONF: &str = "apiVersion: kubeproxy.config.k8s.io/v1alpha1
bindAddress: 0.0.0.0
bindAddressHardFail: false
clientConnection:
  acceptContentTypes: \"\"
  burst: 0
  contentType: \"\"
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
  qps: 0
clusterCIDR: 10.244.0.0/16
configSyncPeriod: 0s
conntrack:
  maxPerCore: null
  min: null
  tcpBeLiberal: false
  tcpCloseWaitTimeout: null
  tcpEstablishedTimeout: null
  udpStreamTimeout: 0s
  udpTimeout: 0s
detectLocal:
  bridgeInterface: \"\"
  interfaceNamePrefix: \"\"
detectLocalMode: \"\"
enableProfiling: false
healthzBindAddress: \"\"
hostnameOverride: \"\"
iptables:
  localhostNodePorts: null
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
ipvs:
  excludeCIDRs: null
  minSyncPeriod: 0s
  scheduler: \"\"
  strictARP: false
  syncPeriod: 0s
  tcpFinTimeout: 0s
  tcpTimeout: 0s
  udpTimeout: 0s
kind: KubeProxyConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: \"0\"
    text:
      infoBufferSize: \"0\"
  verbosity: 0
metricsBindAddress: \"\"
mode: iptables
nftables:
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
nodePortAddresses: null
oomScoreAdj: null
portRange: \"\"
showHiddenMetricsForVersion: \"\"
winkernel:
  enableDSR: false
  forwardHealthCheckVip: false
  networkName: \"\"
  rootHnsEndpointName: \"\"
  sourceVip: \"\"";

    #[test]
    fn zero_template_parses_and_user_values_merge() {
        assert!(serde_yaml::from_str::<Mapping>(ZERO).is_ok());
        let user: Mapping =
            serde_yaml::from_str("mode: nftables\nconntrack:\n  maxPerCore: 0\niptables: null\nextra: kept\n").unwrap();
        let m = with_zero_values(user);
        assert_eq!(m["mode"], "nftables");
        assert_eq!(m["conntrack"]["maxPerCore"], 0);
        assert_eq!(m["conntrack"]["udpTimeout"], "0s");
        assert_eq!(m["iptables"]["syncPeriod"], "0s");
        assert_eq!(m["extra"], "kept");
    }
}
