//! The product path on the real components: `kubestrap boot` from user-data alone, its two
//! stages around the real kubelet, a control plane then a worker whose token comes only as a
//! systemd credential; both Nodes Ready, the token scrubbed, a second boot a no-op.

use super::cluster::*;
use crate::common::*;

fn status(root: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(root.join("run/kubestrap/status.json")).expect("status.json")).unwrap()
}

/// The boot's timeline: both stages, every phase in order, the real components' first healthy
/// answers inside wait-control-plane, every span closed, on the boot clock (never ahead of it);
/// `kubestrap status --timeline` prints it sorted by start.
fn check_timeline(c: &Cluster, st: &serde_json::Value) {
    let spans = st["timeline"].as_array().unwrap_or_else(|| panic!("no timeline: {st}"));
    let field = |sp: &serde_json::Value, k: &str| sp[k].as_u64().unwrap_or_else(|| panic!("{k} of {sp}"));
    let find = |name: &str| spans.iter().find(|sp| sp["name"] == name).unwrap_or_else(|| panic!("no {name}: {st}"));
    let names: Vec<&str> = spans.iter().filter_map(|sp| sp["name"].as_str()).collect();
    let order = ["pre-kubelet", "gather", "preflight", "certs", "kubelet-start", "post-kubelet", "wait-control-plane"];
    let at: Vec<usize> = order.iter().map(|n| names.iter().position(|x| x == n).expect(n)).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{names:?}");
    let (uptime, _) = std::fs::read_to_string("/proc/uptime")
        .expect("uptime")
        .split_once(' ')
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .expect("uptime");
    let now_ms = (uptime.parse::<f64>().expect("seconds") * 1000.0) as u64;
    for sp in spans {
        let (start, end) = (field(sp, "start_ms"), field(sp, "end_ms"));
        assert!(start <= end && end <= now_ms + 1000, "{sp} (boot clock now {now_ms} ms)");
    }
    let wait = find("wait-control-plane");
    for healthy in
        ["kubelet healthy", "kube-apiserver healthy", "kube-controller-manager healthy", "kube-scheduler healthy"]
    {
        let sp = find(healthy);
        assert!(
            field(sp, "start_ms") >= field(wait, "start_ms") && field(sp, "end_ms") <= field(wait, "end_ms"),
            "{sp} in {wait}"
        );
    }
    // The controller-manager's and scheduler's manifests followed the API server's answer
    // (init::in_order), in the post-kubelet stage's control-plane phase.
    let api = find("kube-apiserver answered");
    assert!(field(find("post-kubelet"), "start_ms") <= field(api, "start_ms"), "{api} in post-kubelet");
    assert!(field(api, "end_ms") <= field(wait, "start_ms"), "{api} before {wait}");
    let pre = find("pre-kubelet");
    assert!(field(pre, "end_ms") <= field(find("post-kubelet"), "start_ms"), "the stages in turn: {st}");
    let r = run_in(&c.netns, &["status", "--timeline", "--root", &c.scratch.root_str()]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let out = r.stdout();
    let rows: Vec<&str> = out.lines().collect();
    assert_eq!(rows.len(), spans.len() + 1, "{out}");
    assert!(rows.iter().any(|l| l.ends_with("kube-apiserver healthy")), "{out}");
    println!("{out}");
}

#[test]
fn control_plane_then_worker_from_user_data_alone() {
    let mut c = Cluster::boot_with(|lan, root, port| {
        let cri = lan.cri_socket("cp-1", root);
        let vars: [(&str, &dyn std::fmt::Display); 3] = [("cri", &cri), ("port", &port), ("addr", &CP_ADDR)];
        let ud = fixture!("real/boot-control-plane.user-data").replace(
            "    localAPIEndpoint:\n",
            "    patches:\n      directory: /etc/kubernetes/patches\n    localAPIEndpoint:\n",
        );
        assert!(ud.contains("directory: /etc/kubernetes/patches"));
        seed(root, &fill(&ud, &vars), "cp-1");
        // A patch baked into the image, in the directory the kubeadm documents name.
        let patch = root.join("etc/kubernetes/patches/kube-apiserver+strategic.yaml");
        std::fs::create_dir_all(patch.parent().unwrap()).unwrap();
        std::fs::write(&patch, "metadata:\n  annotations:\n    kubestrap.test/patched: \"true\"\n").unwrap();
    });
    let root = c.root();
    assert!(c.init.stdout().contains(&format!("kubestrap join {CP_ADDR}:{}", c.port)), "{}", c.init.stdout());
    assert_eq!(c.init.events().last().unwrap()["event"], "done");
    let st = status(&root);
    assert_eq!((st["state"].as_str(), st["role"].as_str()), (Some("done"), Some("control-plane")), "{st}");
    // kubelet-finalize, as kubeadm 1.37: kubelet.conf names the kubelet's rotating pair, which
    // the real kubelet stored (a link to a node path) from the certificate init embedded.
    let finalize = "[kubelet-finalize] Updating \"/etc/kubernetes/kubelet.conf\" to point to a rotatable kubelet client certificate and key";
    assert!(c.init.stderr().contains(finalize), "{}", c.init.stderr());
    let kc = std::fs::read_to_string(root.join("etc/kubernetes/kubelet.conf")).unwrap();
    let pem = "/var/lib/kubelet/pki/kubelet-client-current.pem";
    assert!(
        kc.contains(&format!("client-certificate: {pem}\n")) && kc.contains(&format!("client-key: {pem}\n")),
        "{kc}"
    );
    assert!(!kc.contains("client-certificate-data") && !kc.contains("client-key-data"), "{kc}");
    assert!(kc.contains("name: system:node:cp-1"), "kubeadm's names stay: {kc}");
    let target = std::fs::read_link(root.join(&pem[1..])).expect("kubelet-client-current.pem is the kubelet's link");
    assert!(root.join(target.strip_prefix("/").unwrap()).is_file(), "{}", target.display());
    let plan = std::fs::read_to_string(root.join("var/lib/kubestrap/plan.yaml")).unwrap();
    assert!(!plan.contains(TOKEN), "the token is scrubbed once the node is bootstrapped:\n{plan}");
    check_timeline(&c, &st);
    // The user-data's patch is in the API server's manifest the post-kubelet stage wrote.
    let apiserver = std::fs::read_to_string(root.join("etc/kubernetes/manifests/kube-apiserver.yaml")).unwrap();
    assert!(apiserver.contains("kubestrap.test/patched: \"true\""), "{apiserver}");
    // A second boot is a no-op.
    let again = run_in(&c.netns, &boot_args("pre-kubelet", &c.scratch.root_str()));
    assert_eq!(again.events().last().unwrap()["event"], "skipped", "{}", again.stdout());
    // It still says what the node is and where that was decided.
    let st = status(&root);
    assert_eq!((st["state"].as_str(), st["role"].as_str()), (Some("skipped"), Some("control-plane")), "{st}");
    assert_eq!(st["datasource"], "/var/lib/kubestrap/plan.yaml (gathered by the first boot)", "{st}");

    c.wait_cluster_info_signed();
    let runs = c.boot_node("worker-1", 21, fixture!("real/boot-worker.user-data"), TOKEN);
    for r in &runs {
        assert_eq!(r.code(), 0, "worker boot failed:\n{}\n{}", r.stdout(), r.stderr());
    }
    assert_eq!(runs.len(), 2);
    assert!(runs[0].stderr().contains("packages"), "ignored cloud-config keys are reported:\n{}", runs[0].stderr());
    c.wait_ready("worker-1");
    let w = &c.hosts[1].root;
    assert_eq!(status(w)["role"], "worker");
    let kept = std::fs::read_to_string(w.join("var/lib/kubestrap/plan.yaml")).unwrap();
    assert!(kept.starts_with("node: !Join") && !kept.contains(TOKEN), "scrubbed after the join:\n{kept}");
}
