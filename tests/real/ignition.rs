//! Cluster API's Ignition output (CABPK `format: ignition`, Flatcar) booted unchanged on the real
//! components but for the test host's settings in the kubeadm documents: a control plane inits
//! from `/etc/kubeadm.yml` run by `/etc/kubeadm.sh`'s kubeadm line, a worker joins it, both
//! Ready, the sentinel written after each kubeadm step (#22).

use super::cluster::*;
use crate::common::*;

const SENTINEL: &str = "/run/cluster-api/bootstrap-success.complete";

/// RFC 3986 percent-encoding of everything but unreserved bytes, as Flatcar's config
/// transpiler writes a `data:,` URL.
fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn file(path: &str, mode: u32, text: &str) -> serde_json::Value {
    serde_json::json!({"filesystem": "root", "path": path, "mode": mode,
        "contents": {"source": format!("data:,{}", percent(text)), "verification": {}}})
}

/// CABPK's Ignition 2.3.0 shape: `/etc/kubeadm.sh` (pre commands, the kubeadm line, the
/// sentinel, the `mv`, post commands), `/etc/kubeadm.yml` (a `---` line, then the documents),
/// `kubeadm.service`, and a provider's drop-in naming Afterburn's environment file.
fn cabpk_ignition(verb: &str, documents: &str, pre: &str, post: &str) -> String {
    let script = format!(
        "#!/bin/bash\nset -e\n\n{pre}kubeadm {verb} --config /etc/kubeadm.yml --v=5\n\
         mkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete\n\
         mv /etc/kubeadm.yml /tmp/\n{post}\n"
    );
    let unit = "[Unit]\nDescription=kubeadm\nConditionPathExists=/etc/kubeadm.yml\nAfter=network.target\n\
                [Service]\nType=oneshot\nExecStart=/etc/kubeadm.sh\n[Install]\nWantedBy=multi-user.target\n";
    let dropin = "[Unit]\nRequires=coreos-metadata.service\nAfter=coreos-metadata.service\n\
                  [Service]\nEnvironmentFile=/run/metadata/flatcar\n";
    serde_json::json!({
        "ignition": {"config": {}, "security": {"tls": {}}, "timeouts": {}, "version": "2.3.0"},
        "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAATEST core@example"]}]},
        "storage": {"files": [
            file("/etc/motd", 420, "Provisioned by Cluster API\n"),
            file("/etc/kubeadm.sh", 448, &script),
            file("/etc/kubeadm.yml", 384, &format!("---\n{documents}")),
        ]},
        "systemd": {"units": [
            {"name": "kubeadm.service", "enabled": true, "contents": unit},
            {"name": "kubeadm.service", "dropins": [{"name": "10-flatcar.conf", "contents": dropin}]},
        ]},
    })
    .to_string()
}

fn read(root: &std::path::Path, path: &str) -> String {
    std::fs::read_to_string(at(root, path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn cluster_api_ignition_boots_a_control_plane_and_a_worker_on_the_real_components() {
    let init =
        fixture!("real/init.yaml").replace("{signing}", "720h").replace("{cluster_extra}", "clusterName: flatcar\n");
    let mut c = Cluster::boot_with(|lan, root, port| {
        let cri = lan.cri_socket("cp-1", root);
        let vars: [(&str, &dyn std::fmt::Display); 3] = [("cri", &cri), ("port", &port), ("addr", &CP_ADDR)];
        // CABPK writes ClusterConfiguration first, then InitConfiguration: order does not matter.
        seed(root, &cabpk_ignition("init", &fill(&init, &vars), "", "echo done\n"), "cp-1");
    });
    let root = c.root();
    assert_eq!(read(&root, "/etc/motd"), "Provisioned by Cluster API\n");
    assert_eq!(read(&root, SENTINEL), "success\n");
    assert_eq!(mode(&at(&root, "/etc/kubeadm.yml")), 0o600, "storage.files' decimal mode 384");
    assert!(!at(&root, "/etc/kubeadm.sh").exists(), "kubeadm.sh is read, not written");
    let cm = c.get(&["-n", "kube-system", "configmap", "kubeadm-config"]);
    assert!(cm["data"]["ClusterConfiguration"].as_str().unwrap().contains("clusterName: flatcar"), "{cm}");
    let log = format!("{}{}{}", c.first.stdout(), c.first.stderr(), c.init.stderr());
    assert!(log.contains("passwd"), "the ignored passwd section is reported:\n{log}");

    c.wait_cluster_info_signed();
    let w = Scratch::new("");
    let wroot = w.root();
    // CAPA's Flatcar idiom: the node name from Afterburn's variable, envsubst'd by the
    // preKubeadmCommands (kubestrap substitutes it from its own datasource, here NoCloud).
    let docs = c.fill_node(fixture!("real/join.yaml"), "worker-1", 21, &wroot);
    assert!(docs.contains("\n  name: worker-1\n"));
    let docs = docs.replace("\n  name: worker-1\n", "\n  name: ${COREOS_NOCLOUD_HOSTNAME}\n");
    let pre = "envsubst < /etc/kubeadm.yml > /etc/kubeadm.yml.tmp\nmv /etc/kubeadm.yml.tmp /etc/kubeadm.yml\n";
    seed(&wroot, &cabpk_ignition("join", &docs, pre, ""), "worker-1");
    let runs = c.boot_node_in("worker-1", 21, w);
    assert_eq!(runs.len(), 2);
    for r in &runs {
        assert_eq!(r.code(), 0, "worker:\n{}\n{}", r.stdout(), r.stderr());
        assert!(!r.stdout().contains(SECRET) && !r.stderr().contains(SECRET), "token secret leaked");
    }
    c.wait_ready("worker-1");
    assert!(read(&wroot, "/run/metadata/flatcar").contains("COREOS_NOCLOUD_HOSTNAME=worker-1\n"));
    assert_eq!(read(&wroot, SENTINEL), "success\n");
    let kept = read(&wroot, "/var/lib/kubestrap/plan.yaml");
    assert!(!kept.contains(TOKEN), "no token kept:\n{kept}");
}
