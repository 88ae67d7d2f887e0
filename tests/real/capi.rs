//! Cluster API's bootstrap data (tests/fixtures/user-data/) booted unchanged on the real
//! components but for what the test host needs: the endpoint moved to the test LAN, and each
//! node's CRI socket, node IP and cgroup root (plus the cluster's cgroup-v1 kubelet settings,
//! see real/init.yaml). The first control plane inits from CAPI's CA, the worker joins, a second
//! control plane joins with CAPI's copied CAs (manual-copy mode) and a real etcd learner, and
//! hand-written `runcmd: kubeadm join` user-data joins too.

use super::cluster::*;
use crate::common::*;

const SENTINEL: &str = "/run/cluster-api/bootstrap-success.complete";

/// The test host's settings added to a CAPI kubeadm document's nodeRegistration (its indent is
/// 8 spaces inside write_files): this node's CRI socket, node IP and cgroup root.
fn test_host(user_data: &str, ip: &str, name: &str) -> String {
    let args = "        kubeletExtraArgs:\n        - name: cloud-provider\n          value: external\n";
    let name_line = "        name: '{{ ds.meta_data.local_hostname }}'\n";
    assert!(user_data.contains(args) && user_data.contains(name_line), "CAPI's nodeRegistration changed");
    let out = user_data
        .replace("127.0.0.1:6443", "{addr}:{port}")
        .replace(
            args,
            &format!(
                "{args}        - name: node-ip\n          value: {ip}\n        - name: cgroup-root\n          value: /kubestrap-{name}\n"
            ),
        )
        .replace(name_line, &format!("{name_line}        criSocket: {{cri}}\n"));
    assert_eq!(out.matches("{addr}:{port}").count(), 1, "one endpoint rewritten");
    out
}

/// The PEM block of `path` inside the user-data's write_files (the 6-space indented content).
fn written_content(user_data: &str, path: &str) -> String {
    let start = user_data.find(&format!("-   path: {path}\n")).expect("entry");
    let body = &user_data[start..];
    let content = body.find("content: |\n").expect("content") + "content: |\n".len();
    let block: String =
        body[content..].lines().take_while(|l| l.starts_with("      ")).map(|l| format!("{}\n", &l[6..])).collect();
    format!("{}\n", block.trim_end())
}

fn read(root: &std::path::Path, path: &str) -> String {
    std::fs::read_to_string(at(root, path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Boots `user_data` (already filled) on a new node `name` at `addr(i)`; both stages must pass.
fn boot(c: &mut Cluster, name: &str, i: usize, user_data: &str) -> (Vec<Run>, std::path::PathBuf) {
    let w = Scratch::new("");
    let root = w.root();
    seed(&root, &c.fill_node(user_data, name, i, &root), name);
    let runs = c.boot_node_in(name, i, w);
    for r in &runs {
        assert_eq!(r.code(), 0, "{name}:\n{}\n{}\n{}", r.stdout(), r.stderr(), c.status());
        assert!(!r.stdout().contains(SECRET) && !r.stderr().contains(SECRET), "token secret leaked");
    }
    assert_eq!(runs.len(), 2);
    (runs, root)
}

#[test]
fn cluster_api_user_data_boots_unchanged_on_the_real_components() {
    let ud = fixture!("user-data/capi-control-plane-init/user-data");
    let kubelet = "        taints: null\n      \n";
    assert!(ud.contains(kubelet));
    let init = test_host(ud, CP_ADDR, "cp-1")
        .replace("localAPIEndpoint: {}", "localAPIEndpoint: {advertiseAddress: {addr}, bindPort: {port}}")
        .replace(
            kubelet,
            "        taints: null\n      ---\n      apiVersion: kubelet.config.k8s.io/v1beta1\n      kind: KubeletConfiguration\n      \
             failCgroupV1: false\n      cgroupDriver: cgroupfs\n      evictionHard:\n        memory.available: 100Mi\n        nodefs.available: 1%\n        nodefs.inodesFree: 1%\n        imagefs.available: 1%\n        imagefs.inodesFree: 1%\n      imageGCHighThresholdPercent: 100\n      imageGCLowThresholdPercent: 99\n",
        );
    let mut c = Cluster::boot(&init);
    let root = c.root();
    // write_files: CAPI's CA is the cluster's, with CAPI's modes; the Jinja variable rendered.
    assert_eq!(read(&root, "/etc/kubernetes/pki/ca.crt"), written_content(ud, "/etc/kubernetes/pki/ca.crt"));
    assert_eq!(read(&root, "/etc/kubernetes/pki/sa.key"), written_content(ud, "/etc/kubernetes/pki/sa.key"));
    let pki = |f: &str| at(&root, &format!("/etc/kubernetes/pki/{f}"));
    assert_eq!((mode(&pki("ca.key")), mode(&pki("ca.crt"))), (0o600, 0o640));
    assert_eq!(
        read(&root, "/etc/kubernetes/audit-policy.yaml"),
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"
    );
    assert_eq!(read(&root, "/etc/motd"), "Provisioned by Cluster API\n");
    assert_eq!(mode(&at(&root, "/run/kubeadm/kubeadm.yaml")), 0o640);
    assert!(read(&root, "/run/kubeadm/kubeadm.yaml").contains("name: 'cp-1'"), "the Jinja variable is rendered");
    // runcmd: shell lines are not run under a scratch root (and say so); the sentinel once the
    // whole init is over, then the later entries.
    let pre = format!("{}{}", c.first.stdout(), c.first.stderr());
    let (swapoff, certs) = (pre.find("runcmd[0]: not run").unwrap(), pre.find("[certs]").unwrap());
    assert!(swapoff < certs && pre.contains("swapoff -a"), "the lines before kubeadm, first:\n{pre}");
    assert!(!pre.contains("echo done"), "post-kubeadm commands wait for the whole init:\n{pre}");
    let log = format!("{}{}", c.init.stdout(), c.init.stderr());
    assert_eq!(read(&root, SENTINEL), "success\n");
    assert_eq!(mode(&at(&root, SENTINEL)), 0o644);
    let (sentinel_at, done_at) = (log.find("bootstrap-success.complete").unwrap(), log.find("echo done").unwrap());
    assert!(sentinel_at < done_at, "the chain's sentinel, then the later runcmd entries:\n{log}");
    let cm = c.get(&["-n", "kube-system", "configmap", "kubeadm-config"]);
    assert!(cm["data"]["ClusterConfiguration"].as_str().unwrap().contains("clusterName: my-cluster"), "{cm}");
    // A rerun of the finished stage runs nothing again.
    let again = run_in(&c.netns, &boot_args("post-kubelet", &c.scratch.root_str()));
    assert!(again.code() == 0 && !again.stderr().contains("runcmd"), "{}", again.stderr());
    let kcm = std::fs::read_to_string(at(&root, "/etc/kubernetes/manifests/kube-controller-manager.yaml")).unwrap();
    assert!(kcm.contains("--cloud-provider=external"), "{kcm}");

    // The management cluster's part: Cluster API creates the joining nodes' token.
    let made = run_in(&c.netns, &["token", "create", TOKEN, "--root", &c.scratch.root_str()]);
    assert_eq!(made.code(), 0, "{}", made.stderr());
    c.wait_cluster_info_signed();
    let zero = format!("sha256:{}", "0".repeat(64));

    // The worker: kubeadm join's --v is ignored with a note; the sentinel after the kubelet.
    let worker = test_host(fixture!("user-data/capi-worker/user-data"), "{ip}", "{name}").replace(&zero, "{hash}");
    let (runs, w) = boot(&mut c, "worker-1", 21, &worker);
    assert!(runs[0].stderr().contains("verbosity flag ignored"), "{}", runs[0].stderr());
    assert!(read(&w, "/var/lib/kubelet/kubeadm-flags.env").contains("--cloud-provider=external"));
    assert_eq!(read(&w, SENTINEL), "success\n");
    c.wait_ready("worker-1");
    let node = c.get(&["node", "worker-1"]);
    let taints = node["spec"]["taints"].to_string();
    assert!(taints.contains("node.cluster.x-k8s.io/uninitialized"), "CAPI's taint: {taints}");
    let kept = read(&w, "/var/lib/kubestrap/plan.yaml");
    assert!(!kept.contains(TOKEN) && !kept.contains("BEGIN"), "no token or key kept:\n{kept}");

    // The second control plane: CAPI's copied CAs (no certificate key), this node's own
    // certificates, a real etcd learner promoted to voter.
    let cp = fixture!("user-data/capi-control-plane-join/user-data");
    let join = test_host(cp, "{ip}", "{name}").replace(&zero, "{hash}").replace(
        "        localAPIEndpoint: {}\n",
        "        localAPIEndpoint: {advertiseAddress: {ip}, bindPort: {port}}\n",
    );
    let (_, j) = boot(&mut c, "cp-2", 1, &join);
    for shared in ["ca.key", "sa.key", "front-proxy-ca.key", "etcd/ca.key"] {
        let want = written_content(cp, &format!("/etc/kubernetes/pki/{shared}"));
        assert_eq!(read(&j, &format!("/etc/kubernetes/pki/{shared}")), want, "{shared} is Cluster API's");
    }
    assert_eq!(read(&j, SENTINEL), "success\n");
    c.wait_ready("cp-2");
    c.wait_probes(2);
    let node = c.get(&["node", "cp-2"]);
    assert_eq!(node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"], "");
    let kept = read(&j, "/var/lib/kubestrap/plan.yaml");
    assert!(!kept.contains(TOKEN) && !kept.contains("BEGIN"), "no token or key kept:\n{kept}");

    // Hand-written user-data joins the same cluster (its line skips the CA pin); its node is
    // not run, so the pre-kubelet stage (which ends with the node's identity) is enough.
    let hud =
        fixture!("user-data/homelab-crio-worker/user-data").replace("127.0.0.1:6443", &format!("{CP_ADDR}:{}", c.port));
    let h = Scratch::new("");
    seed(&h.root(), &hud, "worker-2");
    let r = run_in(&c.bare_node("worker-2", 22), &boot_args("pre-kubelet", &h.root_str()));
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    assert!(std::fs::read_link(at(&h.root(), "/var/lib/kubelet/pki/kubelet-client-current.pem")).is_ok());
    assert!(r.stderr().contains("\"users\" ignored"), "{}", r.stderr());
}
