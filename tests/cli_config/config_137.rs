//! kubeadm 1.37's config API edges: etcd.external.httpEndpoints carried through (and read back
//! from a kubeadm-config ConfigMap), featureGates checked on user input only.

use kubestrap::config::{HostFacts, cluster_from_configmap, parse_documents, resolve_init};

const EXTERNAL: &str = "apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: 10.0.0.10
nodeRegistration:
  name: cp-1
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.37.0
featureGates:
  RootlessControlPlane: false
etcd:
  external:
    endpoints: [https://10.0.0.20:2379]
    httpEndpoints: [http://10.0.0.20:2381]
    caFile: /e/ca.crt
    certFile: /e/c.crt
    keyFile: /e/c.key
";

#[test]
fn http_endpoints_are_accepted_and_uploaded() {
    let host = HostFacts { hostname: "cp-1".into(), default_address: None };
    let cfg = resolve_init("f.yaml", parse_documents("f.yaml", EXTERNAL).unwrap(), &host).unwrap();
    let ext = cfg.external_etcd().unwrap();
    assert_eq!(ext.http_endpoints, ["http://10.0.0.20:2381"]);
    // What upload-config stores keeps the field.
    let stored = serde_yaml::to_string(&cfg.cluster).unwrap();
    assert!(stored.contains("httpEndpoints:\n    - http://10.0.0.20:2381"), "{stored}");
}

#[test]
fn a_stored_cluster_configuration_is_read_back_without_user_input_checks() {
    // As kubeadm join reads kubeadm-config: strict fields, no gate check (an older kubeadm
    // may have stored a gate 1.37 removed).
    let cluster =
        EXTERNAL.split("---\n").nth(1).unwrap().replace("RootlessControlPlane: false", "NodeLocalCRISocket: true");
    let c = cluster_from_configmap(&cluster).unwrap();
    assert_eq!(c.etcd.external.unwrap().http_endpoints, ["http://10.0.0.20:2381"]);
    assert!(parse_documents("f.yaml", &cluster).is_err(), "the same text as user input is refused");
}
