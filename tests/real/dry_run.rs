//! `init --dry-run` and `join --dry-run` against the real API server: the objects a dry run plans
//! are, in order, the requests a real init or join of the same config then makes, as the real
//! kube-apiserver v1.37.2's audit log records them; a join's planned files are the files it writes.

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

/// Every file under `root` (symlinks as themselves), as (node path, mode or None for a link).
fn files(root: &std::path::Path) -> Vec<(String, Option<u32>)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let meta = std::fs::symlink_metadata(e.path()).expect("lstat");
            let node = format!("/{}", e.path().strip_prefix(root).expect("under root").display());
            if meta.is_dir() {
                stack.push(e.path());
            } else {
                let mode = (!meta.file_type().is_symlink()).then(|| meta.permissions().mode() & 0o7777);
                out.push((node, mode));
            }
        }
    }
    out.sort();
    out
}

/// A planned path (`<timestamp>` standing for the kubelet's date stamp) matches a written one.
fn path_matches(planned: &str, written: &str) -> bool {
    match planned.split_once("<timestamp>") {
        None => planned == written,
        Some((head, tail)) => {
            written.starts_with(head) && written.ends_with(tail) && written.len() > planned.len() - 11
        }
    }
}

/// The acceptance check of `join --dry-run` (a worker): on the node it then joins for real, its
/// plan's files are the files the join wrote (path and mode; what the kubelet writes itself
/// left out, and bootstrap-kubelet.conf, which the join removes when done), and its plan's requests are the requests
/// the join made, in order, as the real API server's audit log records them from the node's
/// address (each pair once, a read of what the join created left out, as the plan's rule says;
/// the CSR's generated name masked), each as the user the plan says.
#[test]
fn join_dry_run_lists_what_a_real_join_writes_and_asks() {
    let mut c = Cluster::init_by(Tool::Kubestrap, "24h", AUDIT, &[], &[(POLICY_PATH, POLICY)]);
    c.wait_cluster_info_signed();
    let w = Scratch::new("");
    std::fs::write(w.config(), c.fill_node(fixture!("real/join.yaml"), "worker-1", 20, &w.root())).expect("config");
    let (config, root) = (w.config(), w.root());
    let root_arg = root.display().to_string();
    let (dry, join, since) = c.node_then("worker-1", 20, w, |c, host, logs| {
        let dry = run_in(&host.netns, &["join", "--config", &config, "--root", &root_arg, "--dry-run"]);
        let since = time::OffsetDateTime::now_utc();
        let args = ["join", "--config", config.as_str(), "--root", root_arg.as_str()];
        let join = run_watched(&host.netns, &args, logs, &|| c.health().and_then(|_| host.health()));
        (dry, join, since)
    });
    assert_eq!(dry.code(), 0, "join --dry-run:\n{}", dry.stderr());
    assert_eq!(join.code(), 0, "join:\n{}\n{}", join.stderr(), c.status());
    let plan: Value = serde_json::from_str(&dry.stdout()).unwrap_or_else(|e| panic!("{e}:\n{}", dry.stdout()));

    // Files: each planned one written with its mode (a link's mode is its target's); each one
    // the join owns (under /etc/kubernetes, the kubelet's config and identity) planned.
    let written = files(&root);
    let planned: Vec<(&str, &str)> = ["files", "filesFromCluster"]
        .iter()
        .flat_map(|k| plan[*k].as_array().expect("a file list"))
        .map(|f| (f["path"].as_str().expect("path"), f["mode"].as_str().expect("mode")))
        .collect();
    let removed_when_done = ["/etc/kubernetes/bootstrap-kubelet.conf"];
    for (path, mode) in &planned {
        if removed_when_done.contains(path) {
            assert!(!written.iter().any(|(p, _)| p == path), "{path} is left after the join");
            continue;
        }
        let found = written.iter().find(|(p, _)| path_matches(path, p));
        let Some((p, m)) = found else { panic!("planned {path} was not written: {written:?}") };
        // A link names a node path: its target is read under the root.
        let real = m.unwrap_or_else(|| {
            use std::os::unix::fs::PermissionsExt;
            let link = std::fs::read_link(root.join(p.trim_start_matches('/'))).expect("a link");
            let target = root.join(link.strip_prefix("/").unwrap_or(&link));
            std::fs::metadata(target).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0)
        });
        assert_eq!(format!("{real:04o}"), *mode, "{p}: the planned mode");
    }
    let owned = |p: &str| {
        p.starts_with("/etc/kubernetes/")
            || [
                "/var/lib/kubelet/config.yaml",
                "/var/lib/kubelet/kubeadm-flags.env",
                "/var/lib/kubelet/instance-config.yaml",
            ]
            .contains(&p)
            || p.starts_with("/var/lib/kubelet/pki/kubelet-client-")
    };
    let unplanned: Vec<&String> = written
        .iter()
        .map(|(p, _)| p)
        .filter(|p| owned(p) && !planned.iter().any(|(q, _)| path_matches(q, p)))
        .collect();
    assert!(unplanned.is_empty(), "the join wrote files its plan does not list: {unplanned:?}");
    let files_planned = planned.len();

    // Requests: kubestrap's, from the node's address, after the dry run.
    let events = audit(&c);
    let ip = addr(20);
    let user = |as_: &str| match as_ {
        "anonymous" => "system:anonymous".to_string(),
        "bootstrap token" => format!("system:bootstrap:{}", TOKEN.split('.').next().expect("token id")),
        other => panic!("unexpected plan user {other}"),
    };
    let mask = |path: &str| {
        let path = path.split('?').next().unwrap_or(path);
        match path.rsplit_once("/certificatesigningrequests/") {
            Some((head, _)) => format!("{head}/certificatesigningrequests/<csr-name>"),
            None => path.to_string(),
        }
    };
    // The plan's rule (src/join/dry_run/objects.rs): each read once, and a read of what the run
    // created (the CSR, read back before its watch) adds nothing.
    let mut made: Vec<(String, String, String)> = Vec::new();
    let mut created: Vec<String> = Vec::new();
    for e in events.iter().filter(|e| {
        e["userAgent"].as_str().is_some_and(|a| a.starts_with("kubestrap/"))
            && e["sourceIPs"].as_array().is_some_and(|ips| ips.iter().any(|i| *i == ip.as_str()))
            && e["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok())
                .is_some_and(|t| t >= since)
    }) {
        let r = (
            e["verb"].as_str().unwrap_or_default().to_string(),
            mask(e["requestURI"].as_str().unwrap_or_default()),
            e["user"]["username"].as_str().unwrap_or_default().to_string(),
        );
        if r.0 == "create" {
            created.push(r.1.clone());
        }
        let of_created = r.0 == "get" && r.1.rsplit_once('/').is_some_and(|(c, _)| created.iter().any(|x| x == c));
        if !of_created && !made.contains(&r) {
            made.push(r);
        }
    }
    let planned: Vec<(String, String, String)> = plan["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .map(|o| {
            (
                o["verb"].as_str().unwrap().to_string(),
                mask(o["path"].as_str().unwrap()),
                user(o["as"].as_str().unwrap()),
            )
        })
        .collect();
    assert_eq!(planned, made, "join --dry-run's requests differ from the real join's");
    println!("join dry run: {files_planned} planned files as written, {} planned requests made in order", made.len());
}
