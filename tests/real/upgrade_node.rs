//! `kubestrap upgrade node` on a worker beside the real `kubeadm upgrade node` on its twin, on
//! the cluster of join_parity.rs: the kubelet-config ConfigMap changes as `kubeadm upgrade
//! apply` rewrites it; a dry run changes nothing and shows the new config.yaml; then each tool
//! upgrades its worker. Both print kubeadm's lines, back up the old config.yaml under
//! /etc/kubernetes/tmp/kubeadm-kubelet-config-<stamp>/, and leave the same files (the parity
//! facts, compared again); the kubelets keep running and the Nodes stay Ready. On a control
//! plane a dry run writes nothing (its upgrade is upgrade_apply.rs's).
//!
//! A worker upgraded in place, on the real kubelets of both versions: a v1.36.3 worker joins the
//! v1.37.2 cluster (a kubelet one minor older: allowed skew) and goes Ready; after the
//! ConfigMap change, `kubestrap upgrade node`, then the node restarts with the v1.37.2 kubelet
//! (what a package upgrade or the next image does): its Node reports v1.37.2 and the new
//! config's `maxPods` as its capacity.

use std::path::Path;

use super::cluster::*;
use super::host::Host;
use super::join_parity::compare;
use crate::common::{Lcg, fixture};

const OLD: &str = "v1.36.3";
const NEW: &str = "v1.37.2";

fn kubelet_version(c: &Cluster, node: &str) -> String {
    c.get(&["node", node])["status"]["nodeInfo"]["kubeletVersion"].as_str().unwrap_or_default().to_string()
}

/// A v1.36.3 worker `name` joins the (v1.37.2) cluster with kubestrap and goes Ready.
pub fn join_older_worker(c: &mut Cluster, name: &str, i: usize) {
    c.set_version(name, OLD);
    let r = c.join(name, i, fixture!("real/join.yaml"), &[]);
    assert_eq!(r.code(), 0, "a {OLD} worker joining {NEW}:\n{}\n{}", r.stderr(), c.status());
    c.wait_ready(name);
    assert_eq!(kubelet_version(c, name), OLD);
}

/// `kubestrap upgrade node` on the older worker `name`, then its node restarted with the
/// v1.37.2 kubelet: the Node reports v1.37.2, Ready, with the cluster's new maxPods.
pub fn upgrade_in_place(c: &mut Cluster, name: &str) {
    let i = c.hosts.iter().position(|h| h.name == name).expect("host");
    let root = c.hosts[i].root.display().to_string();
    let args = ["upgrade", "node", "--root", root.as_str()];
    // A power cut as it backs up and rewrites config.yaml: the file is then the old one or the new
    // one, whole, and the rerun completes.
    let config = at(&c.hosts[i].root, "/var/lib/kubelet/config.yaml");
    let old = std::fs::read_to_string(&config).expect("the worker's config.yaml");
    let log = c.logs.with_file_name(format!("{name}-upgrade-node-killed"));
    let aim = ("[upgrade] Backing up kubelet config file to", 3_000);
    // Less than a millisecond of work follows the line: a late kill finds the run ended, so the
    // old file is put back and the kill tried again, sooner.
    let reset = || std::fs::write(&config, &old).expect("put the old config.yaml back");
    let rng = &mut Lcg(0x5eed_0005);
    let shot = super::kills::kill_landing(&c.hosts[i].netns, &args, aim, rng, &|| c.health(), &log, 12, &reset);
    println!("upgrade node killed as it rewrote config.yaml: {}", shot.describe());
    let cut = std::fs::read_to_string(&config).expect("config.yaml after the kill");
    let whole = if cut == old { "the old one" } else { "the new one" };
    assert!(cut == old || cut.contains("maxPods: 150\n"), "config.yaml after the kill is neither whole file:\n{cut}");
    println!("config.yaml after the kill: {whole}, whole");
    let r = run_in(&c.hosts[i].netns, &args);
    assert_eq!(r.code(), 0, "upgrade node on the {OLD} worker:\n{}", r.stderr());
    let new = std::fs::read_to_string(&config).expect("config.yaml");
    assert!(new.contains("maxPods: 150\n"), "the rerun wrote the cluster's config:\n{new}");
    assert_eq!(kubelet_version(c, name), OLD, "upgrade node restarted nothing");
    let (netns, scratch) = c.hosts.remove(i).power_off();
    let scratch = scratch.expect("the worker's root");
    let w = scratch.root();
    c.set_version(name, NEW);
    let logs = c.logs.with_file_name(name);
    c.hosts.push(Host::start_at(c.version(name), name, netns, &w, &logs, Some(scratch), false));
    c.wait(&format!("{name}'s Node reporting the {NEW} kubelet"), || (kubelet_version(c, name) == NEW).then_some(()));
    c.wait_ready(name);
    let pods = c.get(&["node", name])["status"]["capacity"]["pods"].clone();
    assert_eq!(pods, "150", "the {NEW} kubelet runs the upgraded config.yaml (maxPods 150)");
}

/// The cluster's KubeletConfiguration changes, as `upgrade apply`'s upload-config rewrites it.
pub fn set_max_pods(c: &Cluster, n: u32) {
    let cm = c.get(&["-n", "kube-system", "configmap", "kubelet-config"]);
    let mut kc: serde_yaml::Mapping =
        serde_yaml::from_str(cm["data"]["kubelet"].as_str().expect("data.kubelet")).unwrap();
    kc.insert("maxPods".into(), n.into());
    c.set_config_data("kubelet-config", serde_json::json!({ "kubelet": serde_yaml::to_string(&kc).unwrap() }));
}

/// The backup directories `upgrade node` left under a node root's /etc/kubernetes/tmp.
fn backups(root: &Path) -> Vec<std::path::PathBuf> {
    let tmp = at(root, "/etc/kubernetes/tmp");
    let Ok(dir) = std::fs::read_dir(&tmp) else { return Vec::new() };
    let mut v: Vec<_> = dir
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("kubeadm-kubelet-config-")))
        .collect();
    v.sort();
    v
}

/// Every file under a root with its content, to show a dry run wrote nothing.
fn tree(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for top in ["etc/kubernetes", "var/lib/kubelet"] {
        let mut stack = vec![root.join(top)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let (p, t) = (e.path(), e.file_type().expect("file type"));
                if t.is_dir() {
                    stack.push(p);
                } else if t.is_file() && !p.starts_with(root.join("var/lib/kubelet/pods")) {
                    out.push((p.display().to_string(), std::fs::read(&p).unwrap_or_default()));
                }
            }
        }
    }
    out.sort();
    out
}

/// kubeadm's `[upgrade...]`/`[kubelet-start]` lines, the backup's stamp left out.
fn workflow_lines(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.find('[').map(|i| &l[i..]))
        .filter(|l| l.starts_with("[upgrade") || l.starts_with("[kubelet-start]"))
        .map(|l| match l.find("kubeadm-kubelet-config-") {
            Some(i) => format!("{}kubeadm-kubelet-config-DATE/config.yaml", &l[..i]),
            None => l.to_string(),
        })
        .collect()
}

/// Runs the upgrade of both workers on `c` (`ours` joined by kubestrap, `twin` by kubeadm, at
/// `started`), then compares them as join_parity does.
pub fn upgrade_workers(c: &Cluster, ours: (&str, usize), twin: (&str, usize), started: (i64, i64)) {
    let host = |n: &str| c.hosts.iter().find(|h| h.name == n).expect("host");
    let (mine, theirs) = (host(ours.0), host(twin.0));

    // On a control plane at the cluster's version, a dry run says what it would do and writes nothing.
    let cp = c.root();
    let r = run_in(&c.netns, &["upgrade", "node", "--dry-run", "--root", &cp.display().to_string()]);
    assert_eq!(r.code(), 0, "upgrade node --dry-run on a control plane:\n{}", r.stderr());
    assert!(
        r.stderr().contains("[dryrun] Would upgrade your static Pod-hosted control plane to version"),
        "{}",
        r.stderr()
    );
    assert!(backups(&cp).is_empty(), "a dry run wrote a backup");

    set_max_pods(c, 150);

    let before = tree(&mine.root);
    let old_config = std::fs::read(at(&mine.root, "/var/lib/kubelet/config.yaml")).unwrap();
    let root = mine.root.display().to_string();
    let dry = run_in(&mine.netns, &["upgrade", "node", "--dry-run", "--root", &root]);
    assert_eq!(dry.code(), 0, "upgrade node --dry-run:\n{}", dry.stderr());
    assert_eq!(tree(&mine.root), before, "a dry run changed the node's files");
    assert!(dry.stderr().contains("Would write file \"/var/lib/kubelet/config.yaml\""), "{}", dry.stderr());
    assert!(dry.stderr().contains("maxPods: 150"), "the dry run does not show the new config:\n{}", dry.stderr());

    let t = std::time::Instant::now();
    let r = run_in(&mine.netns, &["upgrade", "node", "--root", &root]);
    let ours_s = t.elapsed().as_secs_f64();
    assert_eq!(r.code(), 0, "kubestrap upgrade node:\n{}", r.stderr());
    let logs = c.logs.with_file_name(twin.0);
    let args = ["upgrade", "node", "--ignore-preflight-errors=all"];
    let t = std::time::Instant::now();
    let k = run_kubeadm(&theirs.netns, &theirs.root, &logs, &args, &|| c.health());
    let theirs_s = t.elapsed().as_secs_f64();
    assert_eq!(k.code(), 0, "kubeadm upgrade node:\n{}\n{}", k.stdout(), k.stderr());
    // bench/upgrade-node.sh reads this line.
    println!("upgrade-node: kubestrap {ours_s:.3} s | kubeadm {theirs_s:.3} s");

    // Every workflow line kubeadm printed (on stdout; kubestrap logs them).
    let (want, got) = (workflow_lines(&k.stdout()), workflow_lines(&r.stderr()));
    assert!(!want.is_empty(), "kubeadm printed no workflow line:\n{}", k.stdout());
    let missing: Vec<&String> = want.iter().filter(|l| !got.contains(l)).collect();
    assert!(missing.is_empty(), "kubeadm's lines kubestrap did not print: {missing:#?}\nkubestrap's: {got:#?}");

    for (h, what) in [(mine, "kubestrap"), (theirs, "kubeadm")] {
        let b = backups(&h.root);
        assert_eq!(b.len(), 1, "{what}: one backup directory, got {b:?}");
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&b[0]).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o700, "{what}: {} mode", b[0].display());
        let config = std::fs::read_to_string(at(&h.root, "/var/lib/kubelet/config.yaml")).unwrap();
        assert!(config.contains("maxPods: 150"), "{what}: config.yaml lacks the cluster's new field:\n{config}");
    }
    assert_eq!(
        std::fs::read(backups(&mine.root)[0].join("config.yaml")).unwrap(),
        old_config,
        "the backup is the old file"
    );
    for h in [mine, theirs] {
        h.health().unwrap_or_else(|e| panic!("{}'s kubelet after upgrade node: {e}", h.name));
    }
    c.wait_ready(ours.0);
    c.wait_ready(twin.0);
    compare(c, "join-worker-after-upgrade-node", ours, twin, started);
}
