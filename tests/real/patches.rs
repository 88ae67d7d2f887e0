//! kubeadm's patches on the real components: one patch directory (tests/fixtures/real-patches/,
//! written under the node root at /etc/kubernetes/patches and named by `patches.directory`)
//! with a JSON, a strategic and a merge patch across every kind of target. An init with it runs
//! the patched etcd and API server, the real kubelet loads the patched config.yaml, and the
//! patched CoreDNS Deployment and kube-proxy DaemonSet are what the real API server holds; a
//! worker and a control plane joined by kubestrap with it, and their twins joined by the real
//! `kubeadm join` with it, are the same nodes (tests/real/join_parity.rs's comparison).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde_json::{Value, json};

use super::cluster::*;
use super::join_parity::{compare, host_ca_dirs, kubeadm_join_with, now};
use super::net::Netns;
use crate::common::*;

/// Where the patch directory sits on every node.
const DIR: &str = "/etc/kubernetes/patches";

/// The patch directory: (file name, content).
const PATCHES: [(&str, &str); 6] = [
    ("corednsdeployment.yaml", fixture!("real-patches/corednsdeployment.yaml")),
    ("etcd+json.yaml", fixture!("real-patches/etcd+json.yaml")),
    ("kube-apiserver+json.yaml", fixture!("real-patches/kube-apiserver+json.yaml")),
    ("kube-apiserver.yaml", fixture!("real-patches/kube-apiserver.yaml")),
    ("kubeletconfiguration.yaml", fixture!("real-patches/kubeletconfiguration.yaml")),
    ("kubeproxydaemonset+merge.yaml", fixture!("real-patches/kubeproxydaemonset+merge.yaml")),
];

/// What the patches add to the static Pods' commands (one flag each).
const APISERVER_FLAG: &str = "--max-requests-inflight=444";
const ETCD_FLAG: &str = "--quota-backend-bytes=4294967296";

/// The patch directory as node files.
fn files() -> Vec<(String, &'static str)> {
    PATCHES.iter().map(|(name, text)| (format!("{DIR}/{name}"), *text)).collect()
}

/// `template` (a kubeadm config of the fixtures) naming the patch directory, in the document
/// that holds the line `before`.
fn with_patches(template: &str, before: &str) -> String {
    assert_eq!(template.matches(before).count(), 1, "one {before:?} in\n{template}");
    template.replace(before, &format!("patches:\n  directory: {DIR}\n{before}"))
}

/// `[patches] Applied patch ...` for a patch of `mime` (without `application/`) on `target`.
fn applied(mime: &str, target: &str) -> String {
    format!("[patches] Applied patch of type \"application/{mime}\" to target \"{target}\"")
}

/// The command lines of the processes running `binary` in `netns`.
fn running(netns: &Netns, binary: &str) -> Vec<Vec<String>> {
    let ino = std::fs::metadata(format!("/run/netns/{}", netns.name)).expect("the node's netns").ino();
    let want = format!("net:[{ino}]");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        if !e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let p = e.path();
        // A process may end while we look: then it is not running.
        if std::fs::read_link(p.join("ns/net")).ok().is_none_or(|l| l.to_string_lossy() != want) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(p.join("cmdline")) else { continue };
        let argv: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if argv.first().is_some_and(|a| Path::new(a).file_name().is_some_and(|f| f == binary)) {
            out.push(argv);
        }
    }
    out
}

/// Waits until `binary` runs on host `i` with `flag` on its command line.
fn wait_running_with(c: &Cluster, i: usize, binary: &str, flag: &str) {
    let h = &c.hosts[i];
    c.wait(&format!("{binary} running on {} with {flag}", h.name), || {
        running(&h.netns, binary).iter().any(|argv| argv.iter().any(|a| a == flag)).then_some(())
    });
}

/// A node's /var/lib/kubelet/config.yaml.
fn kubelet_config(root: &Path) -> serde_yaml::Value {
    let text = std::fs::read_to_string(at(root, "/var/lib/kubelet/config.yaml")).expect("config.yaml");
    serde_yaml::from_str(&text).expect("config.yaml is YAML")
}

/// The configuration the real kubelet of `node` runs with, read through the API server's proxy
/// to its /configz.
fn running_kubelet_config(c: &Cluster, node: &str) -> Value {
    let path = format!("/api/v1/nodes/{node}/proxy/configz");
    c.wait(&format!("{node}'s kubelet /configz"), || {
        let (code, out, _) = c.kubectl(&["get", "--raw", &path]);
        let v: Value = serde_json::from_str(&out).ok().filter(|_| code == 0)?;
        Some(v["kubeletconfig"].clone())
    })
}

#[test]
fn init_with_patches_runs_the_patched_components() {
    let template = with_patches(fixture!("real/init.yaml"), "localAPIEndpoint:\n");
    let files = files();
    let node_files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), *t)).collect();
    // Ends with cp-1 Ready (its kubelet up on the patched config.yaml).
    let c = Cluster::init_from(Tool::Kubestrap, &template, "24h", "", &[], &node_files);
    let root = c.root();

    // kubeadm's log line for every patch, in kubestrap's log (the on-disk run, then the API one).
    let log = [c.first.stdout(), c.first.stderr(), c.init.stdout(), c.init.stderr()].concat();
    for (mime, target) in [
        ("json-patch+json", "etcd"),
        ("json-patch+json", "kube-apiserver"),
        ("strategic-merge-patch+json", "kube-apiserver"),
        ("strategic-merge-patch+json", "kubeletconfiguration"),
        ("strategic-merge-patch+json", "corednsdeployment"),
        ("merge-patch+json", "kubeproxydaemonset"),
    ] {
        let line = applied(mime, target);
        assert!(log.contains(&line), "no {line:?} in kubestrap's log:\n{log}");
    }

    // The static Pods run with the patched commands: the real processes' own command lines.
    wait_running_with(&c, 0, "kube-apiserver", APISERVER_FLAG);
    wait_running_with(&c, 0, "etcd", ETCD_FLAG);
    c.wait_probes(0);

    // The real kubelet made the API server's mirror Pod from the patched manifest.
    let mirror = c.wait("kube-apiserver-cp-1's mirror Pod", || {
        let (code, out, _) = c.kubectl(&["-n", "kube-system", "get", "pod", "kube-apiserver-cp-1", "-o", "json"]);
        serde_json::from_str::<Value>(&out).ok().filter(|_| code == 0)
    });
    assert!(mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_string(), "a mirror Pod: {mirror}");
    let container = &mirror["spec"]["containers"][0];
    assert_eq!(container["resources"]["requests"], json!({"cpu": "300m", "memory": "200Mi"}), "{mirror}");
    let command = container["command"].as_array().expect("command");
    assert_eq!(command.last(), Some(&json!(APISERVER_FLAG)), "the JSON patch appends: {command:?}");

    // The addons as the real API server holds them: one CoreDNS replica (kubeadm's default is
    // two), kube-proxy's Pod template annotated.
    let dns = c.get(&["-n", "kube-system", "deployment", "coredns"]);
    assert_eq!(dns["spec"]["replicas"], 1, "{dns}");
    let proxy = c.get(&["-n", "kube-system", "daemonset", "kube-proxy"]);
    assert_eq!(proxy["spec"]["template"]["metadata"]["annotations"]["example.com/patched"], "kubeproxydaemonset");

    // The kubelet's file is patched, the cluster's kubelet-config is not (kubeadm patches only
    // what it writes), and the running kubelet loaded the patched value.
    let config = kubelet_config(&root);
    assert_eq!(config["eventRecordQPS"], serde_yaml::Value::from(7), "{config:?}");
    let cm = c.get(&["-n", "kube-system", "configmap", "kubelet-config"]);
    let cluster: serde_yaml::Value = serde_yaml::from_str(cm["data"]["kubelet"].as_str().expect("kubelet")).unwrap();
    assert_ne!(cluster["eventRecordQPS"], serde_yaml::Value::from(7), "the ConfigMap is unpatched: {cluster:?}");
    assert_eq!(running_kubelet_config(&c, "cp-1")["eventRecordQPS"], 7);
    assert!(!running(&c.netns, "kubelet").is_empty(), "cp-1's kubelet runs");
    c.wait_ready("cp-1");
}

/// kubestrap join of `name` at `addr(i)` from `template`, on a root holding `files`; with
/// `ca_dirs` the host's CA bundle directories too (a control plane mounts them).
fn kubestrap_join(
    c: &mut Cluster,
    name: &str,
    i: usize,
    template: &str,
    files: &[(String, &str)],
    ca_dirs: bool,
) -> Run {
    let w = Scratch::new("");
    let root = w.root();
    if ca_dirs {
        host_ca_dirs(&root);
    }
    for (path, text) in files {
        write_file(&at(&root, path), text);
    }
    std::fs::write(w.config(), c.fill_node(template, name, i, &root)).unwrap();
    let args = ["join", "--config", &w.config(), "--root", &w.root_str()].map(str::to_string).to_vec();
    c.node(name, i, w, &[args]).remove(0)
}

/// A run's `[patches]` lines, from the tag on.
fn patch_lines(r: &Run) -> Vec<String> {
    let log = [r.stdout(), r.stderr()].concat();
    log.lines().filter_map(|l| l.find("[patches]").map(|i| l[i..].to_string())).collect()
}

/// kubestrap's `[patches]` lines are kubeadm's (the directory read, the files found, each patch
/// applied in the same order), but for kubeadm's last: its kubelet-wait-bootstrap phase patches
/// the kubelet's config once more, in memory, for the healthz address it waits on. kubestrap
/// has no such phase (it does the TLS bootstrap itself; a control plane's wait reads the
/// patched config.yaml).
fn same_patch_lines(ours: &[String], theirs: &[String]) {
    let extra = applied("strategic-merge-patch+json", "kubeletconfiguration");
    assert_eq!(theirs.last(), Some(&extra), "kubeadm's:\n{theirs:#?}");
    assert_eq!(ours, &theirs[..theirs.len() - 1], "kubestrap's [patches] lines vs kubeadm's");
}

#[test]
fn kubestrap_join_and_kubeadm_join_apply_the_same_patches() {
    let mut c = Cluster::init_with("24h", "controlPlaneEndpoint: 192.0.2.10:{port}\n", &["--upload-certs"]);
    let out = c.init.stdout();
    let key = out.split_whitespace().skip_while(|w| *w != "--certificate-key").nth(1).expect("key").to_string();
    c.wait_cluster_info_signed();
    let files = files();
    let host = |c: &Cluster, name: &str| c.hosts.iter().position(|h| h.name == name).expect("host");

    // Workers: only the kubeletconfiguration patch applies (then kubeadm's instance-config one).
    let worker = with_patches(fixture!("real/join.yaml"), "discovery:\n");
    let t = (now(), 0);
    let r = kubestrap_join(&mut c, "worker-1", 21, &worker, &files, false);
    assert_eq!(r.code(), 0, "{}\n{}", r.stderr(), c.status());
    let ours = patch_lines(&r);
    let t = (t.0, now());
    let r = kubeadm_join_with(&mut c, "worker-2", 22, &worker, &files);
    assert_eq!(r.code(), 0, "kubeadm join:\n{}\n{}\n{}", r.stdout(), r.stderr(), c.status());
    let kubelet_line = applied("strategic-merge-patch+json", "kubeletconfiguration");
    assert_eq!(ours[2..], [kubelet_line.clone(), kubelet_line.clone()], "{ours:#?}");
    same_patch_lines(&ours, &patch_lines(&r));
    for name in ["worker-1", "worker-2"] {
        c.wait_ready(name);
        let root = &c.hosts[host(&c, name)].root;
        assert_eq!(kubelet_config(root)["eventRecordQPS"], serde_yaml::Value::from(7), "{name}");
        assert_eq!(running_kubelet_config(&c, name)["eventRecordQPS"], 7, "{name}'s kubelet");
    }
    compare(&c, "join-worker", ("worker-1", 21), ("worker-2", 22), t);

    // Control planes: the etcd and API server patches too, on a real etcd learner.
    let cp = with_patches(&fixture!("real/join-control-plane.yaml").replace("{key}", &key), "discovery:\n");
    let t = (now(), 0);
    let r = kubestrap_join(&mut c, "cp-2", 1, &cp, &files, true);
    assert_eq!(r.code(), 0, "{}\n{}", r.stderr(), c.status());
    let ours = patch_lines(&r);
    let t = (t.0, now());
    let r = kubeadm_join_with(&mut c, "cp-3", 2, &cp, &files);
    assert_eq!(r.code(), 0, "kubeadm join --control-plane:\n{}\n{}\n{}", r.stdout(), r.stderr(), c.status());
    let want = [
        applied("json-patch+json", "kube-apiserver"),
        applied("strategic-merge-patch+json", "kube-apiserver"),
        kubelet_line.clone(),
        kubelet_line,
        applied("json-patch+json", "etcd"),
    ];
    assert_eq!(ours[2..], want, "{ours:#?}");
    same_patch_lines(&ours, &patch_lines(&r));
    for name in ["cp-2", "cp-3"] {
        c.wait_ready(name);
        let i = host(&c, name);
        wait_running_with(&c, i, "kube-apiserver", APISERVER_FLAG);
        wait_running_with(&c, i, "etcd", ETCD_FLAG);
        let requests = &c.hosts[i].pod("kube-apiserver").doc["spec"]["containers"][0]["resources"]["requests"];
        assert_eq!(requests["cpu"].as_str(), Some("300m"), "{name}: {requests:?}");
        assert_eq!(requests["memory"].as_str(), Some("200Mi"), "{name}: {requests:?}");
        assert_eq!(running_kubelet_config(&c, name)["eventRecordQPS"], 7, "{name}'s kubelet");
    }
    compare(&c, "join-control-plane", ("cp-2", 1), ("cp-3", 2), t);
}
