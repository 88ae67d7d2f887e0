//! Upgrade by booting the next image, on a worker, on the real components of both versions: a
//! worker whose image carries v1.36.3 (`/usr/share/kubestrap/image.json`, its kubelet v1.36.3)
//! boots and joins a v1.37.2 control plane made by `kubestrap boot`; the cluster's
//! KubeletConfiguration changes (as `upgrade apply` rewrites it). The worker then reboots:
//! - onto an image of v1.38.0, two minors on: refused at once (exit 5), the kubelet held;
//! - onto the v1.37.2 image while kubeadm-config still names v1.36.3 (one API server's answer is
//!   not enough): it waits, then refuses, nothing changed;
//! - onto the v1.37.2 image: `upgrade node` runs before the kubelet (config.yaml from the
//!   cluster, the old one backed up), the node's version is recorded, and the v1.37.2 kubelet
//!   comes up Ready with the cluster's new config;
//! - onto an image of v1.38.0 again, now one minor on but newer than its control plane: the
//!   pre-kubelet stage waits for the control plane (bounded by `--upgrade-wait`), then refuses:
//!   the failure file names the skew rule, the kubelet is held, nothing of the node changed; back
//!   on the v1.37.2 image the node is current and the hold gone.

use std::path::Path;

use super::cluster::*;
use super::host::Host;
use crate::common::{Run, Scratch, TOKEN, fixture, write_file};
use crate::net::Netns;

const OLD: &str = "v1.36.3";
const NEW: &str = "v1.37.2";
const IMAGE_JSON: &str = "usr/share/kubestrap/image.json";
const RECORD: &str = "var/lib/kubestrap/kubernetes-version";
const HOLD: &str = "run/kubestrap/hold-kubelet";

fn image(root: &Path, version: &str) {
    write_file(&root.join(IMAGE_JSON), format!("{{\"kubernetesVersion\": \"{version}\"}}\n"));
}

fn read(root: &Path, p: &str) -> String {
    std::fs::read_to_string(root.join(p)).unwrap_or_default()
}

fn kubelet_version(c: &Cluster, node: &str) -> String {
    c.get(&["node", node])["status"]["nodeInfo"]["kubeletVersion"].as_str().unwrap_or_default().to_string()
}

fn status(root: &Path) -> serde_json::Value {
    serde_json::from_str(&read(root, "run/kubestrap/status.json")).expect("status.json")
}

/// The next boot's pre-kubelet stage on the worker's root.
fn boot(netns: &Netns, root: &str, wait: &str) -> Run {
    let mut args = boot_args("pre-kubelet", root).to_vec();
    args.extend(["--upgrade-wait", wait]);
    run_in(netns, &args)
}

#[test]
fn a_worker_booted_on_the_next_image_waits_for_its_control_plane_then_upgrades_itself() {
    let mut c = Cluster::boot(fixture!("real/boot-control-plane.user-data"));
    c.wait_cluster_info_signed();
    c.set_version("worker-1", OLD);
    let w = Scratch::new("");
    let root = w.root();
    seed(&root, &c.fill_node(fixture!("real/boot-worker.user-data"), "worker-1", 21, &root), "worker-1");
    write_file(&root.join("run/credentials/@system/kubestrap.token"), TOKEN);
    image(&root, OLD);
    let runs = c.boot_node_in("worker-1", 21, w);
    assert!(runs.iter().all(|r| r.code() == 0), "{}", runs[0].stderr());
    c.wait_ready("worker-1");
    assert_eq!(kubelet_version(&c, "worker-1"), OLD);
    assert_eq!(read(&root, RECORD), format!("{OLD}\n"), "the first boot records the image's version");

    super::upgrade_node::set_max_pods(&c, 150);
    let i = c.hosts.iter().position(|h| h.name == "worker-1").expect("worker-1");
    let (netns, scratch) = c.hosts.remove(i).power_off();
    let scratch = scratch.expect("the worker's root");
    let root_arg = scratch.root_str();
    let config = read(&root, "var/lib/kubelet/config.yaml");

    // An image two minors on: refused at once, the kubelet held, nothing changed.
    image(&root, "v1.38.0");
    let skip = boot(&netns, &root_arg, "4s");
    assert_eq!(skip.code(), 5, "{}\n{}", skip.stdout(), skip.stderr());
    assert!(skip.stderr().contains("may not skip a minor version (boot an image of v1.37 first)"), "{}", skip.stderr());
    assert!(read(&root, HOLD).contains("may not skip"), "the kubelet is held");
    assert_eq!(read(&root, "var/lib/kubelet/config.yaml"), config, "a refused upgrade changed config.yaml");

    // The v1.37.2 image while kubeadm-config still names v1.36.3 (its control plane's `upgrade
    // apply` not done, though /version answers v1.37.2): it waits, then refuses; nothing changes.
    image(&root, NEW);
    let set_stored = |from: &str, to: &str| {
        let cm = c.get(&["-n", "kube-system", "configmap", "kubeadm-config"]);
        let cc = cm["data"]["ClusterConfiguration"].as_str().expect("ClusterConfiguration");
        let line = |v: &str| format!("kubernetesVersion: {v}\n");
        assert!(cc.contains(&line(from)), "{cc}");
        c.set_config_data(
            "kubeadm-config",
            serde_json::json!({"ClusterConfiguration": cc.replace(&line(from), &line(to))}),
        );
    };
    set_stored(NEW, OLD);
    let early = boot(&netns, &root_arg, "4s");
    assert_eq!(early.code(), 5, "{}\n{}", early.stdout(), early.stderr());
    assert!(
        early.stderr().contains(&format!("kubeadm-config still says kubernetesVersion {OLD}")),
        "{}",
        early.stderr()
    );
    assert_eq!(read(&root, "var/lib/kubelet/config.yaml"), config, "an upgrade too early changed config.yaml");
    assert_eq!(read(&root, RECORD), format!("{OLD}\n"));
    set_stored(OLD, NEW);

    // The v1.37.2 image: upgrade node before the kubelet.
    let ok = boot(&netns, &root_arg, "4s");
    assert_eq!(ok.code(), 0, "{}\n{}", ok.stdout(), ok.stderr());
    assert!(
        ok.stderr()
            .contains("[upgrade/kubelet-config] The kubelet configuration for this node was successfully upgraded!")
    );
    let u = &status(&root)["upgrade"];
    assert_eq!(
        (u["state"].as_str(), u["node"].as_str(), u["image"].as_str()),
        (Some("upgraded"), Some(OLD), Some(NEW))
    );
    assert_eq!(u["control_plane"], NEW);
    assert!(!root.join(HOLD).exists(), "the hold outlived the upgrade");
    assert!(!root.join("run/cluster-api/bootstrap-failure.json").exists());
    assert_eq!(read(&root, RECORD), format!("{NEW}\n"));
    assert!(read(&root, "var/lib/kubelet/config.yaml").contains("maxPods: 150"));
    let backups: Vec<_> = std::fs::read_dir(root.join("etc/kubernetes/tmp")).expect("tmp").flatten().collect();
    assert!(backups.iter().any(|e| e.file_name().to_string_lossy().starts_with("kubeadm-kubelet-config-")));

    // Power on with the image's kubelet.
    c.set_version("worker-1", NEW);
    let logs = c.logs.with_file_name("worker-1");
    c.hosts.push(Host::start_at(c.version("worker-1"), "worker-1", netns.clone(), &root, &logs, Some(scratch), false));
    c.wait(&format!("worker-1's Node reporting the {NEW} kubelet"), || {
        (kubelet_version(&c, "worker-1") == NEW).then_some(())
    });
    c.wait_ready("worker-1");
    assert_eq!(c.get(&["node", "worker-1"])["status"]["capacity"]["pods"], "150");

    // Off again, then onto an image of v1.38.0, one minor newer than the control plane: it
    // waits for the control plane (bounded), then refuses; nothing changes.
    let i = c.hosts.iter().position(|h| h.name == "worker-1").expect("worker-1");
    let (netns, scratch) = c.hosts.remove(i).power_off();
    let _scratch = scratch.expect("the worker's root");
    let config = read(&root, "var/lib/kubelet/config.yaml");
    image(&root, "v1.38.0");
    let refused = boot(&netns, &root_arg, "4s");
    assert_eq!(refused.code(), 5, "{}\n{}", refused.stdout(), refused.stderr());
    let events = refused.events();
    let waited = events.iter().find(|e| e["event"] == "waiting").expect("a waiting event");
    assert!(waited["message"].as_str().unwrap().contains(&format!("the control plane runs {NEW}")), "{waited}");
    let failure: serde_json::Value =
        serde_json::from_str(&read(&root, "run/cluster-api/bootstrap-failure.json")).expect("the failure file");
    assert_eq!(failure["reason"], "UpgradeRefused", "{failure}");
    let msg = failure["message"].as_str().unwrap();
    assert!(msg.contains("version skew policy") && msg.contains(&format!("boot the image of {NEW}")), "{msg}");
    assert!(read(&root, HOLD).contains("version skew policy"), "the kubelet is held");
    assert_eq!(status(&root)["upgrade"]["state"], "refused");
    assert_eq!(read(&root, "var/lib/kubelet/config.yaml"), config, "a refused upgrade changed config.yaml");
    assert_eq!(read(&root, RECORD), format!("{NEW}\n"));

    // Back on the v1.37.2 image: the node is current, the hold gone.
    image(&root, NEW);
    let again = boot(&netns, &root_arg, "4s");
    assert_eq!(again.code(), 0, "{}", again.stderr());
    assert_eq!(status(&root)["upgrade"]["state"], "current");
    assert!(!root.join(HOLD).exists() && !root.join("run/cluster-api/bootstrap-failure.json").exists());
}
