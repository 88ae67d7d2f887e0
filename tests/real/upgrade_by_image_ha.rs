//! Upgrade by booting the next image, a whole cluster at once, on the real components of both
//! versions: three control planes (one shared user-data, `kubestrap boot`) and a worker, all on
//! images of v1.36.3, power off together and boot images of v1.37.2. Each control plane's
//! pre-kubelet stage lets its kubelet start the old static Pods ("pending"); then the three
//! post-kubelet stages run at the same moment: one takes the upgrade Lease and runs `upgrade
//! apply`, the others wait for it and run `upgrade node`, one at a time; the worker's pre-kubelet
//! stage meanwhile waits for the control plane to reach v1.37 and then runs `upgrade node`. All
//! Nodes end Ready on v1.37.2; a client polling the API through a load balancer over the three
//! reports its longest gap during the upgrade. cp-2's stage is SIGKILLed (a power cut) as it moves
//! a manifest in, holding the Lease, and runs again at once: it takes the Lease back and
//! finishes. The three rolls, timed from their lines, never overlap; each API server answers
//! v1.37.2; the worker reports that it waited. A control plane whose upgrade was cut short after
//! its manifests rolled finishes it at its next boot. The control planes were made with kubeadm
//! patches (`patches.directory`): the upgraded manifests carry them again.

use std::path::Path;
use std::time::{Duration, Instant};

use super::availability::Monitor;
use super::boot_ha::{ca, machine, shared};
use super::cluster::*;
use super::front::Balancer;
use super::host::Host;
use super::upgrade::{tags, want_tags};
use crate::common::*;

const OLD: &str = "v1.36.3";
const NEW: &str = "v1.37.2";

fn image(root: &Path, version: &str) {
    write_file(&root.join("usr/share/kubestrap/image.json"), format!("{{\"kubernetesVersion\": \"{version}\"}}\n"));
}

fn status(root: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(root.join("run/kubestrap/status.json")).unwrap_or_default())
        .unwrap_or_default()
}

/// The control planes' kubeadm patches (init's and join's `patches.directory`): a flag added to
/// the API server, which the upgrade must apply again to the new manifest.
const PATCHED_FLAG: &str = "--max-requests-inflight=444";
fn patches(root: &Path) {
    let patch =
        format!("[{{\"op\": \"add\", \"path\": \"/spec/containers/0/command/-\", \"value\": \"{PATCHED_FLAG}\"}}]\n");
    write_file(&at(root, "/etc/kubernetes/patches/kube-apiserver+json.json"), patch);
}

fn apiserver_manifest(root: &Path) -> String {
    std::fs::read_to_string(at(root, "/etc/kubernetes/manifests/kube-apiserver.yaml")).expect("kube-apiserver.yaml")
}

fn kubelet_version(c: &Cluster, node: &str) -> String {
    let (code, out, _) = c.kubectl(&["get", "-o", "json", "node", node]);
    let n: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    if code == 0 {
        n["status"]["nodeInfo"]["kubeletVersion"].as_str().unwrap_or_default().to_string()
    } else {
        String::new()
    }
}

#[test]
fn three_control_planes_and_a_worker_reboot_onto_the_next_image_at_once() {
    let started = Instant::now();
    let (crt, key, hash) = ca();
    let mut ud = String::new();
    let mut c = Cluster::boot_with_at(OLD, |lan, root, port| {
        ud = shared(port, &hash, &lan.cri_dir, true)
            .replace("kubernetesVersion: v1.37.2", &format!("kubernetesVersion: {OLD}"))
            .replace(
                "kind: InitConfiguration\n",
                "kind: InitConfiguration\n    patches: {directory: /etc/kubernetes/patches}\n",
            )
            .replace(
                "kind: JoinConfiguration\n",
                "kind: JoinConfiguration\n    patches: {directory: /etc/kubernetes/patches}\n",
            );
        assert_eq!(ud.matches("patches: {directory").count(), 2, "{ud}");
        machine(root, &ud, "cp-1", 0);
        patches(root);
        lan.cri_socket("cp-1", root);
        image(root, OLD);
        write_file(&at(root, "/run/credentials/@system/kubestrap.ca-crt"), &crt);
        write_file(&at(root, "/run/credentials/@system/kubestrap.ca-key"), &key);
    });
    c.wait_cluster_info_signed();
    for (name, i) in [("cp-2", 1), ("cp-3", 2)] {
        c.set_version(name, OLD);
        let w = Scratch::new("");
        machine(&w.root(), &ud, name, i);
        patches(&w.root());
        c.lan.cri_socket(name, &w.root());
        image(&w.root(), OLD);
        let runs = c.boot_node_in(name, i, w);
        assert!(runs.iter().all(|r| r.code() == 0), "{name}:\n{}\n{}", runs[0].stderr(), c.status());
        c.wait_ready(name);
    }
    c.set_version("worker-1", OLD);
    let w = Scratch::new("");
    let wroot = w.root();
    seed(&wroot, &c.fill_node(fixture!("real/boot-worker.user-data"), "worker-1", 20, &wroot), "worker-1");
    write_file(&wroot.join("run/credentials/@system/kubestrap.token"), TOKEN);
    image(&wroot, OLD);
    let runs = c.boot_node_in("worker-1", 20, w);
    assert!(runs.iter().all(|r| r.code() == 0), "worker-1:\n{}", runs[0].stderr());
    for n in ["cp-1", "cp-2", "cp-3", "worker-1"] {
        c.wait_ready(n);
        assert_eq!(kubelet_version(&c, n), OLD);
    }
    for h in c.hosts.iter().filter(|h| h.name.starts_with("cp-")) {
        assert!(apiserver_manifest(&h.root).contains(PATCHED_FLAG), "{}: init's or join's patches applied", h.name);
    }
    let built = started.elapsed();

    // Every machine powers off and boots the v1.37.2 image; the control planes' kubelets start on
    // their old static Pods.
    let names = ["cp-1", "cp-2", "cp-3", "worker-1"];
    let mut off = Vec::new();
    for n in names {
        let i = c.hosts.iter().position(|h| h.name == n).expect("host");
        let root = c.hosts[i].root.clone();
        let (netns, scratch) = c.hosts.remove(i).power_off();
        image(&root, NEW);
        c.set_version(n, NEW);
        off.push((n, netns, scratch, root));
    }
    let mut worker = None;
    for (n, netns, scratch, root) in off {
        if n == "worker-1" {
            worker = Some((netns, scratch, root));
            continue;
        }
        let pre = run_in(&netns, &boot_args("pre-kubelet", &root.display().to_string()));
        assert_eq!(pre.code(), 0, "{n} pre-kubelet:\n{}", pre.stderr());
        assert_eq!(status(&root)["upgrade"]["state"], "pending", "{n}: {}", status(&root));
        let logs = c.logs.with_file_name(n);
        c.hosts.push(Host::start_at(c.version(n), n, netns, &root, &logs, scratch, false));
    }
    for n in ["cp-1", "cp-2", "cp-3"] {
        c.wait_ready(n);
    }

    // The API through a load balancer over the three, from a client machine, during the upgrade.
    let (client, lb) = (c.bare_node("client", 30), c.bare_node("lb", 31));
    let pool: Vec<String> = (0..3).map(addr).collect();
    let _balancer = Balancer::start(&client, &lb, c.port, &pool);
    let monitor = Monitor::start(&client, &std::fs::read(c.admin_conf()).expect("admin.conf"), c.port);

    let upgrading = Instant::now();
    let (wnetns, wscratch, wroot) = worker.expect("worker-1");
    let cut_log = c.logs.with_file_name("cp-2-post-kubelet-killed");
    let (cps, wrun) = std::thread::scope(|s| {
        let cps: Vec<_> = c
            .hosts
            .iter()
            .map(|h| {
                let (netns, root) = (h.netns.clone(), h.root.display().to_string());
                let cut_log = &cut_log;
                s.spawn(move || {
                    let args = boot_args("post-kubelet", &root);
                    // cp-2 loses power as it moves a manifest in, holding the Lease, and boots
                    // again at once: its next post-kubelet stage takes the Lease back and
                    // finishes; the others wait for it.
                    let mut lines = Vec::new();
                    let mut shot = None;
                    if h.name == "cp-2" {
                        let aim = ("[upgrade/staticpods] Moving new manifest to", 30_000);
                        let k =
                            super::kills::kill_after(&netns, &args, aim, &mut Lcg(0x5eed_0006), &|| Ok(()), cut_log);
                        lines.extend(k.lines.iter().cloned());
                        shot = Some(k);
                    }
                    let (r, more) = run_timed(&netns, &args);
                    lines.extend(more);
                    (h.name.clone(), r, lines, shot)
                })
            })
            .collect();
        let wroot_arg = wroot.display().to_string();
        let wnetns = &wnetns;
        let w = s.spawn(move || {
            let mut args = boot_args("pre-kubelet", &wroot_arg).to_vec();
            args.extend(["--upgrade-wait", "10m"]);
            run_in(wnetns, &args)
        });
        let cps: Vec<_> = cps.into_iter().map(|t| t.join().expect("a post-kubelet run")).collect();
        (cps, w.join().expect("the worker's run"))
    });
    let upgraded = upgrading.elapsed();
    // The cut landed mid-roll, and the next boot resumed without waiting for a Lease of its own.
    let (_, cut_rerun, _, shot) = cps.iter().find(|(n, ..)| n == "cp-2").expect("cp-2");
    let shot = shot.as_ref().expect("cp-2's cut");
    println!("cp-2's post-kubelet stage cut as it moved a manifest in: {}", shot.describe());
    assert!(shot.landed, "the cut came after cp-2's stage had ended");
    let rerun = cut_rerun.stderr();
    assert!(rerun.contains("[upgrade] cp-2 holds kube-system/kubestrap-upgrade"), "{rerun}");
    assert!(!rerun.contains("kubestrap-upgrade: it is upgrading; waiting for it"), "{rerun}");
    // One control plane at a time: each one's roll (its first `Preparing for` to its last
    // component upgraded, across cp-2's cut) overlaps no other's.
    let mut spans: Vec<(Instant, Instant, &str)> = cps
        .iter()
        .map(|(n, _, lines, _)| {
            let rolls: Vec<Instant> = lines
                .iter()
                .filter(|(_, l)| {
                    l.contains("[upgrade/staticpods] Preparing for") || l.contains("upgraded successfully!")
                })
                .map(|(t, _)| *t)
                .collect();
            assert!(rolls.len() >= 2, "{n} rolled nothing:\n{lines:?}");
            (rolls[0], rolls[rolls.len() - 1], n.as_str())
        })
        .collect();
    spans.sort();
    for w in spans.windows(2) {
        assert!(w[0].1 < w[1].0, "{} and {} rolled at once: {spans:?}", w[0].2, w[1].2);
    }
    let rolls: Vec<String> = spans
        .iter()
        .map(|(a, b, n)| format!("{n} +{:.0?}..+{:.0?}", a.duration_since(upgrading), b.duration_since(upgrading)))
        .collect();
    println!("the control planes' rolls, one at a time: {}", rolls.join(", "));
    let mut applied = Vec::new();
    for (n, r, ..) in &cps {
        assert_eq!(r.code(), 0, "{n} post-kubelet:\n{}\n{}", r.stderr(), c.status());
        if r.stderr().contains("[upgrade] SUCCESS! A control plane node of your cluster was upgraded to") {
            applied.push(n.clone());
        } else {
            assert!(r.stderr().contains("successfully upgraded to \"v1.37.2\""), "{n}:\n{}", r.stderr());
        }
        let root = &c.hosts.iter().find(|h| &h.name == n).expect("host").root;
        assert_eq!(tags(root), want_tags(NEW), "{n}");
        let apiserver = apiserver_manifest(root);
        assert!(apiserver.contains(PATCHED_FLAG), "{n}: the node's patches applied again:\n{apiserver}");
        assert_eq!(status(root)["upgrade"]["state"], "upgraded", "{n}");
        assert!(!at(root, "/var/lib/kubestrap/upgrade-in-progress").exists(), "{n}: the marker is gone once done");
        let recorded = std::fs::read_to_string(root.join("var/lib/kubestrap/kubernetes-version")).unwrap_or_default();
        assert_eq!(recorded.trim(), NEW, "{n}: the version file follows the upgrade");
    }
    assert_eq!(applied.len(), 1, "exactly one upgrade apply: {applied:?}");
    for (i, n) in ["cp-1", "cp-2", "cp-3"].iter().enumerate() {
        let netns = &c.hosts.iter().find(|h| &h.name == n).expect("host").netns;
        assert_eq!(super::upgrade::api_version(&c, netns, &addr(i)), NEW, "{n}'s API server");
    }
    assert_eq!(wrun.code(), 0, "worker-1 pre-kubelet:\n{}", wrun.stderr());
    assert!(
        wrun.events().iter().any(|e| e["event"] == "waiting"),
        "the worker waited for the control plane:\n{}",
        wrun.stdout()
    );
    assert_eq!(status(&wroot)["upgrade"]["state"], "upgraded");
    let report = monitor.stop();

    let logs = c.logs.with_file_name("worker-1");
    c.hosts.push(Host::start_at(c.version("worker-1"), "worker-1", wnetns, &wroot, &logs, wscratch, false));
    for n in names {
        c.wait(&format!("{n} on the v1.37.2 kubelet"), || (kubelet_version(&c, n) == NEW).then_some(()));
        c.wait_ready(n);
    }
    let cm = c.get(&["-n", "kube-system", "configmap", "kubeadm-config"]);
    assert!(cm["data"]["ClusterConfiguration"].as_str().unwrap().contains(&format!("kubernetesVersion: {NEW}\n")));
    let ds = c.get(&["-n", "kube-system", "daemonset", "kube-proxy"]);
    assert_eq!(ds["spec"]["template"]["spec"]["containers"][0]["image"], format!("registry.k8s.io/kube-proxy:{NEW}"));
    let (code, _, _) = c.kubectl(&["-n", "kube-system", "get", "lease", "kubestrap-upgrade"]);
    assert_ne!(code, 0, "the upgrade lease is released");
    println!(
        "upgrade by image: cluster built in {built:.0?}; 3 control planes and a worker upgraded in {upgraded:.0?} \
         ({} applied); the API through the load balancer: {} polls, {} failed, longest gap {:.1?} ({})",
        applied[0],
        report.polls,
        report.failed,
        report.longest_gap,
        report.why.chars().take(120).collect::<String>()
    );
    assert!(report.longest_gap < Duration::from_secs(30), "the API was unavailable for {:?}", report.longest_gap);

    // A control plane whose upgrade was cut short after its manifests rolled (its marker left, its
    // kubelet configuration not yet rewritten) finishes it at its next boot, though its manifests
    // already name the image's version.
    let h = c.hosts.iter().find(|h| h.name == "cp-3").expect("cp-3");
    let (netns, root) = (h.netns.clone(), h.root.clone());
    let config = root.join("var/lib/kubelet/config.yaml");
    let fresh = std::fs::read_to_string(&config).expect("config.yaml");
    std::fs::write(&config, format!("{fresh}# left by the v1.36.3 kubelet-config phase\n")).expect("write");
    write_file(&at(&root, "/var/lib/kubestrap/upgrade-in-progress"), format!("{NEW}\n"));
    let r = run_in(&netns, &boot_args("post-kubelet", &root.display().to_string()));
    assert_eq!(r.code(), 0, "cp-3's next boot:\n{}", r.stderr());
    assert!(r.stderr().contains("was cut short"), "{}", r.stderr());
    assert_eq!(std::fs::read_to_string(&config).expect("config.yaml"), fresh, "kubelet-config ran again");
    assert!(!at(&root, "/var/lib/kubestrap/upgrade-in-progress").exists(), "the marker is gone once done");
    assert_eq!(status(&root)["upgrade"]["state"], "upgraded");
}
