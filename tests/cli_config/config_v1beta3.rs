//! v1beta3: read and converted as kubeadm 1.31-1.35 do, with a warning that kubeadm 1.36+
//! refuses it; `kubestrap config migrate` writes the v1beta4 equivalent, which builds the same node.

use crate::common::*;

use std::os::unix::fs::PermissionsExt;

use kubestrap::config::{HostFacts, parse_documents, resolve_init};

/// A v1beta3 control plane with every field that changes shape in v1beta4.
const OLD: &str = "apiVersion: kubeadm.k8s.io/v1beta3
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: 10.0.0.10
nodeRegistration:
  name: cp-1
  kubeletExtraArgs:
    node-ip: 10.0.0.10
    cgroup-driver: systemd
---
apiVersion: kubeadm.k8s.io/v1beta3
kind: ClusterConfiguration
kubernetesVersion: v1.36.2
apiServer:
  timeoutForControlPlane: 2m0s
  extraArgs:
    audit-log-maxage: \"30\"
    authorization-mode: Node,RBAC
controllerManager:
  extraArgs:
    bind-address: 0.0.0.0
etcd:
  local:
    extraArgs:
      listen-metrics-urls: http://0.0.0.0:2381
networking:
  podSubnet: 10.244.0.0/16
";

fn host() -> HostFacts {
    HostFacts { hostname: "cp-1".into(), default_address: Some("10.0.0.10".parse().unwrap()) }
}

#[test]
fn v1beta3_converts_as_kubeadm_converts_it() {
    let docs = parse_documents("old.yaml", OLD).unwrap();
    assert!(
        docs.warnings.iter().any(|w| w.contains("v1beta3 is removed") && w.contains("kubeadm 1.37 refuses it")),
        "{:?}",
        docs.warnings
    );
    let cfg = resolve_init("old.yaml", docs, &host()).unwrap();
    let args: Vec<(&str, &str)> =
        cfg.cluster.api_server.extra_args.iter().map(|a| (a.name.as_str(), a.value.as_str())).collect();
    assert_eq!(args, [("audit-log-maxage", "30"), ("authorization-mode", "Node,RBAC")], "sorted by name");
    let kubelet: Vec<&str> = cfg.init.node_registration.kubelet_extra_args.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(kubelet, ["cgroup-driver", "node-ip"]);
    assert_eq!(cfg.init.node_registration.image_pull_serial, Some(true));
    assert_eq!(cfg.control_plane_health_timeout, std::time::Duration::from_secs(120), "timeoutForControlPlane moved");
    assert_eq!(cfg.cluster.encryption_algorithm, "RSA-2048", "kubeadm's conversion sets v1beta3's algorithm");
    assert_eq!(cfg.cluster.api_version, "kubeadm.k8s.io/v1beta4");
}

#[test]
fn migrate_writes_v1beta4_that_builds_the_same_node() {
    let s = Scratch::new(OLD);
    let config = s.config();
    let out = kubestrap(&["config", "migrate", "--old-config", &config]).ok().stdout();
    assert!(!out.contains("v1beta3") && !out.contains("timeoutForControlPlane"), "{out}");
    for want in [
        "- name: authorization-mode\n    value: Node,RBAC\n",
        "controlPlaneComponentHealthCheck: 2m0s",
        "imagePullSerial: true",
        "encryptionAlgorithm: RSA-2048",
    ] {
        assert!(out.contains(want), "{want:?} missing:\n{out}");
    }
    assert!(parse_documents("new", &out).unwrap().warnings.is_empty(), "the result reads without warnings");

    // --new-config: the same bytes, written atomically, private (it may hold a token).
    let new = s.dir.path().join("new.yaml");
    let r = kubestrap(&["config", "migrate", "--old-config", &config, "--new-config", new.to_str().unwrap()]).ok();
    assert!(r.stdout().is_empty());
    assert_eq!(std::fs::read_to_string(&new).unwrap(), out);
    assert_eq!(std::fs::metadata(&new).unwrap().permissions().mode() & 0o777, 0o600);

    // Both files give the same manifests and kubelet files (certificates are random; compared
    // elsewhere).
    let migrated = Scratch::new(&out);
    s.init(&[]).ok();
    migrated.init(&[]).ok();
    for f in [
        "/etc/kubernetes/manifests/kube-apiserver.yaml",
        "/etc/kubernetes/manifests/kube-controller-manager.yaml",
        "/etc/kubernetes/manifests/kube-scheduler.yaml",
        "/etc/kubernetes/manifests/etcd.yaml",
        "/var/lib/kubelet/config.yaml",
        "/var/lib/kubelet/kubeadm-flags.env",
    ] {
        let a = std::fs::read_to_string(s.path(f)).unwrap();
        assert_eq!(a, std::fs::read_to_string(migrated.path(f)).unwrap(), "{f} differs");
    }
    let apiserver = std::fs::read_to_string(s.path("/etc/kubernetes/manifests/kube-apiserver.yaml")).unwrap();
    assert!(apiserver.contains("--audit-log-maxage=30"), "{apiserver}");
}

#[test]
fn migrate_refuses_what_it_cannot_read() {
    let r = kubestrap(&["config", "migrate"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("--old-config flag is mandatory"), "{}", r.stderr());
    let s = Scratch::new("apiVersion: kubeadm.k8s.io/v1beta2\nkind: InitConfiguration\n");
    let new = s.dir.path().join("new.yaml");
    let r = kubestrap(&["config", "migrate", "--old-config", &s.config(), "--new-config", new.to_str().unwrap()]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("v1beta2") && r.stderr().contains("no longer supported"), "{}", r.stderr());
    assert!(!new.exists());
    // An unknown v1beta3 field (a v1beta4-only one) is named.
    let s = Scratch::new("apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\nproxy: {}\n");
    let r = kubestrap(&["config", "migrate", "--old-config", &s.config()]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("unknown field `proxy`"), "{}", r.stderr());
}

#[test]
fn v1beta3_join_configuration_converts() {
    let text = "apiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    \
                apiServerEndpoint: 127.0.0.1:6443\n    token: abcdef.0123456789abcdef\n    unsafeSkipCAVerification: true\n  \
                timeout: 2m0s\nnodeRegistration:\n  criSocket: /run/containerd/containerd.sock\n  kubeletExtraArgs:\n    \
                node-labels: a=b\n";
    let docs = parse_documents("join.yaml", text).unwrap();
    let jc = docs.join.unwrap();
    assert_eq!(jc.timeouts.unwrap().discovery.as_deref(), Some("2m0s"), "discovery.timeout moved");
    assert_eq!(jc.node_registration.cri_socket, "unix:///run/containerd/containerd.sock");
    assert!(docs.warnings.iter().any(|w| w.contains("nodeRegistration.criSocket")), "{:?}", docs.warnings);
    assert_eq!(jc.node_registration.kubelet_extra_args[0].name, "node-labels");
}
