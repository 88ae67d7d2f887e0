//! User-data that runs kubeadm (tests/fixtures/user-data/): Cluster API's control-plane and
//! worker bootstrap data booted unchanged but for endpoints (moved to the API double on a free
//! port), hand-written `#cloud-config` with `runcmd: kubeadm ...`, and the corpus table: what
//! kubeadm accepts is accepted, what it refuses is refused with the field named.

use crate::common::*;

use std::path::Path;

use kubestrap::config::userdata::{NodePlan, plan_detailed};
use kubestrap::datasource::{Gathered, MetaData};

const SENTINEL: &str = "run/cluster-api/bootstrap-success.complete";

pub(crate) fn seed(root: &Path, user_data: &str, hostname: &str) {
    let d = root.join("var/lib/cloud/seed/nocloud");
    write_file(&d.join("user-data"), user_data);
    write_file(&d.join("meta-data"), format!("instance-id: i-1\nlocal-hostname: {hostname}\n"));
    write_file(&root.join("etc/kubestrap/datasource"), "kubestrap.ds=nocloud\n");
}

pub(crate) fn boot(root: &Path, stage: &str) -> Run {
    let root = root.display().to_string();
    kubestrap(&["boot", "--stage", stage, "--root", &root, "--datasource-timeout", "3s"])
}

/// Cluster API's first control plane on loopback ports: the endpoint and the API server's bind
/// port moved to `port`, and the kubelet's healthz (a KubeletConfiguration document added to the
/// kubeadm config file) to `healthz`, so tests run side by side.
pub(crate) fn capi_init(port: u16, healthz: u16) -> String {
    let ud = fixture!("user-data/capi-control-plane-init/user-data");
    let kubelet = format!(
        "        taints: null\n      \n      ---\n      apiVersion: kubelet.config.k8s.io/v1beta1\n      kind: KubeletConfiguration\n      healthzPort: {healthz}\n"
    );
    let out = ud
        .replace("127.0.0.1:6443", &format!("127.0.0.1:{port}"))
        .replace(
            "localAPIEndpoint: {}",
            &format!("localAPIEndpoint: {{advertiseAddress: 127.0.0.1, bindPort: {port}}}"),
        )
        .replace("        taints: null\n      \n", &kubelet)
        // No controller-manager or scheduler beside the double: [control-plane-check] asks it.
        .replace(
            "        - name: cloud-provider\n          value: external\n",
            &format!("        - name: cloud-provider\n          value: external\n        - name: secure-port\n          value: \"{port}\"\n"),
        )
        .replace("      scheduler: {}\n", &format!("      scheduler: {{extraArgs: [{{name: secure-port, value: \"{port}\"}}]}}\n"));
    assert_ne!(out, ud);
    out
}

#[test]
fn sentinel_is_written_only_when_the_init_succeeds() {
    let r0 = tempfile::tempdir().unwrap();
    let (port, healthz) = (free_port(), free_port());
    // A CA certificate that is not one: the init's certs phase refuses it.
    let ud = capi_init(port, healthz).replacen(
        "      -----BEGIN CERTIFICATE-----\n      MII",
        "      -----BEGIN CERTIFICATE-----\n      XXX",
        1,
    );
    seed(r0.path(), &ud, "cp-1");
    let r = boot(r0.path(), "pre-kubelet");
    assert_ne!(r.code(), 0, "{}", r.stderr());
    assert!(r.stderr().contains("ca.crt"), "{}", r.stderr());
    assert!(!r0.path().join(SENTINEL).exists());
    assert!(!r.stderr().contains("echo done") && !r.stdout().contains("echo done"));
}

/// The corpus: every fixture planned as `kubestrap boot` plans it, with the expected outcome.
#[test]
fn user_data_corpus_accepted_and_refused_as_kubeadm_does() {
    let cases: &[(&str, Result<&str, &str>)] = &[
        ("capi-control-plane-init", Ok("init")),
        ("capi-control-plane-join", Ok("join")),
        ("capi-worker", Ok("join")),
        // `kubeadm init` by flags alone: the flags build the documents, as `kubestrap init` does.
        // Cluster API's `format: ignition` (Ignition 2.3.0): the same files and script.
        ("ignition-capi-control-plane", Ok("init")),
        ("ignition-capi-worker", Ok("join")),
        // Cluster API's own expected render: `kubeadm join` with no discovery is no join.
        ("ignition-cabpk-render-test", Err("discovery: is missing")),
        ("homelab-crio-master", Ok("init")),
        ("homelab-crio-worker", Ok("join")),
        ("homelab-oci-flannel", Ok("init")),
        // kubeadm refuses the folded line (" --service-cidr" is an argument); so does kubestrap.
        ("homelab-hetzner-docker", Err("runcmd[7]")),
    ];
    let dir = fixture_path("user-data");
    let mut seen: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| dir.join(n).is_dir())
        .collect();
    seen.sort();
    let mut listed: Vec<String> = cases.iter().map(|(n, _)| n.to_string()).collect();
    listed.sort();
    assert_eq!(seen, listed, "every fixture has an expected outcome");
    for (name, want) in cases {
        let ud = std::fs::read(dir.join(name).join("user-data")).unwrap();
        let origin = std::fs::read_to_string(dir.join(name).join("ORIGIN")).unwrap();
        assert!(origin.contains('@') || origin.contains("commit"), "{name}: ORIGIN names a commit");
        let g = Gathered {
            source: "nocloud".into(),
            user_data: Some(ud),
            meta: MetaData {
                instance_id: Some("i-1".into()),
                local_hostname: Some("node-1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        match (plan_detailed(&g), want) {
            (Ok(p), Ok(kind)) => {
                assert_eq!(if p.plan.is_join() { "join" } else { "init" }, *kind, "{name}");
                let s = p.script.expect("the script around kubeadm");
                assert!(s.kubeadm.contains("kubeadm"), "{name}: {}", s.kubeadm);
                assert!(!s.kubeadm.contains(SECRET), "{name}: {}", s.kubeadm);
                match &p.plan {
                    NodePlan::Join { join } => assert_eq!(join.node_registration.name, "node-1", "{name}"),
                    NodePlan::Init { docs, .. } if name.starts_with("homelab") => {
                        // What the flags said is in the documents kubestrap will build from.
                        let cc = docs.cluster.as_ref().expect("ClusterConfiguration from the flags");
                        assert!(!cc.networking.pod_subnet.is_empty(), "{name}: --pod-network-cidr kept");
                    }
                    NodePlan::Init { .. } => {}
                }
            }
            (Err(e), Err(field)) => {
                let m = e.to_string();
                assert!(m.contains(field), "{name}: {m}");
                assert!(!m.contains(SECRET), "{name}: {m}");
                assert_eq!(kubestrap::error::Error::from(e).kind.exit_code(), 2, "{name}");
            }
            (Ok(_), Err(field)) => panic!("{name}: accepted, expected a refusal naming {field}"),
            (Err(e), Ok(_)) => panic!("{name}: refused: {e}"),
        }
    }
}
