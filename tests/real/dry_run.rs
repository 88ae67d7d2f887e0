//! `init --dry-run` against the real API server: the objects a dry run plans are, in order, the
//! writes a real init of the same config then makes, as the real kube-apiserver v1.37.2's audit
//! log records them (kubestrap's successful mutating requests).

use serde_json::Value;

use super::cluster::*;
use crate::common::*;

// The API server writes every request to an audit log under cp-1's /etc/kubernetes, as for
// the peers' tests.
use super::peers::{AUDIT, POLICY, audit};
const POLICY_PATH: &str = "/etc/kubernetes/audit/policy.yaml";

/// A plan's verb as the HTTP method that makes it.
fn plan_method(verb: &str) -> &'static str {
    match verb {
        "create" => "POST",
        "update" => "PUT",
        "patch" => "PATCH",
        "delete" => "DELETE",
        other => panic!("unexpected verb {other} in the plan"),
    }
}

/// The HTTP method of a mutating request from its audit verb (the API server's, derived from the
/// method: a resource's create/update/patch/delete, a non-resource path's lowercase method);
/// None for reads.
fn audit_method(verb: &str) -> Option<&'static str> {
    match verb {
        "create" | "post" => Some("POST"),
        "update" | "put" => Some("PUT"),
        "patch" => Some("PATCH"),
        "delete" | "deletecollection" => Some("DELETE"),
        _ => None,
    }
}

fn code(e: &Value) -> u64 {
    e["responseStatus"]["code"].as_u64().unwrap_or(0)
}

/// The acceptance check of `init --dry-run`: its plan, of the config the real cluster was inited
/// from, lists exactly the writes the real init made, in order. (The real init is told
/// --skip-token-print, which withholds the token it prints.)
#[test]
fn init_dry_run_lists_what_a_real_init_creates() {
    let c = Cluster::init_by(Tool::Kubestrap, "24h", AUDIT, &["--skip-token-print"], &[(POLICY_PATH, POLICY)]);
    let out = c.init.stdout();
    assert!(out.contains("--token <value withheld>"), "{out}");
    assert!(!out.contains(TOKEN), "--skip-token-print printed the token:\n{out}");

    // The plan of the very config the cluster was inited from, on an empty root.
    let config = std::fs::read_to_string(c.scratch.config()).expect("the cluster's config");
    let dry = Scratch::new(&config);
    let r = dry.init_full(&["--dry-run"]).ok();
    assert!(snapshot(&dry.root()).is_empty(), "a dry run wrote under the root");
    let plan: Value = serde_json::from_str(&r.stdout())
        .unwrap_or_else(|e| panic!("stdout is not one JSON plan ({e}):\n{}", r.stdout()));
    let planned: Vec<(String, String)> = plan["objects"]
        .as_array()
        .unwrap_or_else(|| panic!("no objects list: {plan}"))
        .iter()
        .map(|o| {
            let (verb, path) = (o["verb"].as_str().expect("verb"), o["path"].as_str().expect("path"));
            (plan_method(verb).to_string(), path.to_string())
        })
        .collect();
    assert!(!planned.is_empty(), "the plan lists no object:\n{plan}");

    // What init did: kubestrap's requests (its user agent, whichever kubeconfig's user), complete.
    let events = audit(&c);
    let mine: Vec<&Value> = events
        .iter()
        .filter(|e| e["userAgent"].as_str().is_some_and(|a| a.starts_with("kubestrap/")))
        .filter(|e| e["stage"] == "ResponseComplete")
        .collect();
    let trace: String = mine
        .iter()
        .map(|e| {
            let (verb, uri, user) = (&e["verb"], &e["requestURI"], &e["user"]["username"]);
            format!("{verb} {uri} {} as {user}\n", code(e))
        })
        .collect();
    let writes = mine.iter().filter_map(|e| audit_method(e["verb"].as_str()?).map(|m| (m, *e)));
    let (made, refused): (Vec<_>, Vec<_>) = writes.partition(|(_, e)| (200..300).contains(&code(e)));
    let made: Vec<(String, String)> =
        made.iter().map(|(m, e)| (m.to_string(), e["requestURI"].as_str().expect("requestURI").to_string())).collect();
    assert_eq!(planned, made, "the dry run's plan differs from what init did; kubestrap's requests:\n{trace}");

    // For the record: the writes the API server refused on the way (admin.conf before its
    // ClusterRoleBinding, and the like), which the plan rightly leaves out.
    let refused: Vec<String> = refused.iter().map(|(m, e)| format!("{m} {} {}", e["requestURI"], code(e))).collect();
    println!(
        "dry_run: {} planned writes, all made in order ({} kubestrap requests; refused writes: {refused:?})",
        planned.len(),
        mine.len()
    );
}
