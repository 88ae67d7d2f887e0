//! `kubestrap config print init-defaults|join-defaults`: kubeadm's documents, which kubestrap's
//! own decoder reads back unchanged and `init` accepts; and kubeadm's own printed defaults decode.

use crate::common::*;

use kubestrap::config::defaults::{join_documents, to_yaml};
use kubestrap::config::{Documents, parse_documents};

/// `kubestrap config print ...`'s stdout. Not through `kubestrap()`: the printed placeholder token
/// is kubeadm's `abcdef.0123456789abcdef`, the same string the secret guard watches for.
fn print(args: &[&str]) -> Run {
    let out = std::process::Command::new(&*BIN).args(["config", "print"]).args(args).output().expect("run kubestrap");
    Run { out }
}

/// The documents re-encoded as `config print` encodes them.
fn reencode(docs: &Documents) -> String {
    let mut out = Vec::new();
    if let Some(i) = &docs.init {
        out.push(to_yaml(i).unwrap());
    }
    if let Some(c) = &docs.cluster {
        out.push(to_yaml(c).unwrap());
    }
    if let Some(j) = &docs.join {
        out.push(to_yaml(j).unwrap());
    }
    join_documents(&out)
}

#[test]
fn init_defaults_round_trip_and_init_accepts_them() {
    let printed = print(&["init-defaults"]).ok().stdout();
    let docs = parse_documents("init-defaults", &printed).unwrap();
    assert!(docs.warnings.is_empty(), "{:?}", docs.warnings);
    assert_eq!(reencode(&docs), printed, "decoding and re-encoding changed the documents");

    let s = Scratch::new(&printed);
    let r = s.init(&[]).ok();
    assert!(r.stderr().contains("[init] Using Kubernetes version: v1.37.0"), "{}", r.stderr());
    // kubeadm 1.37: the CRI endpoint is in instance-config.yaml (merged into config.yaml), and
    // kubeadm-flags.env holds neither it nor the pause image (kubelet 1.35 removed that flag).
    let instance = std::fs::read_to_string(s.path("/var/lib/kubelet/instance-config.yaml")).unwrap();
    assert_eq!(instance, "containerRuntimeEndpoint: \"unix:///var/run/containerd/containerd.sock\"\n");
    let config = std::fs::read_to_string(s.path("/var/lib/kubelet/config.yaml")).unwrap();
    assert!(config.contains("\ncontainerRuntimeEndpoint: unix:///var/run/containerd/containerd.sock\n"), "{config}");
    let flags = std::fs::read_to_string(s.path("/var/lib/kubelet/kubeadm-flags.env")).unwrap();
    assert!(
        !flags.contains("--container-runtime-endpoint") && !flags.contains("--pod-infra-container-image"),
        "{flags}"
    );
    let apiserver = std::fs::read_to_string(s.path("/etc/kubernetes/manifests/kube-apiserver.yaml")).unwrap();
    assert!(apiserver.contains("--advertise-address=1.2.3.4"), "{apiserver}");
}

#[test]
fn join_defaults_round_trip_and_resolve() {
    let printed = print(&["join-defaults"]).ok().stdout();
    let docs = parse_documents("join-defaults", &printed).unwrap();
    assert_eq!(reencode(&docs), printed);
    let jc = docs.join.unwrap();
    let bt = jc.discovery.bootstrap_token.as_ref().unwrap();
    assert_eq!((bt.api_server_endpoint.as_str(), bt.unsafe_skip_ca_verification), ("kube-apiserver:6443", true));
    assert_eq!(jc.discovery.tls_bootstrap_token, TOKEN);
    kubestrap::join::resolve(&kubestrap::join::JoinFlags::default(), &jc).unwrap();
}

/// kubeadm 1.33's own `config print init-defaults` output (origin in the fixture's ORIGIN) and
/// kubestrap's differ only where kubestrap's defaults differ on purpose.
#[test]
fn kubeadm_printed_defaults_decode_and_match_ours() {
    let theirs = fixture!("kubeadm-configs/kubeadm-1.33-init-defaults/config.yaml");
    let docs = parse_documents("kubeadm", theirs).unwrap();
    let t = docs.init.as_ref().unwrap().timeouts.as_ref().unwrap();
    assert_eq!((t.kubernetes_api_call.as_deref(), t.etcd_api_call.as_deref()), (Some("1m0s"), Some("2m0s")));
    assert_eq!(reencode(&docs), theirs, "kubeadm's output re-encodes byte for byte");

    let ours = print(&["init-defaults"]).ok().stdout();
    let differ: Vec<(&str, &str)> = theirs.lines().zip(ours.lines()).filter(|(a, b)| a != b).collect();
    assert_eq!(theirs.lines().count(), ours.lines().count(), "{ours}");
    assert_eq!(
        differ,
        [
            ("encryptionAlgorithm: RSA-2048", "encryptionAlgorithm: ECDSA-P256"),
            ("kubernetesVersion: 1.33.0", "kubernetesVersion: 1.37.0")
        ]
    );
}

#[test]
fn component_configs_are_printed_on_request() {
    let out =
        print(&["init-defaults", "--component-configs", "KubeletConfiguration,KubeProxyConfiguration"]).ok().stdout();
    let docs = parse_documents("printed", &out).unwrap();
    let kubelet = docs.kubelet.expect("KubeletConfiguration printed");
    assert_eq!(kubelet.get("clusterDNS").unwrap()[0].as_str(), Some("10.96.0.10"));
    let proxy = docs.kube_proxy.expect("KubeProxyConfiguration printed");
    assert_eq!(proxy.get("bindAddress").unwrap().as_str(), Some("0.0.0.0"));

    let r = print(&["join-defaults", "--component-configs", "Kubelet"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("KubeletConfiguration KubeProxyConfiguration"), "{}", r.stderr());
}
