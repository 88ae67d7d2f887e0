//! A bootstrap token entry without a token, on the real components: init generates the token,
//! creates its Secret on the real API server, prints it in the join command (never in its log),
//! and a worker joins the real cluster with the printed token, to a Ready Node.

use super::cluster::*;
use crate::common::*;

/// The init fixture whose only bootstrap token entry has no token.
fn tokenless_config() -> String {
    let fixture = fixture!("real/init.yaml");
    let entry = format!("- token: {TOKEN}\n  description: real-component tests\n");
    assert!(fixture.contains(&entry), "the init fixture's token entry changed:\n{fixture}");
    fixture.replacen(&entry, "- description: made by init\n  ttl: 2h0m0s\n", 1)
}

#[test]
fn a_tokenless_bootstrap_token_is_generated_created_printed_and_joins() {
    let mut c = Cluster::init_from(Tool::Kubestrap, &tokenless_config(), "24h", "", &[], &[]);

    let out = c.init.stdout();
    let token = out
        .split_whitespace()
        .skip_while(|w| *w != "--token")
        .nth(1)
        .unwrap_or_else(|| panic!("no --token in the join command:\n{out}"));
    assert!(kubestrap::token::is_valid_token(token), "{token}");
    assert_ne!(token, TOKEN);
    let (id, secret) = token.split_once('.').unwrap();
    for (run, err) in [("init --on-disk-only", c.first.stderr()), ("init", c.init.stderr())] {
        assert!(!err.contains(secret), "{run} logged the generated secret:\n{err}");
    }

    // Its Secret, read back with the real kubectl: the printed token, the entry's description.
    let name = format!("bootstrap-token-{id}");
    let obj = c.get(&["-n", "kube-system", "secret", &name]);
    assert_eq!(obj["type"], "bootstrap.kubernetes.io/token", "{obj}");
    let data = |k: &str| {
        let b64 = obj["data"][k].as_str().unwrap_or_else(|| panic!("{name} has no {k}: {obj}"));
        String::from_utf8(kubestrap::kubeconfig::decode_b64(b64).unwrap()).unwrap()
    };
    assert_eq!(data("token-id"), id);
    assert_eq!(data("token-secret"), secret);
    assert_eq!(data("description"), "made by init");
    // Only the configured entry: no second, default token.
    let secrets = c.get(&["-n", "kube-system", "secrets"]);
    let tokens: Vec<&str> = secrets["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|s| {
            s["type"] == "bootstrap.kubernetes.io/token"
                || s["metadata"]["name"].as_str().is_some_and(|n| n.starts_with("bootstrap-token-"))
        })
        .filter_map(|s| s["metadata"]["name"].as_str())
        .collect();
    assert_eq!(tokens, [name.as_str()], "exactly one bootstrap token Secret");

    // A worker joins with the printed token once the signer has signed cluster-info for it.
    c.wait_cluster_info_signed_for(id);
    let join = fixture!("real/join.yaml");
    assert!(join.contains(TOKEN), "the join fixture's token changed:\n{join}");
    let r = c.join("worker-1", 21, &join.replace(TOKEN, token), &[]);
    assert_eq!(r.code(), 0, "join with the printed token failed:\n{}\n{}", r.stderr(), c.status());
    assert!(!r.stderr().contains(secret) && !r.stdout().contains(secret), "join showed the secret:\n{}", r.stderr());
    c.wait_ready("worker-1");
    let by: Vec<String> =
        c.bootstrap_csrs().iter().filter_map(|r| r["spec"]["username"].as_str().map(str::to_string)).collect();
    assert!(
        !by.is_empty() && by.iter().all(|u| *u == format!("system:bootstrap:{id}")),
        "worker-1's TLS bootstrap was not the printed token's: {by:?}"
    );
}
