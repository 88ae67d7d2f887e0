//! A join fails closed on the real API server v1.37.2: a wrong CA pin, a token the cluster never
//! had, an expired token, a CSR the cluster denies; each exits 1 naming the cause, logs no
//! secret and leaves no credential. (What a real server cannot be made to do — a forged
//! signature, cluster-info changing between the two fetches — is tests/cluster/cluster_e2e.rs's.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::cluster::*;
use crate::common::*;

/// Nothing credential-like may stay behind after a failed join.
fn assert_no_credentials(root: &std::path::Path) {
    for p in [
        "/etc/kubernetes/bootstrap-kubelet.conf",
        "/etc/kubernetes/kubelet.conf",
        "/var/lib/kubelet/pki/kubelet-client.key.tmp",
        "/var/lib/kubelet/pki/kubelet-client-current.pem",
    ] {
        assert!(!at(root, p).exists(), "{p} left behind");
    }
}

/// A join of a new node `name` at `addr(i)` with `token` and `pin` that must fail with exit 1
/// and `why` in its error; returns its stderr.
fn join_fails(c: &Cluster, name: &str, i: usize, token: &str, pin: &str, why: &str) -> String {
    let w = Scratch::new("");
    let (ep, root) = (format!("{CP_ADDR}:{}", c.port), w.root_str());
    let args = [
        "join",
        &ep,
        "--token",
        token,
        "--discovery-token-ca-cert-hash",
        pin,
        "--node-name",
        name,
        "--discovery-timeout",
        "4s",
        "--root",
        &root,
    ];
    let r = run_in(&c.bare_node(name, i), &args);
    assert_eq!(r.code(), 1, "{name}: the join must fail:\n{}", r.stderr());
    assert!(r.stderr().contains(why), "{name}: no {why:?} in:\n{}", r.stderr());
    for out in [r.stdout(), r.stderr()] {
        assert!(!out.contains(&token[7..]), "{name}: the token secret leaked:\n{out}");
    }
    assert_no_credentials(&w.root());
    r.stderr()
}

#[test]
fn join_fails_closed_on_a_wrong_pin_an_unknown_or_expired_token_and_a_denied_csr() {
    let c = Cluster::init("24h");
    c.wait_cluster_info_signed();
    let hash = c.ca_hash();

    let wrong = "sha256:345959acb2c3b2feb87d281961c893f62a314207ef02599f1cc4a5fb255480b3";
    join_fails(&c, "worker-1", 1, TOKEN, wrong, "does not match any --discovery-token-ca-cert-hash");

    // A token of the right shape the cluster never had: the real bootstrap signer has not signed
    // for it, and the real API server does not authenticate it.
    let err = join_fails(&c, "worker-2", 2, "zzzzzz.0123456789abcdef", &hash, "no signature for token id \"zzzzzz\"");
    assert!(err.contains("rejects this token (unknown or expired)"), "{err}");

    // An expired token's Secret: the real signer drops its signature, the real API server
    // rejects it (and the real token cleaner deletes it).
    let expired = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
        "metadata": {"name": "bootstrap-token-oldtok", "namespace": "kube-system"},
        "stringData": {"token-id": "oldtok", "token-secret": "0123456789abcdef", "expiration": "2020-01-01T00:00:00Z",
                       "usage-bootstrap-signing": "true", "usage-bootstrap-authentication": "true",
                       "auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token"}
    });
    let file = c.scratch.path("/expired-token.json");
    std::fs::write(&file, expired.to_string()).expect("the Secret");
    let (code, _, err) = c.kubectl(&["create", "-f", &file.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    let err = join_fails(&c, "worker-3", 3, "oldtok.0123456789abcdef", &hash, "unknown or expired");
    assert!(err.contains("gave up"), "{err}");

    // The cluster denies the CSR: kubeadm's auto-approve binding removed, and each bootstrap CSR
    // denied as it comes. Discovery passes, the TLS bootstrap fails.
    let binding = "kubeadm:node-autoapprove-bootstrap";
    assert_eq!(c.kubectl(&["delete", "clusterrolebinding", binding]).0, 0);
    let done = AtomicBool::new(false);
    let denied = std::thread::scope(|s| {
        let denier = s.spawn(|| {
            let mut denied = 0;
            while !done.load(Ordering::SeqCst) {
                for csr in c.bootstrap_csrs() {
                    let name = csr["metadata"]["name"].as_str().unwrap_or_default();
                    if csr["status"]["conditions"].is_null() && c.kubectl(&["certificate", "deny", name]).0 == 0 {
                        denied += 1;
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            denied
        });
        let err = join_fails(&c, "worker-4", 4, TOKEN, &hash, "was denied");
        done.store(true, Ordering::SeqCst);
        (denier.join().expect("the denier"), err)
    });
    assert_eq!(denied.0, 1, "one CSR, denied: {}", denied.1);
}
