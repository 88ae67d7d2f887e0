//! `kubestrap upgrade apply` and a control plane's `upgrade node` across a minor, on the real
//! components of both versions: two v1.36.3 control planes made by kubestrap; `upgrade plan
//! v1.37.2` prints the real `kubeadm upgrade plan v1.37.2`'s table, JSON and YAML; a target two minors
//! on is refused by the skew policy, an unconfirmed run and a dry run change nothing; then
//! `upgrade apply v1.37.2 -y` on cp-1: the static Pods roll one by one (the harness's kubelet
//! stand-in restarts each component from its new manifest, the real kubelet changes the mirror
//! Pods' config hash), the real API server answers v1.37.2, kubeadm-config names v1.37.2, the
//! old manifests are in the backup dir, the upgraded components' certificates are renewed, the
//! add-ons wait for cp-2, and the real `kubeadm upgrade diff v1.37.2` finds nothing to change:
//! the new manifests are kubeadm's. `upgrade node` on cp-2 rolls its static Pods and, as the last
//! control plane, the add-ons (a customised CoreDNS kept). cp-1 then restarts on the v1.37.2
//! kubelet and is Ready. Before the upgrade, the upgrade Lease is raced for on this API server
//! (tests/real/lease.rs).

use std::path::Path;

use super::cluster::*;
use super::host::Host;
use super::upgrade::{api_version, tags, want_tags};
use crate::common::*;

const OLD: &str = "v1.36.3";
const NEW: &str = "v1.37.2";

/// The CA directories the host has, on the node too: kubeadm mounts the ones that exist on the
/// machine it runs on, and its diff runs with this host's.
const CA_DIRS: [(&str, &str); 3] = [
    ("/etc/ca-certificates/.keep", ""),
    ("/usr/share/ca-certificates/.keep", ""),
    ("/usr/local/share/ca-certificates/.keep", ""),
];

/// A user's CoreDNS, as fleets customise it: a stub domain beside the default server block, and
/// three replicas; its image kubeadm 1.36's CoreDNS v1.14.2, as on a cluster kubeadm 1.36 made,
/// so the upgrade's CoreDNS preflight judges a real version step. Returns the Corefile.
fn customise_coredns(c: &Cluster) -> String {
    let cm = c.get(&["-n", "kube-system", "configmap", "coredns"]);
    let default = cm["data"]["Corefile"].as_str().expect("a Corefile");
    let corefile = format!("{default}example.internal:53 {{\n    errors\n    cache 30\n    forward . 10.0.0.53\n}}\n");
    c.set_config_data("coredns", serde_json::json!({"Corefile": corefile}));
    let (code, _, err) = c.kubectl(&["-n", "kube-system", "scale", "deployment", "coredns", "--replicas=3"]);
    assert_eq!(code, 0, "scale CoreDNS: {err}");
    let old = "coredns=registry.k8s.io/coredns/coredns:v1.14.2";
    let (code, _, err) = c.kubectl(&["-n", "kube-system", "set", "image", "deployment/coredns", old]);
    assert_eq!(code, 0, "CoreDNS v1.14.2: {err}");
    corefile
}

/// A Corefile with a plugin corefile-migration does not know (`whoami`) on CoreDNS v1.14.2:
/// `upgrade apply` by kubestrap and by the real kubeadm both stop in preflight with the same
/// report (`[ERROR CoreDNSUnsupportedPlugins]`, a notice for each of 1.14.3, 1.14.4 and 1.14.6),
/// and nothing is written; then the user's Corefile is put back.
fn unmigratable_corefile_refused_by_both(c: &Cluster, root: &Path, corefile: &str, ignore: &str) {
    let bad = corefile.replacen("    errors\n", "    errors\n    whoami\n", 1);
    assert_ne!(bad, corefile, "the Corefile has an errors line: {corefile}");
    let set = |text: &str| c.set_config_data("coredns", serde_json::json!({"Corefile": text}));
    set(&bad);
    let report = |text: &str| -> String {
        let start = text.find("\t[ERROR ").unwrap_or_else(|| panic!("no preflight errors:\n{text}"));
        let end = text[start..].find("[preflight] If you know").map_or(text.len(), |e| start + e);
        text[start..end].trim_end().to_string()
    };
    let before = etc_tree(root);
    let logs = c.logs.with_file_name("coredns-preflight");
    std::fs::create_dir_all(&logs).unwrap();
    let k = run_kubeadm(&c.netns, root, &logs, &["upgrade", "apply", NEW, "-y", ignore], &|| c.health());
    assert_ne!(k.code(), 0, "kubeadm upgraded past an unknown CoreDNS plugin:\n{}", k.stderr());
    let ours = run_in(&c.netns, &["upgrade", "apply", NEW, "-y", "--root", &root.display().to_string()]);
    assert_ne!(ours.code(), 0, "kubestrap upgraded past an unknown CoreDNS plugin:\n{}", ours.stderr());
    let theirs = report(&k.stderr());
    assert!(theirs.contains("Plugin \"whoami\" is unsupported by this migration tool in 1.14.6."), "{theirs}");
    assert_eq!(report(&ours.stderr()), theirs, "kubestrap's CoreDNS preflight report is kubeadm's");
    assert_eq!(etc_tree(root), before, "a refused apply changed /etc/kubernetes");
    set(corefile);
}

/// What kubeadm 1.37.2's upgrade leaves of that CoreDNS (EnsureDNSAddon): the Corefile kept byte
/// for byte with no `Corefile-backup` (no migration between CoreDNS 1.14.x), the three replicas
/// kept, the Deployment otherwise kubeadm's (its image).
fn coredns_kept(c: &Cluster, corefile: &str, by: &str) {
    let cm = c.get(&["-n", "kube-system", "configmap", "coredns"]);
    assert_eq!(cm["data"]["Corefile"].as_str(), Some(corefile), "{by} kept the user's Corefile");
    assert_eq!(cm["data"].as_object().map(|d| d.len()), Some(1), "{by}: only the Corefile: {}", cm["data"]);
    let d = c.get(&["-n", "kube-system", "deployment", "coredns"]);
    assert_eq!(d["spec"]["replicas"], 3, "{by} kept CoreDNS's replicas");
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"], "registry.k8s.io/coredns/coredns:v1.14.6",
        "{by}: kubeadm 1.37's CoreDNS"
    );
}

/// Applies made to fail after a manifest has moved, each with `timeouts.upgradeManifests` 60s:
/// first a patch gives etcd an unknown flag (its process exits at once, the API server loses
/// its store, so the mirror Pod's hash cannot change): kubeadm's etcd failure path, the manifest
/// moved back and the old etcd waited for; then kube-scheduler gets the unknown flag, after the
/// API server and controller-manager have rolled. Each run fails with kubeadm's "tried to
/// recover" words, every manifest is byte for byte what it was, and the API server is the old
/// one again. What a failed run left in /etc/kubernetes/tmp (its new manifests and backups,
/// kept for a look, as kubeadm keeps them) is removed after, so later checks read their own.
fn rollback_restores_every_manifest(c: &mut Cluster, root: &Path) {
    failed_apply(
        c,
        root,
        "etcd",
        &[
            "[upgrade/etcd] Failed to upgrade etcd:",
            "[upgrade/etcd] Waiting for previous etcd to become available",
            "[upgrade/etcd] Etcd was rolled back and is now available",
            "fatal error when trying to upgrade the etcd cluster, rolled the state back to pre-upgrade state",
        ],
    );
    let etcd_dir = root.join("var/lib/etcd");
    assert!(etcd_dir.join("member").is_dir(), "etcd's data dir in place");
    let beside: Vec<_> = std::fs::read_dir(root.join("var/lib")).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(
        !beside.iter().any(|n| n.to_string_lossy().starts_with("etcd.failed-")),
        "the old etcd came back: its data was not rolled back: {beside:?}"
    );
    failed_apply(
        c,
        root,
        "kube-scheduler",
        &["[upgrade/staticpods] Component \"kube-apiserver\" upgraded successfully!"],
    );
    // This harness runs the components as processes; the kubelet's own containers of them never
    // start here (runc may not set their oom_score_adj), so its pod workers back off for
    // minutes and a manifest moved in again waits behind that backoff. A reboot of the node,
    // as an operator's retry after a failed upgrade would often follow, clears it.
    let (netns, scratch) = c.hosts.remove(0).power_off();
    let logs = c.logs.clone();
    c.hosts.insert(0, Host::start_at(c.version("cp-1"), "cp-1", netns, root, &logs, scratch, false));
    c.wait_probes(0);
}

/// `upgrade apply` with a patch giving `component` an unknown flag: it fails with `want` and
/// kubeadm's "tried to recover" words, and leaves the manifests and the API server as they were.
fn failed_apply(c: &mut Cluster, root: &Path, component: &str, want: &[&str]) {
    let root_arg = root.display().to_string();
    let manifests = |root: &Path| -> Vec<(String, Vec<u8>)> {
        etc_tree(root).into_iter().filter(|(p, _)| p.contains("/manifests/")).collect()
    };
    let before = manifests(root);
    let tmp = root.join("etc/kubernetes/tmp");
    let listed = |d: &Path| -> Vec<String> {
        std::fs::read_dir(d)
            .map(|r| r.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default()
    };
    let tmp_before = listed(&tmp);
    let bad = format!("/etc/kubestrap-test/bad-patches-{component}");
    write_file(
        &at(root, &format!("{bad}/{component}+json.yaml")),
        "- {op: add, path: /spec/containers/0/command/-, value: --no-such-flag=1}\n",
    );
    let config = root.join("tmp-upgrade-config.yaml");
    let text = format!(
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: UpgradeConfiguration\napply:\n  patches:\n    directory: {bad}\ntimeouts:\n  upgradeManifests: 60s\n"
    );
    std::fs::write(&config, text).unwrap();
    let logs = c.logs.with_file_name(format!("cp-1-upgrade-apply-rollback-{component}"));
    std::fs::create_dir_all(&logs).unwrap();
    let config_arg = config.display().to_string();
    let args = ["upgrade", "apply", NEW, "-y", "--config", config_arg.as_str(), "--root", root_arg.as_str()];
    let r = run_watched(&c.netns, &args, &logs, &|| c.health());
    let err = r.stderr();
    assert_ne!(r.code(), 0, "an apply whose {component} cannot start succeeded:\n{err}");
    assert!(err.contains("has tried to recover everything into the earlier state"), "{err}");
    for w in want {
        assert!(err.contains(w), "missing {w:?}:\n{err}");
    }
    let faced = err.rsplit("Errors faced: [").next().unwrap_or_default();
    assert!(faced.contains(component), "the error names {component}'s wait:\n{err}");
    assert!(manifests(root) == before, "a manifest differs from before the failed apply");
    c.wait("the v1.36.3 API server again", || {
        (super::upgrade::api_version_now(c, &c.netns, CP_ADDR).as_deref() == Some(OLD)).then_some(())
    });
    let cm = c.get(&["-n", "kube-system", "configmap", "kubeadm-config"]);
    assert!(cm["data"]["ClusterConfiguration"].as_str().unwrap().contains(&format!("kubernetesVersion: {OLD}\n")));
    let left: Vec<String> = listed(&tmp).into_iter().filter(|n| !tmp_before.contains(n)).collect();
    assert!(left.iter().any(|n| n.starts_with("kubeadm-upgraded-manifests")), "the new manifests kept: {left:?}");
    for n in left {
        let _ = std::fs::remove_dir_all(tmp.join(n));
    }
    std::fs::remove_file(&config).unwrap();
}

/// The init fixture at v1.36.3.
fn old_template() -> String {
    fixture!("real/init.yaml").replace("kubernetesVersion: v1.37.2", &format!("kubernetesVersion: {OLD}"))
}

/// The real `kubeadm upgrade diff v1.37.2` on cp-1 prints no diff: its manifests are kubeadm's.
fn kubeadm_finds_nothing_to_change(c: &Cluster, root: &Path, logs: &Path) {
    let k = run_kubeadm(&c.netns, root, logs, &["upgrade", "diff", NEW], &|| c.health());
    assert_eq!(k.code(), 0, "kubeadm upgrade diff:\n{}\n{}", k.stdout(), k.stderr());
    let out = k.stdout();
    let diff: Vec<&str> = out.lines().filter(|l| !l.starts_with("[upgrade/diff]")).collect();
    assert!(diff.is_empty(), "kubeadm would change the manifests kubestrap upgraded:\n{out}");
}

/// `kubestrap upgrade plan v1.37.2` prints what the real `kubeadm upgrade plan v1.37.2` prints
/// (its table, as text, JSON and YAML; its version lines but kubeadm's own version). The Nodes
/// are cordoned meanwhile: kubeadm then skips its test Job, which this harness cannot run.
fn plans_match_kubeadms(c: &Cluster, root: &Path) {
    let (code, _, err) = c.kubectl(&["cordon", "cp-1", "cp-2"]);
    assert_eq!(code, 0, "cordon: {err}");
    let root_arg = root.display().to_string();
    let logs = c.logs.with_file_name("cp-1-upgrade-plan");
    std::fs::create_dir_all(&logs).unwrap();
    for output in ["text", "json", "yaml"] {
        let k = run_kubeadm(&c.netns, root, &logs, &["upgrade", "plan", NEW, "-o", output], &|| c.health());
        assert_eq!(k.code(), 0, "kubeadm upgrade plan -o {output}:\n{}\n{}", k.stdout(), k.stderr());
        let ours = run_in(&c.netns, &["upgrade", "plan", NEW, "-o", output, "--root", &root_arg]);
        assert_eq!(ours.code(), 0, "kubestrap upgrade plan -o {output}:\n{}", ours.stderr());
        let theirs = k.stdout();
        let table = match output {
            "text" => {
                let start = theirs.find("Components that must be upgraded manually").expect("kubeadm's plan table");
                for line in theirs[..start].lines().filter(|l| l.starts_with("[upgrade/versions]")) {
                    if !line.contains("kubeadm version") {
                        assert!(ours.stderr().contains(line), "kubestrap lacks kubeadm's {line:?}:\n{}", ours.stderr());
                    }
                }
                theirs[start..].to_string()
            }
            _ => theirs,
        };
        // The kubeadm row (JSON and YAML only) names each tool's own version.
        let ours = ours.stdout().replace(&format!("v1.37 (kubestrap {})", env!("CARGO_PKG_VERSION")), NEW);
        assert_eq!(ours, table, "upgrade plan -o {output}: kubestrap's (left) and kubeadm's (right)");
    }
    let (code, _, err) = c.kubectl(&["uncordon", "cp-1", "cp-2"]);
    assert_eq!(code, 0, "uncordon: {err}");
}

fn not_before(root: &Path, p: &str) -> String {
    let pem = std::fs::read(root.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
    let (_, der) = x509_parser::pem::parse_x509_pem(&pem).expect("pem");
    let cert = der.parse_x509().expect("certificate");
    cert.validity().not_before.to_string()
}

/// Every file under the node's /etc/kubernetes (the tmp dir aside), with its content.
fn etc_tree(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.join("etc/kubernetes")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && !p.ends_with("tmp") {
                stack.push(p);
            } else if p.is_file() {
                out.push((p.display().to_string(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_control_plane_upgraded_across_a_minor_by_upgrade_apply_as_kubeadm_would() {
    let endpoint = format!("controlPlaneEndpoint: {CP_ADDR}:{{port}}\n");
    let mut c = Cluster::init_from(Tool::Kubestrap, &old_template(), "24h", &endpoint, &["--upload-certs"], &CA_DIRS);
    let root = c.root();
    let root_arg = root.display().to_string();
    assert_eq!(tags(&root), want_tags(OLD));
    assert_eq!(api_version(&c, &c.netns, CP_ADDR), OLD);
    c.wait_probes(0);
    // A second v1.36.3 control plane.
    let out = c.init.stdout();
    let key = out.split_whitespace().skip_while(|w| *w != "--certificate-key").nth(1).expect("key").to_string();
    c.wait_cluster_info_signed();
    c.set_version("cp-2", OLD);
    let join = c.join("cp-2", 1, &fixture!("real/join-control-plane.yaml").replace("{key}", &key), &[]);
    assert_eq!(join.code(), 0, "cp-2 join:\n{}\n{}", join.stderr(), c.status());
    c.wait_ready("cp-2");
    super::lease::holds_under_skew_and_loss(&c);
    let corefile = customise_coredns(&c);
    let proxy_image = |c: &Cluster| {
        let ds = c.get(&["-n", "kube-system", "daemonset", "kube-proxy"]);
        ds["spec"]["template"]["spec"]["containers"][0]["image"].as_str().unwrap_or_default().to_string()
    };

    plans_match_kubeadms(&c, &root);

    // Two minors on: kubeadm's mandatory rule, nothing written.
    let before = etc_tree(&root);
    let far = run_in(&c.netns, &["upgrade", "apply", "v1.38.0", "-y", "--root", &root_arg]);
    assert_eq!(far.code(), 2, "{}", far.stderr());
    assert!(far.stderr().contains("kubeadm can upgrade only 1 minor version at a time"), "{}", far.stderr());
    // Not confirmed (stdin is empty): nothing written.
    let unasked = run_in(&c.netns, &["upgrade", "apply", NEW, "--root", &root_arg]);
    assert_ne!(unasked.code(), 0);
    assert!(unasked.stderr().contains("won't proceed"), "{}", unasked.stderr());
    // A dry run shows the new manifests and writes nothing.
    let dry = run_in(&c.netns, &["upgrade", "apply", NEW, "--dry-run", "--print-config", "--root", &root_arg]);
    // --print-config: kubeadm's block on stdout, the ClusterConfiguration at the target, a tab before each line.
    let out = dry.stdout();
    assert!(out.starts_with("[upgrade/config] Configuration used:\n"), "{out}");
    assert!(out.contains(&format!("\tkubernetesVersion: {NEW}\n")), "{out}");
    assert!(out.lines().skip(1).all(|l| l.starts_with('\t')), "{out}");
    assert_eq!(dry.code(), 0, "{}", dry.stderr());
    assert!(dry.stderr().contains(&format!("image: registry.k8s.io/kube-apiserver:{NEW}")), "{}", dry.stderr());
    assert!(dry.stderr().contains("[upgrade/successful] Finished dryrunning successfully!"));
    assert_eq!(etc_tree(&root), before, "a refused or dry-run apply changed /etc/kubernetes");

    // A label, an annotation and a data key someone added to kubeadm-config: the upgrade rewrites
    // only data.ClusterConfiguration (kubeadm's CreateOrMutateConfigMap).
    for args in [
        &["-n", "kube-system", "label", "configmap", "kubeadm-config", "team=platform"][..],
        &["-n", "kube-system", "annotate", "configmap", "kubeadm-config", "example.com/owner=sre"],
    ] {
        let (code, _, err) = c.kubectl(args);
        assert_eq!(code, 0, "{args:?}: {err}");
    }
    c.set_config_data("kubeadm-config", serde_json::json!({"note": "kept"}));
    rollback_restores_every_manifest(&mut c, &root);

    let apiserver_before = not_before(&root, "etc/kubernetes/pki/apiserver.crt");
    let hashes = |c: &Cluster| -> Vec<String> {
        ["kube-apiserver", "kube-controller-manager", "kube-scheduler"]
            .iter()
            .map(|p| {
                let pod = c.get(&["-n", "kube-system", "pod", &format!("{p}-cp-1")]);
                pod["metadata"]["annotations"]["kubernetes.io/config.hash"].as_str().unwrap_or_default().to_string()
            })
            .collect()
    };
    let hashes_before = hashes(&c);
    assert!(hashes_before.iter().all(|h| !h.is_empty()), "mirror Pods' config.hash: {hashes_before:?}");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let t = std::time::Instant::now();
    let logs = c.logs.with_file_name("cp-1-upgrade-apply");
    std::fs::create_dir_all(&logs).unwrap();
    let r = run_watched(&c.netns, &["upgrade", "apply", NEW, "-y", "--root", &root_arg], &logs, &|| c.health());
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(r.code(), 0, "upgrade apply:\n{}\n{}", r.stderr(), c.status());
    // Read at once, no wait: apply returned only after the kubelet ran each new manifest.
    let hashes_after = hashes(&c);
    for (i, (b, a)) in hashes_before.iter().zip(&hashes_after).enumerate() {
        assert_ne!(b, a, "component {i}'s mirror Pod config.hash unchanged when apply returned");
    }
    println!("upgrade-apply: kubestrap {secs:.3} s");
    let err = r.stderr();
    for line in [
        format!("[upgrade/versions] Cluster version: {OLD}"),
        "[upgrade/staticpods] Component \"kube-apiserver\" upgraded successfully!".to_string(),
        "[upgrade/staticpods] Renewing apiserver certificate".to_string(),
        format!("[upgrade] SUCCESS! A control plane node of your cluster was upgraded to \"{NEW}\"."),
    ] {
        assert!(err.contains(&line), "missing {line:?}:\n{err}");
    }
    assert_eq!(tags(&root), want_tags(NEW));
    c.wait("the v1.37.2 API server", || (api_version(&c, &c.netns, CP_ADDR) == NEW).then_some(()));
    assert_ne!(not_before(&root, "etc/kubernetes/pki/apiserver.crt"), apiserver_before, "apiserver.crt renewed");

    let cm = c.get(&["-n", "kube-system", "configmap", "kubeadm-config"]);
    let cc = cm["data"]["ClusterConfiguration"].as_str().unwrap();
    assert!(cc.contains(&format!("kubernetesVersion: {NEW}\n")), "{cc}");
    assert_eq!(cm["data"]["note"], "kept", "kubeadm-config's other data kept");
    assert_eq!(cm["metadata"]["labels"]["team"], "platform", "kubeadm-config's labels kept");
    assert_eq!(cm["metadata"]["annotations"]["example.com/owner"], "sre", "kubeadm-config's annotations kept");
    // cp-2 still runs v1.36.3: the add-ons wait for it.
    assert!(
        err.contains(
            "[upgrade/addon] Skipping upgrade of addons because control plane instances [cp-2] have not been upgraded"
        ),
        "{err}"
    );
    assert_eq!(proxy_image(&c), format!("registry.k8s.io/kube-proxy:{OLD}"));
    let tmp: Vec<String> = std::fs::read_dir(root.join("etc/kubernetes/tmp"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let backup = tmp.iter().find(|n| n.starts_with("kubeadm-backup-manifests-")).expect("a manifest backup");
    let old_api =
        std::fs::read_to_string(root.join("etc/kubernetes/tmp").join(backup).join("kube-apiserver.yaml")).unwrap();
    assert!(old_api.contains(&format!("kube-apiserver:{OLD}")), "{old_api}");
    assert!(
        !tmp.iter().any(|n| n.starts_with("kubeadm-upgraded-manifests")),
        "the temp dir stays only on failure: {tmp:?}"
    );
    assert!(tmp.iter().any(|n| n.starts_with("kubeadm-backup-etcd-")), "etcd's data backed up: {tmp:?}");

    // The real kubeadm finds this control plane at v1.37.2 as it would have made it.
    kubeadm_finds_nothing_to_change(&c, &root, &logs);

    // `upgrade node` on cp-2: its static Pods at the cluster's new version, then the add-ons.
    let i = c.hosts.iter().position(|h| h.name == "cp-2").expect("cp-2");
    let (netns2, root2) = (c.hosts[i].netns.clone(), c.hosts[i].root.clone());
    let logs2 = c.logs.with_file_name("cp-2-upgrade-node");
    std::fs::create_dir_all(&logs2).unwrap();
    let node =
        run_watched(&netns2, &["upgrade", "node", "--root", &root2.display().to_string()], &logs2, &|| c.health());
    assert_eq!(node.code(), 0, "upgrade node on cp-2:\n{}\n{}", node.stderr(), c.status());
    assert!(
        node.stderr().contains(&format!(
            "[upgrade/control-plane] Upgrading your Static Pod-hosted control plane instance to version \"{NEW}\"..."
        )),
        "{}",
        node.stderr()
    );
    assert_eq!(tags(&root2), want_tags(NEW));
    c.wait("cp-2's v1.37.2 API server", || (api_version(&c, &netns2, &addr(1)) == NEW).then_some(()));
    assert_eq!(
        proxy_image(&c),
        format!("registry.k8s.io/kube-proxy:{NEW}"),
        "the last control plane upgraded the add-ons"
    );
    coredns_kept(&c, &corefile, "kubestrap");

    // The node restarts with the v1.37.2 kubelet.
    let (netns, scratch) = c.hosts.remove(0).power_off();
    c.set_version("cp-1", NEW);
    let logs = c.logs.clone();
    c.hosts.insert(0, Host::start_at(c.version("cp-1"), "cp-1", netns, &root, &logs, scratch, false));
    c.wait("cp-1's Node reporting the v1.37.2 kubelet", || {
        let (code, out, _) = c.kubectl(&["get", "-o", "json", "node", "cp-1"]);
        let node: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
        (code == 0 && node["status"]["nodeInfo"]["kubeletVersion"] == NEW).then_some(())
    });
    c.wait_ready("cp-1");
}

/// Where `upgrade apply` is SIGKILLed, one run after another on the same control plane, and
/// how long after the line aimed at (at most, µs): each rerun skips what the killed runs
/// finished and is killed at the next aim; the last run completes.
const APPLY_AIMS: &[(&str, &str, u64)] = &[
    ("the first component's roll", "[upgrade/staticpods] Moving new manifest to", 30_000),
    (
        "kube-controller-manager's roll",
        "[upgrade/staticpods] Preparing for \"kube-controller-manager\" upgrade",
        30_000,
    ),
    ("kubeconfig and upload-config", "[upgrade/control-plane] The control plane instance for this node", 30_000),
    ("bootstrap-token and the add-ons", "[upgrade/bootstrap-token] Configuring bootstrap token", 10_000),
];

/// The other direction: a v1.36.3 control plane the real kubeadm made, upgraded by kubestrap,
/// through power cuts: `upgrade apply` SIGKILLed at each aim of [`APPLY_AIMS`] in turn (a
/// component mid-roll, the next one, the config uploads, the add-ons), then run to the end: it
/// converges (what is done is skipped), the real API server answers v1.37.2, and the real
/// `kubeadm upgrade diff` finds nothing to change.
#[test]
fn a_control_plane_the_real_kubeadm_made_is_upgraded_by_kubestrap_through_power_cuts() {
    let c = Cluster::init_from(Tool::Kubeadm, &old_template(), "24h", "", &[], &CA_DIRS);
    let root = c.root();
    let root_arg = root.display().to_string();
    assert_eq!(tags(&root), want_tags(OLD));
    c.wait_probes(0);
    let logs = c.logs.with_file_name("cp-1-upgrade-apply");
    std::fs::create_dir_all(&logs).unwrap();
    let args = ["upgrade", "apply", NEW, "-y", "--root", root_arg.as_str()];
    let hashes_before = mirror_hashes(&c);
    let configs_before = component_configs(&c);
    let mut rng = Lcg(0x5eed_0004);
    for (i, (what, marker, jitter_us)) in APPLY_AIMS.iter().enumerate() {
        let log = logs.join(format!("killed-{i}"));
        // Every kill lands mid-run: a rerun prints each aimed line again (what is done is
        // skipped, the config and add-on phases run again), so a late one is tried again.
        let shot = super::kills::kill_landing(
            &c.netns,
            &args,
            (*marker, *jitter_us),
            &mut rng,
            &|| c.health(),
            &log,
            5,
            &|| {},
        );
        println!("upgrade apply killed in {what}: {}", shot.describe());
        let text = std::fs::read_to_string(&log).expect("the killed run's log");
        match i {
            // Killed in the controller manager's roll: the API server had rolled.
            1 => assert_eq!(tags(&root)[1], ("kube-apiserver", NEW.to_string()), "killed after the API server rolled"),
            2 => assert!(
                text.contains(
                    "[upgrade/staticpods] Current and new manifests of kube-apiserver are equal, skipping upgrade"
                ),
                "a rerun skips the component already rolled:\n{text}"
            ),
            _ => {}
        }
    }
    let again = run_watched(&c.netns, &args, &logs, &|| c.health());
    assert_eq!(again.code(), 0, "upgrade apply after the kills:\n{}\n{}", again.stderr(), c.status());
    assert_eq!(tags(&root), want_tags(NEW));
    c.wait("the v1.37.2 API server", || (api_version(&c, &c.netns, CP_ADDR) == NEW).then_some(()));
    converged(&c, &hashes_before, &configs_before);
    kubeadm_finds_nothing_to_change(&c, &root, &logs);
    c.wait_ready("cp-1");
}

/// cp-1's mirror Pods: (name, config.hash, first container's image), waited for (the kubelet
/// posts them a while after its static Pods run).
fn mirror_hashes(c: &Cluster) -> Vec<(String, String, String)> {
    c.wait("cp-1's four mirror Pods", || {
        ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]
            .iter()
            .map(|p| {
                let (code, out, _) =
                    c.kubectl(&["get", "-o", "json", "-n", "kube-system", "pod", &format!("{p}-cp-1")]);
                let pod: serde_json::Value = serde_json::from_str(&out).ok().filter(|_| code == 0)?;
                let hash = pod["metadata"]["annotations"]["kubernetes.io/config.hash"].as_str()?;
                let image = pod["spec"]["containers"][0]["image"].as_str().unwrap_or_default();
                Some((p.to_string(), hash.to_string(), image.to_string()))
            })
            .collect()
    })
}

/// kubelet-config's and kube-proxy's ConfigMaps: (name, component-config hash annotation, data).
fn component_configs(c: &Cluster) -> Vec<(String, serde_json::Value, serde_json::Value)> {
    ["kubelet-config", "kube-proxy"]
        .iter()
        .map(|name| {
            let cm = c.get(&["-n", "kube-system", "configmap", name]);
            let hash = cm["metadata"]["annotations"]["kubeadm.kubernetes.io/component-config.hash"].clone();
            (name.to_string(), hash, cm["data"].clone())
        })
        .collect()
}

/// What a finished `upgrade apply` leaves, read from the cluster, not the exit code:
/// kubeadm-config at v1.37.2; kubelet-config and kube-proxy's ConfigMap as kubeadm leaves them (a
/// signed one still signed, its component-config hash over its data; a user's, unsigned, kept
/// document for document); kube-proxy's and CoreDNS's images the new ones; each control-plane mirror
/// Pod running its v1.37.2 image under a new config.hash.
fn converged(
    c: &Cluster,
    hashes_before: &[(String, String, String)],
    configs_before: &[(String, serde_json::Value, serde_json::Value)],
) {
    let cm = c.get(&["-n", "kube-system", "configmap", "kubeadm-config"]);
    let cc = cm["data"]["ClusterConfiguration"].as_str().unwrap_or_default();
    assert!(cc.contains(&format!("kubernetesVersion: {NEW}\n")), "kubeadm-config:\n{cc}");
    for ((name, hash_before, data_before), (_, hash, data)) in configs_before.iter().zip(component_configs(c)) {
        if hash_before.is_null() {
            assert!(hash.is_null(), "{name}: a user's ConfigMap stays unsigned");
            // Kept as its documents say (re-marshalled, as kubeadm's upload-config rewrites it).
            let docs = |d: &serde_json::Value| -> Vec<(String, serde_yaml::Value)> {
                let m = d.as_object().expect("data");
                m.iter().map(|(k, v)| (k.clone(), serde_yaml::from_str(v.as_str().unwrap_or("")).unwrap())).collect()
            };
            assert_eq!(docs(&data), docs(data_before), "{name}: a user's ConfigMap is kept");
            continue;
        }
        let mut h = <sha2::Sha256 as sha2::Digest>::new();
        for v in data.as_object().expect("data").values() {
            sha2::Digest::update(&mut h, v.as_str().unwrap_or_default().as_bytes());
        }
        let sum: String = sha2::Digest::finalize(h).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hash, format!("sha256:{sum}"), "{name}'s component-config hash is over its data");
    }
    let image = |kind: &str, name: &str| {
        let o = c.get(&["-n", "kube-system", kind, name]);
        o["spec"]["template"]["spec"]["containers"][0]["image"].as_str().unwrap_or_default().to_string()
    };
    assert_eq!(image("daemonset", "kube-proxy"), format!("registry.k8s.io/kube-proxy:{NEW}"));
    assert_eq!(image("deployment", "coredns"), "registry.k8s.io/coredns/coredns:v1.14.6");
    for ((name, before, _), (_, after, image)) in hashes_before.iter().zip(mirror_hashes(c)) {
        if name == "etcd" {
            assert!(image.ends_with(":3.7.0-0"), "{name}: {image}");
            continue;
        }
        assert_ne!(*before, after, "{name}-cp-1's config.hash unchanged: the kubelet never ran its new manifest");
        assert!(image.ends_with(&format!(":{NEW}")), "{name}-cp-1 runs {image}");
    }
}

/// Every static Pod (mirror Pod) of `nodes` control planes Running, as kubeadm's upgrade waits for.
fn wait_static_pods_running(c: &Cluster, nodes: usize) {
    c.wait("the mirror Pods Running", || {
        let pods = c.get(&["-n", "kube-system", "pods", "-l", "tier=control-plane"]);
        let items = pods["items"].as_array()?;
        (items.len() == 4 * nodes && items.iter().all(|p| p["status"]["phase"] == "Running")).then_some(())
    });
}

/// The real `kubeadm upgrade apply v1.37.2` and `upgrade node` on two v1.36.3 control planes
/// kubestrap made. Their kubelets run the static Pods' stand-in containers
/// (tests/real/standins.rs), so the mirror Pods reach Running as kubeadm waits for; the Nodes are
/// cordoned so kubeadm skips its test Job, and its image pull (no registry here) is a warning.
/// kubeadm succeeds on both, the real API servers answer v1.37.2, and kubestrap agrees with every
/// file kubeadm wrote: `upgrade plan` finds nothing to upgrade, `upgrade diff` nothing to change,
/// and `upgrade apply` / `upgrade node` run after it find all four manifests of each node equal
/// to their own and skip them. (bench/upgrade-apply.sh runs it with UPGRADE_BY=kubestrap too.)
#[test]
fn control_planes_kubestrap_made_are_upgraded_by_the_real_kubeadm() {
    let dir = std::env::temp_dir().join(format!("kubestrap-standins-{}", std::process::id()));
    let dir = super::standins::build(&dir, &[OLD, NEW], "3.7.0-0").display().to_string();
    let mut files = CA_DIRS.to_vec();
    files.push((super::standins::MARK, dir.as_str()));
    let endpoint = format!("controlPlaneEndpoint: {CP_ADDR}:{{port}}\n");
    let mut c = Cluster::init_from(Tool::Kubestrap, &old_template(), "24h", &endpoint, &["--upload-certs"], &files);
    let (root, root_arg) = (c.root(), c.root().display().to_string());
    assert_eq!(tags(&root), want_tags(OLD));
    c.wait_probes(0);
    let out = c.init.stdout();
    let key = out.split_whitespace().skip_while(|w| *w != "--certificate-key").nth(1).expect("key").to_string();
    c.wait_cluster_info_signed();
    c.set_version("cp-2", OLD);
    let w = Scratch::new("");
    for (path, text) in &files {
        write_file(&at(&w.root(), path), text);
    }
    let join_cp = fixture!("real/join-control-plane.yaml").replace("{key}", &key);
    std::fs::write(w.config(), c.fill_node(&join_cp, "cp-2", 1, &w.root())).expect("join config");
    let args = vec!["join".to_string(), "--config".into(), w.config(), "--root".into(), w.root_str()];
    let join = c.node("cp-2", 1, w, &[args]).remove(0);
    assert_eq!(join.code(), 0, "cp-2 join:\n{}\n{}", join.stderr(), c.status());
    c.wait_ready("cp-2");
    wait_static_pods_running(&c, 2);
    let (code, _, err) = c.kubectl(&["cordon", "cp-1", "cp-2"]);
    assert_eq!(code, 0, "cordon: {err}");
    let corefile = customise_coredns(&c);
    let i = c.hosts.iter().position(|h| h.name == "cp-2").expect("cp-2");
    let (netns2, root2) = (c.hosts[i].netns.clone(), c.hosts[i].root.clone());
    let root2_arg = root2.display().to_string();

    // bench/upgrade-apply.sh times both tools on this same shape: UPGRADE_BY=kubestrap.
    let by = std::env::var("UPGRADE_BY").unwrap_or_else(|_| "kubeadm".into());
    let ignore = "--ignore-preflight-errors=ImagePull,SystemVerification";
    let upgrade = |netns: &super::net::Netns, root: &Path, args: &[&str], logs: &str| {
        let logs = c.logs.with_file_name(logs);
        std::fs::create_dir_all(&logs).unwrap();
        let t = std::time::Instant::now();
        let r = if by == "kubestrap" {
            let root_arg = root.display().to_string();
            let mut all = args.to_vec();
            all.extend(["--root", root_arg.as_str()]);
            run_watched(netns, &all, &logs, &|| c.health())
        } else {
            let mut all = args.to_vec();
            all.push(ignore);
            run_kubeadm(netns, root, &logs, &all, &|| c.health())
        };
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(r.code(), 0, "{by} {args:?}:\n{}\n{}\n{}", r.stdout(), r.stderr(), c.status());
        println!("{} (beside kubeadm): {by} {secs:.3} s", args[..2].join("-"));
        format!("{}{}", r.stdout(), r.stderr())
    };
    unmigratable_corefile_refused_by_both(&c, &root, &corefile, ignore);
    let out = upgrade(&c.netns, &root, &["upgrade", "apply", NEW, "-y"], "cp-1-upgrade-apply");
    let success = format!("[upgrade] SUCCESS! A control plane node of your cluster was upgraded to \"{NEW}\".");
    assert!(out.contains(&success), "{out}");
    assert_eq!(tags(&root), want_tags(NEW));
    c.wait("cp-1's v1.37.2 API server", || (api_version(&c, &c.netns, CP_ADDR) == NEW).then_some(()));
    let out = upgrade(&netns2, &root2, &["upgrade", "node"], "cp-2-upgrade-node");
    assert!(
        out.contains("[upgrade/control-plane] The control plane instance for this node was successfully upgraded!")
    );
    assert_eq!(tags(&root2), want_tags(NEW));
    c.wait("cp-2's v1.37.2 API server", || (api_version(&c, &netns2, &addr(1)) == NEW).then_some(()));
    wait_static_pods_running(&c, 2);
    let ds = c.get(&["-n", "kube-system", "daemonset", "kube-proxy"]);
    assert_eq!(ds["spec"]["template"]["spec"]["containers"][0]["image"], format!("registry.k8s.io/kube-proxy:{NEW}"));
    // The same facts whichever tool upgraded: kubestrap's CoreDNS upgrade is kubeadm's.
    coredns_kept(&c, &corefile, &by);

    let plan = run_in(&c.netns, &["upgrade", "plan", NEW, "--root", &root_arg]);
    assert_eq!(plan.code(), 0, "{}", plan.stderr());
    assert_eq!(plan.stdout(), "", "kubestrap's plan after the upgrade");
    let manifests = |root: &Path| -> Vec<(String, Vec<u8>)> {
        etc_tree(root).into_iter().filter(|(p, _)| p.contains("/manifests/")).collect()
    };
    let logs = c.logs.with_file_name("kubestrap-after");
    std::fs::create_dir_all(&logs).unwrap();
    for (netns, root, root_arg, cmd) in [
        (&c.netns, &root, &root_arg, vec!["upgrade", "apply", NEW, "-y"]),
        (&netns2, &root2, &root2_arg, vec!["upgrade", "node"]),
    ] {
        let diff = run_in(netns, &["upgrade", "diff", NEW, "--root", root_arg]);
        assert_eq!(diff.code(), 0, "{}", diff.stderr());
        assert_eq!(diff.stdout(), "", "kubestrap would change the manifests of {root_arg}");
        let before = manifests(root);
        let mut args = cmd.clone();
        args.extend(["--root", root_arg.as_str()]);
        let again = run_watched(netns, &args, &logs, &|| c.health());
        assert_eq!(again.code(), 0, "kubestrap {cmd:?} after the upgrade:\n{}", again.stderr());
        for component in ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"] {
            let skip =
                format!("[upgrade/staticpods] Current and new manifests of {component} are equal, skipping upgrade");
            assert!(again.stderr().contains(&skip), "{cmd:?}, {component}: {}", again.stderr());
        }
        assert_eq!(manifests(root), before, "kubestrap {cmd:?} changed a manifest");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
