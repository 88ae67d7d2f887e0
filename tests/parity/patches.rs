//! kubeadm's patches (`patches.directory`) on the real kubeadm v1.37.2 and on kubestrap, one
//! case per directory under tests/fixtures/patches/ (its README says what each proves).
//! kubeadm runs the on-disk phases that apply patches (etcd local, control-plane all,
//! kubelet-start) and `init --dry-run` (the addon targets and one process's `[patches]` log);
//! kubestrap runs `init --dry-run` and `init --on-disk-only` on a root holding the same
//! directory. The static Pod manifests and the kubelet's config.yaml must match byte for byte
//! (both sides write their own re-serialisation), the CoreDNS Deployment and kube-proxy
//! DaemonSet fact by fact (api.rs, allow.rs), and the `[patches]` lines in order.

use crate::common::{self, Run, Scratch, fixture, fixture_path};
use crate::{api, bins, diff};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The config's patch directory: a node path, so kubestrap reads it under its --root.
const NODE_DIR: &str = "/etc/kubernetes/patches";

/// The files kubeadm writes from patched targets.
const FILES: &[&str] = &[
    "etc/kubernetes/manifests/etcd.yaml",
    "etc/kubernetes/manifests/kube-apiserver.yaml",
    "etc/kubernetes/manifests/kube-controller-manager.yaml",
    "etc/kubernetes/manifests/kube-scheduler.yaml",
    "var/lib/kubelet/config.yaml",
];

/// The on-disk phases that apply patches (certs and kubeconfig apply none and are not needed).
const PHASES: &[&str] = &["etcd local", "control-plane all", "kubelet-start"];

/// The addon objects patches reach: (kind, name).
const ADDONS: &[(&str, &str)] = &[("Deployment", "coredns"), ("DaemonSet", "kube-proxy")];

/// What the real kubeadm does with a case.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    /// Every phase and the dry run succeed.
    Accepts,
    /// An on-disk phase fails, and so does the dry run.
    Refuses,
    /// The on-disk phases succeed; the dry run fails in an addon phase.
    RefusesAddon,
}
use Outcome::*;

/// sample.yaml with `patches.directory` in its InitConfiguration.
fn config() -> String {
    let sample = fixture!("parity/sample.yaml");
    let head = "kind: InitConfiguration\n";
    assert!(sample.contains(head), "sample.yaml has no InitConfiguration");
    sample.replacen(head, &format!("{head}patches:\n  directory: {NODE_DIR}\n"), 1)
}

fn case_dir(case: &str) -> PathBuf {
    let dir = fixture_path(&format!("patches/{case}"));
    assert!(dir.is_dir(), "{} is missing", dir.display());
    dir
}

/// Cases whose directory the test builds, not a fixture: what a config may point at.
const BUILT: &[&str] = &["empty-directory", "missing-directory", "symlinked-directory"];

/// Shell commands that put a case's patch directory at `dest` (its parent exists).
fn prepare(case: &str, dest: &str) -> String {
    match case {
        "empty-directory" => format!("mkdir '{dest}'"),
        "missing-directory" => "true".into(),
        // A relative link, so it resolves the same under kubestrap's --root.
        "symlinked-directory" => {
            format!("cp -a {} '{dest}.real' && ln -s \"$(basename '{dest}').real\" '{dest}'", q(&case_dir("flag-dir")))
        }
        _ => format!("cp -a {} '{dest}'", q(&case_dir(case))),
    }
}

fn q(p: &Path) -> String {
    format!("'{}'", p.display())
}

/// What the real kubeadm did with one case.
struct Kubeadm {
    /// Exit code of each of PHASES, in order.
    phases: Vec<i32>,
    phases_err: String,
    /// The FILES it wrote.
    files: BTreeMap<&'static str, Vec<u8>>,
    dry_code: i32,
    dry_out: String,
    dry_err: String,
}

impl Kubeadm {
    fn outcome(&self) -> Outcome {
        match (self.phases.iter().all(|c| *c == 0), self.dry_code == 0) {
            (true, true) => Accepts,
            (true, false) => RefusesAddon,
            (false, false) => Refuses,
            (false, true) => panic!("kubeadm's phases failed but its dry run did not:\n{}", self.phases_err),
        }
    }
    fn patches_lines(&self) -> Vec<String> {
        patches_lines(&self.dry_out, "")
    }
    fn addons(&self) -> Vec<Value> {
        addons(api::created(&self.dry_out))
    }
}

/// Runs kubeadm's patching phases, then its dry run, on `case` with config `config`, in a mount
/// and network namespace of their own (tmpfs over /etc/kubernetes and /var/lib, no network).
fn kubeadm(case: &str, config: &Path, dir: &Path) -> Kubeadm {
    assert!(rustix::process::geteuid().is_root(), "tests/parity needs root: kubeadm runs in its own mount namespace");
    let (kubeadm, out) = (bins::bin("kubeadm"), dir.join("kubeadm"));
    std::fs::create_dir_all(&out).expect("mkdir kubeadm out");
    let (bin, cfg, o) = (q(&kubeadm), q(config), out.display());
    let mut script = format!(
        "set -e; mkdir -p /etc/kubernetes; mount -t tmpfs none /etc/kubernetes; mount -t tmpfs none /var/lib\n\
         {}\nset +e\n",
        prepare(case, NODE_DIR)
    );
    for (i, phase) in PHASES.iter().enumerate() {
        script += &format!(
            "{bin} init phase {phase} --config {cfg} >'{o}/p{i}.out' 2>'{o}/p{i}.err'; echo $? >'{o}/p{i}.rc'\n"
        );
    }
    // Copied before the dry run, which writes to a directory of its own anyway.
    script += &format!(
        "set -e; mkdir -p '{o}/etc/kubernetes' '{o}/var/lib/kubelet'\n\
         if [ -d /etc/kubernetes/manifests ]; then cp -a /etc/kubernetes/manifests '{o}/etc/kubernetes/'; fi\n\
         if [ -f /var/lib/kubelet/config.yaml ]; then cp -a /var/lib/kubelet/config.yaml '{o}/var/lib/kubelet/'; fi\n\
         set +e; {bin} init --dry-run --config {cfg} --ignore-preflight-errors=all >'{o}/dry.out' 2>'{o}/dry.err'; echo $? >'{o}/dry.rc'\n"
    );
    let file = dir.join("kubeadm-patches.sh");
    std::fs::write(&file, script).expect("write script");
    let (code, stdout, stderr) = common::sh(&format!("unshare --net --mount --propagation private sh {}", q(&file)));
    assert_eq!(code, 0, "the kubeadm script failed:\n{stdout}\n{stderr}");
    let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let rc = |name: &str| read(name).trim().parse::<i32>().expect("exit code");
    let files = FILES.iter().filter_map(|f| std::fs::read(out.join(f)).ok().map(|b| (*f, b))).collect();
    Kubeadm {
        phases: (0..PHASES.len()).map(|i| rc(&format!("p{i}.rc"))).collect(),
        phases_err: (0..PHASES.len()).map(|i| read(&format!("p{i}.err"))).collect(),
        files,
        dry_code: rc("dry.rc"),
        dry_out: read("dry.out"),
        dry_err: read("dry.err"),
    }
}

/// The `[patches]` lines of a log, with `root` (kubestrap's scratch root) taken out of paths.
fn patches_lines(log: &str, root: &str) -> Vec<String> {
    let lines = log.lines().filter(|l| l.starts_with("[patches]"));
    lines.map(|l| if root.is_empty() { l.to_string() } else { l.replace(root, "") }).collect()
}

/// The CoreDNS Deployment and kube-proxy DaemonSet among `objects`.
fn addons(objects: Vec<Value>) -> Vec<Value> {
    let wanted = |o: &Value| ADDONS.iter().any(|(k, n)| o["kind"] == *k && o["metadata"]["name"] == *n);
    objects.into_iter().filter(wanted).collect()
}

/// What kubestrap did with one case: its dry run and its on-disk run, on one scratch root.
struct Ours {
    s: Scratch,
    dry: Run,
    disk: Run,
}

impl Ours {
    fn file(&self, f: &str) -> Option<Vec<u8>> {
        std::fs::read(self.s.root().join(f)).ok()
    }
    fn manifests(&self) -> Vec<String> {
        let dir = self.s.root().join("etc/kubernetes/manifests");
        let entries = std::fs::read_dir(dir).into_iter().flatten();
        entries.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect()
    }
}

/// Puts the case at `<root>/etc/kubernetes/patches` and mirrors the host's CA dirs (kubeadm
/// mounts those that exist); runs the dry run first, which leaves the root as it was.
fn kubestrap(case: &str) -> Ours {
    let s = Scratch::new(&config());
    let dest = s.path(NODE_DIR);
    std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir etc/kubernetes");
    let (code, out, err) = common::sh(&prepare(case, &dest.display().to_string()));
    assert_eq!(code, 0, "preparing {case}:\n{out}{err}");
    for d in crate::facts::CA_DIRS.iter().filter(|d| Path::new("/").join(d).is_dir()) {
        std::fs::create_dir_all(s.root().join(d)).expect("mkdir CA dir");
    }
    let (config, root) = (s.config(), s.root_str());
    let dry = common::kubestrap(&[
        "init",
        "--dry-run",
        "--config",
        &config,
        "--root",
        &root,
        "--ignore-preflight-errors=all",
    ]);
    let disk = s.init(&["--ignore-preflight-errors=all"]);
    Ours { s, dry, disk }
}

/// A line diff of two texts: the differing lines with two lines of context, or None if equal.
fn text_diff(a: &str, b: &str) -> Option<String> {
    if a == b {
        return None;
    }
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    // Longest common subsequence, from the ends.
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let mut ops: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', a[i]));
            (i, j) = (i + 1, j + 1);
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            ops.push(('+', b[j]));
            j += 1;
        } else {
            ops.push(('-', a[i]));
            i += 1;
        }
    }
    let near = |k: usize| ops[k.saturating_sub(2)..(k + 3).min(ops.len())].iter().any(|(c, _)| *c != ' ');
    if ops.iter().all(|(c, _)| *c == ' ') {
        return Some("(the same lines; the line endings or the final newline differ)".into());
    }
    let mut out = String::from("--- kubeadm\n+++ kubestrap\n");
    let mut gap = false;
    for (k, (c, line)) in ops.iter().enumerate() {
        if near(k) {
            _ = writeln!(out, "{c}{line}");
            gap = false;
        } else if !gap {
            out += "@@\n";
            gap = true;
        }
    }
    Some(out)
}

/// The problems with kubestrap's run of a case kubeadm accepts (or accepts on disk).
fn compare(name: &str, theirs: &Kubeadm, ours: &Ours) -> Vec<String> {
    let mut bad = Vec::new();
    let root = ours.s.root_str();
    if ours.disk.code() != 0 {
        bad.push(format!("kubestrap init --on-disk-only exited {}:\n{}", ours.disk.code(), ours.disk.stderr()));
        return bad;
    }
    for f in FILES {
        let Some(want) = theirs.files.get(f) else { panic!("kubeadm wrote no {f}") };
        match ours.file(f) {
            None => bad.push(format!("{f}: kubestrap wrote none")),
            Some(got) => {
                let (want, got) = (String::from_utf8_lossy(want), String::from_utf8_lossy(&got));
                if let Some(d) = text_diff(&want, &got) {
                    bad.push(format!("{f} differs:\n{d}"));
                }
            }
        }
    }
    // One process each: kubeadm's dry run logs every target; kubestrap's on-disk run all but the addons'.
    let want = theirs.patches_lines();
    let on_disk: Vec<String> = want.iter().filter(|l| !is_addon_line(l)).cloned().collect();
    let got = patches_lines(&ours.disk.stderr(), &root);
    if let Some(d) = text_diff(&on_disk.join("\n"), &got.join("\n")) {
        bad.push(format!("[patches] lines of init --on-disk-only differ:\n{d}"));
    }
    if theirs.outcome() == RefusesAddon {
        return bad;
    }
    if ours.dry.code() != 0 {
        bad.push(format!("kubestrap init --dry-run exited {}:\n{}", ours.dry.code(), ours.dry.stderr()));
        return bad;
    }
    let got = patches_lines(&ours.dry.stderr(), &root);
    if let Some(d) = text_diff(&want.join("\n"), &got.join("\n")) {
        bad.push(format!("[patches] lines of init --dry-run differ:\n{d}"));
    }
    let plan: Value = serde_json::from_str(&ours.dry.stdout()).expect("dry-run JSON");
    let created = plan["objects"].as_array().expect("objects").iter();
    let ours_objects = addons(created.filter(|o| o["verb"] == "create").map(|o| o["object"].clone()).collect());
    let theirs_objects = theirs.addons();
    assert_eq!(theirs_objects.len(), ADDONS.len(), "kubeadm's dry run printed no CoreDNS or kube-proxy");
    let (n, report) = diff::compare(
        &format!("patches-{name} addons"),
        &api::facts(&theirs_objects, 0),
        &api::facts(&ours_objects, 0),
    );
    if n > 0 {
        bad.push(report);
    }
    bad
}

fn is_addon_line(l: &str) -> bool {
    l.contains("to target \"corednsdeployment\"") || l.contains("to target \"kubeproxydaemonset\"")
}

/// One case on both: kubestrap must do what kubeadm did.
fn parity(name: &str) {
    let ours = kubestrap(name);
    let theirs = kubeadm(name, Path::new(&ours.s.config()), ours.s.dir.path());
    let outcome = theirs.outcome();
    assert_eq!(outcome, expected(name).outcome, "kubeadm's outcome for {name} is not the one documented");
    if outcome == Refuses {
        return refused(name, &theirs, &ours);
    }
    let mut bad = compare(name, &theirs, &ours);
    if outcome == RefusesAddon {
        bad.extend(dry_refused(name, &ours));
    }
    assert!(bad.is_empty(), "patches case {name}: kubestrap differs from kubeadm v1.37.2:\n\n{}", bad.join("\n\n"));
}

/// The patch files of a case as `patches/<path>`: a refusal names one of them by its path (or,
/// for the built cases, the directory).
fn patch_files(case: &str) -> Vec<String> {
    if BUILT.contains(&case) {
        return vec![NODE_DIR.trim_start_matches('/').to_string()];
    }
    let dir = &case_dir(case);
    let files = common::snapshot(dir).into_iter();
    files.map(|(p, _, _)| format!("patches/{}", p.strip_prefix(dir).expect("under dir").display())).collect()
}

/// kubestrap's dry run must refuse the way kubeadm's did: exit 2, naming a patch file.
fn dry_refused(case: &str, ours: &Ours) -> Vec<String> {
    let (code, err) = (ours.dry.code(), ours.dry.stderr());
    let files = patch_files(case);
    let mut bad = Vec::new();
    if code != 2 {
        bad.push(format!("kubestrap init --dry-run exited {code}, not 2:\n{err}"));
    }
    if !files.iter().any(|f| err.contains(f.as_str())) {
        bad.push(format!("kubestrap init --dry-run's error names none of {files:?}:\n{err}"));
    }
    bad
}

/// A case kubeadm refuses on disk: kubestrap refuses too (exit 2, the file named) and, unlike
/// kubeadm (which has written the manifests before the failing one), writes no manifest.
fn refused(name: &str, theirs: &Kubeadm, ours: &Ours) {
    let mut bad = dry_refused(name, ours);
    let (code, err) = (ours.disk.code(), ours.disk.stderr());
    let files = patch_files(name);
    if code != 2 {
        bad.push(format!("kubestrap init --on-disk-only exited {code}, not 2:\n{err}"));
    }
    if !files.iter().any(|f| err.contains(f.as_str())) {
        bad.push(format!("kubestrap init --on-disk-only's error names none of {files:?}:\n{err}"));
    }
    let written = ours.manifests();
    if !written.is_empty() {
        bad.push(format!("kubestrap wrote static Pod manifests although it refused: {written:?}"));
    }
    assert!(
        bad.is_empty(),
        "patches case {name}: kubeadm refused it ({}), kubestrap did not refuse it the same way:\n\n{}",
        theirs.phases_err.lines().find(|l| l.starts_with("error:")).unwrap_or_default(),
        bad.join("\n\n")
    );
}

/// What kubeadm does with a case, as tests/fixtures/patches/README.md describes it.
struct Expected {
    outcome: Outcome,
    /// The `Found the following patch files` list; None where kubeadm fails before it.
    found: Option<&'static str>,
    /// The `Applied patch` lines as `type:target`, s/m/j for strategic/merge/json; empty where
    /// kubeadm fails before the dry run applies anything.
    applied: &'static str,
    /// A part of kubeadm's error, for the cases it refuses.
    error: &'static str,
}

const fn ok(found: &'static str, applied: &'static str) -> Expected {
    Expected { outcome: Accepts, found: Some(found), applied, error: "" }
}

const fn no(found: Option<&'static str>, applied: &'static str, error: &'static str) -> Expected {
    Expected { outcome: Refuses, found, applied, error }
}

/// Every `s:kubeletconfiguration` last in a list is kubeadm's own instance-config.yaml patch.
fn expected(case: &str) -> Expected {
    match case {
        "all-targets" => ok(
            "corednsdeployment.yaml etcd.yaml kube-apiserver.yaml kube-controller-manager.yaml kube-scheduler.yaml \
             kubeletconfiguration.yaml kubeproxydaemonset.yaml",
            "s:etcd s:kube-apiserver s:kube-controller-manager s:kube-scheduler s:kubeletconfiguration \
             s:kubeletconfiguration s:corednsdeployment s:kubeproxydaemonset",
        ),
        "apiserver-resources" => ok("kube-apiserver.yaml", "s:kube-apiserver s:kubeletconfiguration"),
        "etcd-json" => ok("etcd+json.json", "j:etcd s:kubeletconfiguration"),
        "controller-manager-merge" => {
            ok("kube-controller-manager+merge.yaml", "m:kube-controller-manager s:kubeletconfiguration")
        }
        "scheduler-strategic-json" => ok("kube-scheduler+strategic.json", "s:kube-scheduler s:kubeletconfiguration"),
        "kubelet-config" => ok("kubeletconfiguration.yaml", "s:kubeletconfiguration s:kubeletconfiguration"),
        "kubelet-config-json" => ok(
            "kubeletconfiguration+json.yaml kubeletconfiguration0+merge.json",
            "j:kubeletconfiguration m:kubeletconfiguration s:kubeletconfiguration",
        ),
        "kubelet-wrong-shape" => ok("kubeletconfiguration.yaml", "s:kubeletconfiguration s:kubeletconfiguration"),
        "unknown-fields" => ok(
            "kube-controller-manager+merge.yaml kubeletconfiguration+merge.yaml",
            "m:kube-controller-manager m:kubeletconfiguration s:kubeletconfiguration",
        ),
        "yaml11-scalars" => ok("kubeletconfiguration.yaml", "s:kubeletconfiguration s:kubeletconfiguration"),
        "coredns-replicas" => ok("corednsdeployment.yaml", "s:kubeletconfiguration s:corednsdeployment"),
        "coredns-resources" => ok(
            "corednsdeployment+json.yaml corednsdeployment0+merge.yaml",
            "s:kubeletconfiguration j:corednsdeployment m:corednsdeployment",
        ),
        "kube-proxy" => ok("kubeproxydaemonset.yaml", "s:kubeletconfiguration s:kubeproxydaemonset"),
        "multi-document" => ok(
            "kube-apiserver.yaml kube-scheduler+json.yaml",
            "s:kube-apiserver s:kube-apiserver s:kube-apiserver s:kube-apiserver j:kube-scheduler j:kube-scheduler \
             s:kubeletconfiguration",
        ),
        "subdirs" => ok(
            "kube-scheduler+merge.yaml kube-scheduler.yaml etcd.yaml kube-scheduler.yaml",
            "s:etcd m:kube-scheduler s:kube-scheduler s:kube-scheduler s:kubeletconfiguration",
        ),
        "ordering" => ok(
            "kube-apiserver+json.yaml kube-apiserver-a.yaml kube-apiserver.yaml kube-apiserver0+merge.yaml \
             kube-apiserverZ.yaml kube-apiservera+strategic.yaml",
            "j:kube-apiserver s:kube-apiserver s:kube-apiserver m:kube-apiserver s:kube-apiserver s:kube-apiserver \
             s:kubeletconfiguration",
        ),
        "ignored-files" => ok("kube-scheduler.bak.yaml", "s:kube-scheduler s:kubeletconfiguration"),
        "empty-file" => ok(
            "kube-controller-manager.json kube-scheduler.yaml",
            "s:kube-controller-manager s:kube-scheduler s:kubeletconfiguration",
        ),
        "smp-delete" => ok(
            "kube-apiserver.yaml kube-scheduler.yaml kube-scheduler0.yaml",
            "s:kube-apiserver s:kube-scheduler s:kube-scheduler s:kubeletconfiguration",
        ),
        "smp-replace" => ok("kube-controller-manager.yaml", "s:kube-controller-manager s:kubeletconfiguration"),
        "smp-retainkeys" => ok("etcd.yaml", "s:etcd s:kubeletconfiguration"),
        "smp-set-element-order" => ok("kube-apiserver.yaml", "s:kube-apiserver s:kubeletconfiguration"),
        "smp-delete-from-primitive-list" => {
            ok("kube-scheduler.yaml kube-scheduler0.yaml", "s:kube-scheduler s:kube-scheduler s:kubeletconfiguration")
        }
        "merge-keys" => ok(
            "etcd.yaml kube-apiserver.yaml kube-apiserver0.yaml",
            "s:etcd s:kube-apiserver s:kube-apiserver s:kubeletconfiguration",
        ),
        "command-strategic-vs-json" => ok(
            "kube-controller-manager+json.yaml kube-scheduler.yaml",
            "j:kube-controller-manager s:kube-scheduler s:kubeletconfiguration",
        ),
        "null-deletes" => ok("kube-apiserver.yaml", "s:kube-apiserver s:kubeletconfiguration"),
        "kind-change" => ok("kube-scheduler+merge.yaml", "m:kube-scheduler s:kubeletconfiguration"),
        "real-giantswarm" => ok(
            "kube-apiserver0+json.yaml kube-apiserver1selinux+json.yaml kube-controller-manager0+json.yaml \
             kubeletconfiguration.yaml",
            "j:kube-apiserver j:kube-apiserver j:kube-controller-manager s:kubeletconfiguration s:kubeletconfiguration",
        ),
        "real-azimuth" => ok("kube-apiserver0+strategic.yaml", "s:kube-apiserver s:kubeletconfiguration"),
        "real-kubespray" => ok("kube-scheduler0+json.yaml", "j:kube-scheduler s:kubeletconfiguration"),
        "flag-dir" | "flag-config-dir" => ok("kube-scheduler.yaml", "s:kube-scheduler s:kubeletconfiguration"),
        "err-missing-type" | "err-unknown-type" => {
            no(None, "", "unknown or missing patch type after '+', must be one of [json merge strategic]")
        }
        "err-invalid-yaml" => no(None, "", "could not convert patch to JSON"),
        "err-not-a-list" => {
            no(Some("etcd+json.yaml"), "", "cannot unmarshal object into Go value of type jsonpatch.Patch")
        }
        "err-json-test-fails" => no(Some("kube-controller-manager+json.yaml"), "", "test failed"),
        "err-json-remove-missing" => no(Some("kube-scheduler+json.yaml"), "", "Unable to remove nonexistent key: args"),
        "err-strategic-wrong-shape" => no(
            Some("kube-apiserver.yaml"),
            "s:kube-apiserver",
            "cannot unmarshal string into Go struct field PodSpec.spec.containers",
        ),
        "err-kind-unregistered" => {
            no(Some("kube-scheduler+merge.yaml"), "m:kube-scheduler", "no kind \"Deployment\" is registered")
        }
        "err-yaml11-bool-annotation" => no(
            Some("kube-scheduler.yaml"),
            "s:kube-scheduler",
            "failed to patch static Pod manifest file for \"kube-scheduler\"",
        ),
        "err-coredns-json" => Expected {
            outcome: RefusesAddon,
            found: Some("corednsdeployment+json.yaml"),
            applied: "s:kubeletconfiguration",
            error: "could not apply patches to the CoreDNS Deployment",
        },
        "empty-directory" => Expected { outcome: Accepts, found: None, applied: "s:kubeletconfiguration", error: "" },
        "missing-directory" => no(
            None,
            "",
            "could not list patch files for path \"/etc/kubernetes/patches\": lstat /etc/kubernetes/patches: no such file",
        ),
        "symlinked-directory" => no(None, "", "getPatchSetsFromPath patches: not a directory"),
        other => panic!("no expectation for patches case {other}: add it here and to the README"),
    }
}

/// The `Applied patch` lines of a log as `type:target` words.
fn applied(lines: &[String]) -> String {
    let words = lines.iter().filter_map(|l| {
        let rest = l.strip_prefix("[patches] Applied patch of type \"")?;
        let (mime, rest) = rest.split_once('"')?;
        let target = rest.strip_prefix(" to target \"")?.strip_suffix('"')?;
        let t = match mime {
            "application/strategic-merge-patch+json" => "s",
            "application/merge-patch+json" => "m",
            "application/json-patch+json" => "j",
            other => panic!("patch type {other}"),
        };
        Some(format!("{t}:{target}"))
    });
    words.collect::<Vec<_>>().join(" ")
}

/// Documented kubeadm behaviour the per-case comparisons rely on: (case, file, text the file must
/// contain, or with a leading `!` must not).
const QUIRKS: &[(&str, &str, &str)] = &[
    ("apiserver-resources", "kube-apiserver.yaml", "cpu: \"2\"\n        ephemeral-storage: 1G\n"),
    ("apiserver-resources", "kube-apiserver.yaml", "cpu: 500m\n        memory: 1Gi\n"),
    ("kubelet-wrong-shape", "config.yaml", "evictionHard:\n- memory.available\n"),
    ("unknown-fields", "config.yaml", "notAKubeletField: 1\n"),
    ("unknown-fields", "kube-controller-manager.yaml", "  - image: registry.example.com/kcm:v1.37.2\n"),
    ("unknown-fields", "kube-controller-manager.yaml", "!notAField"),
    ("unknown-fields", "kube-controller-manager.yaml", "    resources: {}\n"),
    ("yaml11-scalars", "config.yaml", "failSwapOn: false\n"),
    ("yaml11-scalars", "config.yaml", "maxPods: 72\n"),
    ("yaml11-scalars", "config.yaml", "podPidsLimit: 1000\n"),
    ("yaml11-scalars", "config.yaml", "registerNode: true\n"),
    ("yaml11-scalars", "config.yaml", "serializeImagePulls: false\n"),
    ("smp-delete", "kube-scheduler.yaml", "    startupProbe: {}\n"),
    ("smp-delete", "kube-apiserver.yaml", "!usr-share-ca-certificates"),
    ("smp-delete-from-primitive-list", "kube-scheduler.yaml", "!--leader-elect=true"),
    ("smp-delete-from-primitive-list", "kube-scheduler.yaml", "  finalizers:\n  - example.com/b\n"),
    ("smp-retainkeys", "etcd.yaml", "  - emptyDir:\n      medium: Memory\n    name: etcd-data\n"),
    ("kind-change", "kube-scheduler.yaml", "!example.com/lost"),
    ("ignored-files", "kube-scheduler.yaml", "example.com/bak:"),
    ("ordering", "kube-apiserver.yaml", "example.com/order: a+strategic\n"),
    ("subdirs", "kube-scheduler.yaml", "example.com/last: z/kube-scheduler.yaml\n"),
];

/// The real kubeadm's behaviour on every case, as documented (README and `expected`): which it
/// accepts or refuses, what it logs, and the quirks the comparisons depend on. Runs only kubeadm.
#[test]
fn kubeadm_outcomes() {
    let root = fixture_path("patches");
    let mut cases: Vec<String> = std::fs::read_dir(&root)
        .expect("read tests/fixtures/patches")
        .map(|e| e.expect("entry"))
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    cases.extend(BUILT.iter().map(|c| c.to_string()));
    cases.sort();
    assert!(cases.len() >= 22, "only {} cases", cases.len());
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let scratch = Scratch::new(&config());
    let config = PathBuf::from(scratch.config());
    // Two at a time: each kubeadm process is single-threaded and short.
    let results: Vec<(String, Kubeadm)> = std::thread::scope(|t| {
        let jobs: Vec<_> = cases
            .chunks(cases.len().div_ceil(2))
            .map(|chunk| {
                let (config, dir) = (&config, scratch.dir.path());
                t.spawn(move || {
                    let run = |c: &String| {
                        let d = dir.join(format!("case-{c}"));
                        std::fs::create_dir_all(&d).expect("mkdir case dir");
                        (c.clone(), kubeadm(c, config, &d))
                    };
                    chunk.iter().map(run).collect::<Vec<_>>()
                })
            })
            .collect();
        jobs.into_iter().flat_map(|j| j.join().expect("kubeadm thread")).collect()
    });
    let mut bad = Vec::new();
    for (case, run) in &results {
        let want = expected(case);
        if !readme.contains(&format!("`{case}`")) {
            bad.push(format!("{case}: no row in tests/fixtures/patches/README.md"));
        }
        let lines = run.patches_lines();
        let outcome = run.outcome();
        if outcome != want.outcome {
            bad.push(format!(
                "{case}: kubeadm {outcome:?}, documented {:?}\n{}{}",
                want.outcome, run.phases_err, run.dry_err
            ));
            continue;
        }
        if lines.first().map(String::as_str) != Some(&format!("[patches] Reading patches from path \"{NODE_DIR}\"")) {
            bad.push(format!("{case}: kubeadm's first [patches] line: {:?}", lines.first()));
        }
        let found = lines.iter().find_map(|l| l.strip_prefix("[patches] Found the following patch files: ["));
        let found = found.map(|f| f.trim_end_matches(']'));
        if found != want.found {
            bad.push(format!("{case}: kubeadm found {found:?}, documented {:?}", want.found));
        }
        let got = applied(&lines);
        if got != want.applied {
            bad.push(format!("{case}: kubeadm applied\n  {got}\ndocumented\n  {}", want.applied));
        }
        let errors = format!("{}{}", run.phases_err, run.dry_err);
        if !errors.contains(want.error) || (want.error.is_empty() && outcome != Accepts) {
            bad.push(format!("{case}: kubeadm's errors lack {:?}:\n{errors}", want.error));
        }
        if outcome != Refuses {
            let missing: Vec<_> = FILES.iter().filter(|f| !run.files.contains_key(*f)).collect();
            if !missing.is_empty() {
                bad.push(format!("{case}: kubeadm wrote no {missing:?}"));
            }
        }
    }
    let by_case: BTreeMap<&str, &Kubeadm> = results.iter().map(|(c, r)| (c.as_str(), r)).collect();
    for (case, file, text) in QUIRKS {
        let run = by_case.get(case).unwrap_or_else(|| panic!("no case {case}"));
        let path = FILES.iter().find(|f| f.ends_with(&format!("/{file}"))).expect("a FILES entry");
        let content = String::from_utf8_lossy(run.files.get(path).map(Vec::as_slice).unwrap_or_default()).into_owned();
        let ok = match text.strip_prefix('!') {
            Some(absent) => !content.contains(absent),
            None => content.contains(text),
        };
        if !ok {
            bad.push(format!("{case}: kubeadm's {file} breaks the documented {text:?}:\n{content}"));
        }
    }
    // The ignored and empty files: one line each, in walk order, then the summary.
    let ignored = patches_lines_of(&by_case, "ignored-files");
    let want_ignored = [
        "[patches] Ignoring file \"Etcd.yaml\": unknown target, must be one of [etcd kube-apiserver kube-controller-manager kube-scheduler kubeletconfiguration corednsdeployment kubeproxydaemonset]",
        "[patches] Ignoring file \"README\": the file extension must be one of [json yaml]",
        "[patches] Ignoring file \"foo.yaml\": unknown target, must be one of [etcd kube-apiserver kube-controller-manager kube-scheduler kubeletconfiguration corednsdeployment kubeproxydaemonset]",
        "[patches] Ignoring file \"kube-scheduler.yaml.tpl\": the file extension must be one of [json yaml]",
        "[patches] Ignoring file \"notes.txt\": the file extension must be one of [json yaml]",
        "[patches] Ignoring file \"x.yml\": the file extension must be one of [json yaml]",
        "[patches] Found the following patch files: [kube-scheduler.bak.yaml]",
        "[patches] Ignored the following files: [Etcd.yaml README foo.yaml kube-scheduler.yaml.tpl notes.txt x.yml]",
    ];
    if ignored[1..9] != want_ignored {
        bad.push(format!("ignored-files: kubeadm logged\n{}", ignored.join("\n")));
    }
    let empty = patches_lines_of(&by_case, "empty-file");
    let want_empty = [
        "[patches] Ignoring empty file: \"etcd.yaml\"",
        "[patches] Found the following patch files: [kube-controller-manager.json kube-scheduler.yaml]",
        "[patches] Ignored the following files: [etcd.yaml]",
    ];
    if empty[1..4] != want_empty {
        bad.push(format!("empty-file: kubeadm logged\n{}", empty.join("\n")));
    }
    assert!(bad.is_empty(), "the real kubeadm differs from tests/fixtures/patches/README.md:\n\n{}", bad.join("\n\n"));
}

fn patches_lines_of(by_case: &BTreeMap<&str, &Kubeadm>, case: &str) -> Vec<String> {
    let lines = by_case[case].patches_lines();
    assert!(lines.len() > 4, "{case}: kubeadm logged only {lines:?}");
    lines
}

/// kubeadm refuses `--patches` next to `--config`, even empty, before reading anything; so the
/// flag's precedence over `patches.directory` (init.go PatchesDir) cannot be reached. kubestrap
/// must refuse the same way and write nothing.
#[test]
fn patches_flag_with_config_is_refused() {
    let s = Scratch::new(&config());
    let (flag_dir, config_dir) = (case_dir("flag-dir"), case_dir("flag-config-dir"));
    let node_flag = "/etc/kubernetes/flag-patches";
    let script = format!(
        "mkdir -p /etc/kubernetes; mount -t tmpfs none /etc/kubernetes; mount -t tmpfs none /var/lib\n\
         cp -a {} {NODE_DIR}; cp -a {} {node_flag}\n\
         for p in --patches={node_flag} --patches=; do {} init phase control-plane scheduler --config {} $p; echo \"rc=$?\"; done 2>&1\n\
         ls /etc/kubernetes/manifests 2>&1; true\n",
        q(&config_dir),
        q(&flag_dir),
        q(&bins::bin("kubeadm")),
        q(Path::new(&s.config()))
    );
    let file = s.dir.path().join("flag.sh");
    std::fs::write(&file, script).expect("write script");
    let (code, out, err) = common::sh(&format!("unshare --net --mount --propagation private sh {}", q(&file)));
    assert_eq!(code, 0, "{out}{err}");
    let refusal = "can not mix '--config' with arguments [patches]";
    assert_eq!(out.matches(refusal).count(), 2, "kubeadm accepted --patches with --config:\n{out}");
    assert_eq!(out.matches("rc=1").count(), 2, "{out}");
    assert!(out.contains("No such file or directory"), "kubeadm wrote manifests:\n{out}");

    common::sh(&format!("cp -a {} {}", q(&flag_dir), q(&s.path(node_flag))));
    std::fs::create_dir_all(s.path("/etc/kubernetes")).expect("mkdir");
    common::sh(&format!("cp -a {} {}", q(&config_dir), q(&s.path(NODE_DIR))));
    for flag in [format!("--patches={node_flag}"), "--patches=".to_string()] {
        let run = s.init(&["--ignore-preflight-errors=all", &flag]);
        assert_ne!(run.code(), 0, "kubestrap accepted {flag} with --config:\n{}", run.stderr());
        assert!(
            run.stderr().contains(refusal),
            "kubestrap's refusal of {flag} differs from kubeadm's:\n{}",
            run.stderr()
        );
        assert!(!s.path("/etc/kubernetes/manifests").exists(), "kubestrap wrote manifests after refusing {flag}");
    }
}

/// `--patches DIR` without `--config`: both read the directory (a node path for kubestrap) and
/// write the same kube-scheduler manifest. kubeadm's scheduler phase cannot default an advertise
/// address in a namespace with no route, so its dry run (into a fixed directory) stands in.
#[test]
fn patches_flag_without_config() {
    let s = Scratch::new("");
    let dir = case_dir("flag-dir");
    let flags = "--kubernetes-version v1.37.2 --apiserver-advertise-address 192.0.2.10 --node-name cp-1 \
                 --cri-socket unix:///var/run/containerd/containerd.sock --ignore-preflight-errors=all";
    let out = s.dir.path().join("kubeadm-scheduler.yaml");
    let script = format!(
        "set -e; mkdir -p /etc/kubernetes; mount -t tmpfs none /etc/kubernetes; mount -t tmpfs none /var/lib\n\
         cp -a {} {NODE_DIR}\n\
         KUBEADM_INIT_DRYRUN_DIR=/etc/kubernetes/dry {} init --dry-run --skip-phases=addon --patches {NODE_DIR} {flags}\n\
         cp /etc/kubernetes/dry/kube-scheduler.yaml {}\n",
        q(&dir),
        q(&bins::bin("kubeadm")),
        q(&out)
    );
    let file = s.dir.path().join("flag.sh");
    std::fs::write(&file, script).expect("write script");
    let (code, stdout, err) = common::sh(&format!("unshare --net --mount --propagation private sh {}", q(&file)));
    assert_eq!(code, 0, "kubeadm failed:\n{stdout}{err}");
    let theirs = std::fs::read_to_string(&out).expect("kubeadm's manifest");
    assert!(theirs.contains("example.com/from: --patches"), "kubeadm did not apply --patches:\n{theirs}");
    let want = patches_lines(&stdout, "");
    assert_eq!(want.len(), 4, "kubeadm logged {want:?}");

    let dest = s.path(NODE_DIR);
    std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
    common::sh(&format!("cp -a {} {}", q(&dir), q(&dest)));
    let root = s.root_str();
    let mut args = vec!["init", "--on-disk-only", "--root", &root, "--patches", NODE_DIR];
    args.extend(flags.split_whitespace());
    let run = common::kubestrap(&args);
    assert_eq!(run.code(), 0, "kubestrap init --patches failed:\n{}", run.stderr());
    let ours = std::fs::read_to_string(s.path("/etc/kubernetes/manifests/kube-scheduler.yaml")).expect("our manifest");
    if let Some(d) = text_diff(&theirs, &ours) {
        panic!("kube-scheduler.yaml from --patches differs:\n{d}");
    }
    let got = patches_lines(&run.stderr(), &root);
    if let Some(d) = text_diff(&want.join("\n"), &got.join("\n")) {
        panic!("[patches] lines of init --patches differ:\n{d}");
    }
}

macro_rules! cases {
    ($($test:ident = $dir:literal;)*) => {
        $(
            #[test]
            fn $test() {
                parity($dir);
            }
        )*

        /// Every case directory has its test.
        #[test]
        fn every_case_has_a_test() {
            let named = [$($dir),*];
            for e in std::fs::read_dir(fixture_path("patches")).expect("read_dir") {
                let e = e.expect("entry");
                let name = e.file_name().to_string_lossy().into_owned();
                let flag = name.starts_with("flag-");
                assert!(!e.path().is_dir() || flag || named.contains(&name.as_str()), "no test for case {name}");
            }
        }
    };
}

cases! {
    all_targets = "all-targets";
    apiserver_resources = "apiserver-resources";
    etcd_json = "etcd-json";
    controller_manager_merge = "controller-manager-merge";
    scheduler_strategic_json = "scheduler-strategic-json";
    kubelet_config = "kubelet-config";
    kubelet_config_json = "kubelet-config-json";
    kubelet_wrong_shape = "kubelet-wrong-shape";
    unknown_fields = "unknown-fields";
    yaml11_scalars = "yaml11-scalars";
    coredns_replicas = "coredns-replicas";
    coredns_resources = "coredns-resources";
    kube_proxy = "kube-proxy";
    multi_document = "multi-document";
    subdirs = "subdirs";
    ordering = "ordering";
    ignored_files = "ignored-files";
    empty_file = "empty-file";
    smp_delete = "smp-delete";
    smp_replace = "smp-replace";
    smp_retainkeys = "smp-retainkeys";
    smp_set_element_order = "smp-set-element-order";
    smp_delete_from_primitive_list = "smp-delete-from-primitive-list";
    merge_keys = "merge-keys";
    command_strategic_vs_json = "command-strategic-vs-json";
    null_deletes = "null-deletes";
    kind_change = "kind-change";
    real_giantswarm = "real-giantswarm";
    real_azimuth = "real-azimuth";
    real_kubespray = "real-kubespray";
    err_missing_type = "err-missing-type";
    err_unknown_type = "err-unknown-type";
    err_invalid_yaml = "err-invalid-yaml";
    err_not_a_list = "err-not-a-list";
    err_json_test_fails = "err-json-test-fails";
    err_json_remove_missing = "err-json-remove-missing";
    err_strategic_wrong_shape = "err-strategic-wrong-shape";
    err_kind_unregistered = "err-kind-unregistered";
    err_yaml11_bool_annotation = "err-yaml11-bool-annotation";
    err_coredns_json = "err-coredns-json";
    empty_directory = "empty-directory";
    missing_directory = "missing-directory";
    symlinked_directory = "symlinked-directory";
}
