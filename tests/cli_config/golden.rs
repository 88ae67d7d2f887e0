//! Golden files for the manifests and kubeconfigs, made with a fixed CA fixture so that
//! everything but the freshly generated client keys is byte-stable.
//! `UPDATE_GOLDEN=1 cargo test --test golden` rewrites them; review the diff before committing.

mod common;
use common::*;

use std::fs;
use std::path::Path;

const STACKED: &str = "\
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration:
  name: cp-1
localAPIEndpoint:
  advertiseAddress: 192.168.56.10
  bindPort: 6443
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.37.0
controlPlaneEndpoint: k8s-api.example.internal:6443
imageRepository: my.registry.example/k8s
networking:
  podSubnet: 10.244.0.0/16
apiServer:
  certSANs: [192.168.56.100]
  extraArgs:
  - name: audit-log-path
    value: /var/log/kubernetes/audit.log
  - name: authorization-mode
    value: Node,RBAC,Webhook
  extraVolumes:
  - name: audit-log
    hostPath: /var/log/kubernetes
    mountPath: /var/log/kubernetes
    pathType: DirectoryOrCreate
  extraEnvs:
  - name: GOMAXPROCS
    value: \"2\"
controllerManager:
  extraArgs:
  - name: node-cidr-mask-size
    value: \"24\"
scheduler:
  extraArgs:
  - name: bind-address
    value: 0.0.0.0
etcd:
  local:
    extraArgs:
    - name: quota-backend-bytes
      value: \"8589934592\"
";

const EXTERNAL_ETCD: &str = "\
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration:
  name: cp-2
localAPIEndpoint:
  advertiseAddress: fd00::10
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.36.3
networking:
  serviceSubnet: fd00:96::/108
etcd:
  external:
    endpoints: [\"https://[fd00::50]:2379\", \"https://[fd00::51]:2379\"]
    caFile: /etc/etcd/pki/ca.crt
    certFile: /etc/etcd/pki/apiserver-etcd-client.crt
    keyFile: /etc/etcd/pki/apiserver-etcd-client.key
";

const FILES: &[&str] = &[
    "manifests/etcd.yaml",
    "manifests/kube-apiserver.yaml",
    "manifests/kube-controller-manager.yaml",
    "manifests/kube-scheduler.yaml",
    "admin.conf",
    "super-admin.conf",
    "kubelet.conf",
    "controller-manager.conf",
    "scheduler.conf",
];

/// Client keys and certs are fresh each run; everything else must match byte for byte.
fn mask(text: &str) -> String {
    text.lines()
        .map(|l| match l.split_once(": ") {
            Some((k, _)) if k.trim_start() == "client-certificate-data" || k.trim_start() == "client-key-data" => {
                format!("{k}: <masked>")
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn check_scenario(name: &str, config: &str) {
    let s = Scratch::new(config);
    let pki = s.pki("");
    fs::create_dir_all(&pki).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ca");
    for f in ["ca.crt", "ca.key"] {
        fs::copy(fixtures.join(f), pki.join(f)).unwrap();
    }
    s.init(&[]).ok();
    let golden_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut diffs = Vec::new();
    for f in FILES {
        let produced = s.path(&format!("/etc/kubernetes/{f}"));
        let golden = golden_dir.join(f);
        let got =
            if produced.exists() { mask(&fs::read_to_string(&produced).unwrap()) } else { "<absent>\n".to_string() };
        if update {
            fs::create_dir_all(golden.parent().unwrap()).unwrap();
            fs::write(&golden, &got).unwrap();
            continue;
        }
        let want = fs::read_to_string(&golden)
            .unwrap_or_else(|_| panic!("missing golden {}; run with UPDATE_GOLDEN=1", golden.display()));
        if want != got {
            diffs.push(format!("{name}/{f} differs from {}:\n--- want\n{want}\n--- got\n{got}", golden.display()));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

#[test]
fn stacked_etcd_with_extras_matches_golden() {
    check_scenario("stacked", STACKED);
}

#[test]
fn external_etcd_ipv6_matches_golden() {
    check_scenario("external-etcd-ipv6", EXTERNAL_ETCD);
}
