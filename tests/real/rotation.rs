//! The real kubelet rotates the client certificate kubestrap's join obtained: with a short
//! --cluster-signing-duration its certificate nears expiry within a minute or two, and the
//! kubelet renews it through the kubeadm:node-autoapprove-certificate-rotation binding.

use std::time::Duration;

use super::cluster::*;
use super::proc::wait_for;
use crate::common::*;

#[test]
fn the_real_kubelet_rotates_the_certificate_join_obtained() {
    // NotBefore is backdated 5 minutes, so a 3-minute certificate is due for renewal 0.6-2.2
    // minutes after it is issued (70-90% of its lifetime).
    let mut c = Cluster::init("3m");
    c.wait_cluster_info_signed();
    let run = c.join("worker-1", 21, fixture!("real/join.yaml"), &[]);
    assert_eq!(run.code(), 0, "join failed:\n{}\n{}", run.stdout(), run.stderr());
    c.wait_ready("worker-1");
    let current = at(&c.hosts[1].root, "/var/lib/kubelet/pki/kubelet-client-current.pem");
    let first = std::fs::read_link(&current).expect("kubelet-client-current.pem is a symlink");

    wait_for("the worker's kubelet to rotate its client certificate", Duration::from_secs(300), &|| c.health(), || {
        std::fs::read_link(&current).ok().filter(|now| *now != first)
    });
    // Renewed by the node itself, approved by the rotation binding init created.
    let csrs = c.get(&["csr"]);
    let renewal = csrs["items"].as_array().unwrap().iter().find(|r| r["spec"]["username"] == "system:node:worker-1");
    let renewal = renewal.unwrap_or_else(|| panic!("no CSR from system:node:worker-1: {csrs}"));
    let conditions = renewal["status"]["conditions"].as_array().expect("conditions");
    assert!(conditions.iter().any(|k| k["type"] == "Approved"), "{renewal}");
    c.wait_ready("worker-1");
}
