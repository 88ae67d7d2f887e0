//! kubeadm's patches (`patches.directory`) on the real kubeadm v1.37.2 and on kubestrap, one
//! case per directory under tests/fixtures/patches/ (its README says what each proves).
//! kubeadm runs the on-disk phases that apply patches (etcd local, control-plane all,
//! kubelet-start) and `init --dry-run` (the addon targets and one process's `[patches]` log);
//! kubestrap runs `init --dry-run` and `init --on-disk-only` on a root holding the same
//! directory. The static Pod manifests and the kubelet's config.yaml must match byte for byte
//! (both sides write their own re-serialisation), the CoreDNS Deployment and kube-proxy
//! DaemonSet fact by fact (api.rs, allow.rs), and the `[patches]` lines in order.

use crate::common::needs::need;
use crate::common::{self, Run, Scratch, fixture, fixture_path};
use crate::kubeadm::{self, Patched as Kubeadm};
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
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
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

/// kubeadm's run of a case with config `config` (kubeadm.rs).
fn kubeadm(case: &str, config: &Path, dir: &Path) -> Kubeadm {
    kubeadm::patched(&prepare(case, NODE_DIR), config, dir, PHASES, FILES)
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
    need!(crate::kubeadm_need());
    let ours = kubestrap(name);
    let theirs = kubeadm(name, Path::new(&ours.s.config()), ours.s.dir.path());
    let outcome = theirs.outcome();
    assert_eq!(outcome, expected(name).outcome, "kubeadm's outcome for {name} is not the one documented");
    if outcome == Refuses || expected(name).kubestrap.as_deref() == Some("refuses") {
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
        "patches case {name}: kubeadm refused it ({}) or kubestrap means to, and kubestrap did not refuse it so:\n\n{}",
        theirs.phases_err.lines().find(|l| l.starts_with("error:")).unwrap_or_default(),
        bad.join("\n\n")
    );
}

/// What kubeadm does with a case: tests/fixtures/patches/kubeadm.yaml (its head explains the fields).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Expected {
    outcome: Outcome,
    found: Option<String>,
    #[serde(default)]
    applied: String,
    #[serde(default)]
    error: String,
    log: Option<Vec<String>>,
    /// Base name of a written file -> texts it contains (or, after `!`, lacks).
    #[serde(default)]
    files: BTreeMap<String, Vec<String>>,
    /// A deliberate difference (docs/differences.md): `refuses` where kubeadm accepts.
    kubestrap: Option<String>,
}

fn expectations() -> BTreeMap<String, Expected> {
    serde_yaml::from_str(fixture!("patches/kubeadm.yaml")).expect("tests/fixtures/patches/kubeadm.yaml")
}

fn expected(case: &str) -> Expected {
    let mut all = expectations();
    all.remove(case).unwrap_or_else(|| panic!("tests/fixtures/patches/kubeadm.yaml has no {case}"))
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

/// How kubeadm's run of a case differs from what kubeadm.yaml says.
fn check(case: &str, want: &Expected, run: &Kubeadm) -> Vec<String> {
    let (lines, outcome) = (run.patches_lines(), run.outcome());
    let errors = format!("{}{}", run.phases_err, run.dry_err);
    if outcome != want.outcome {
        return vec![format!("{case}: kubeadm {outcome:?}, documented {:?}\n{errors}", want.outcome)];
    }
    let mut bad = Vec::new();
    let reading = format!("[patches] Reading patches from path \"{NODE_DIR}\"");
    if lines.first() != Some(&reading) {
        bad.push(format!("{case}: kubeadm's first [patches] line: {:?}", lines.first()));
    }
    let found = lines.iter().find_map(|l| l.strip_prefix("[patches] Found the following patch files: ["));
    let found = found.map(|f| f.trim_end_matches(']'));
    if found != want.found.as_deref() {
        bad.push(format!("{case}: kubeadm found {found:?}, documented {:?}", want.found));
    }
    let got = applied(&lines);
    if got != want.applied {
        bad.push(format!("{case}: kubeadm applied\n  {got}\ndocumented\n  {}", want.applied));
    }
    if want.log.as_ref().is_some_and(|log| lines.get(1..) != Some(log.as_slice())) {
        bad.push(format!("{case}: kubeadm logged\n{}", lines.join("\n")));
    }
    if !errors.contains(&want.error) || (want.error.is_empty() != (outcome == Accepts)) {
        bad.push(format!("{case}: kubeadm's errors lack {:?}:\n{errors}", want.error));
    }
    if outcome != Refuses {
        let missing: Vec<_> = FILES.iter().filter(|f| !run.files.contains_key(*f)).collect();
        if !missing.is_empty() {
            bad.push(format!("{case}: kubeadm wrote no {missing:?}"));
        }
    }
    for (file, texts) in &want.files {
        let path = FILES.iter().find(|f| f.ends_with(&format!("/{file}"))).expect("a FILES entry");
        let content = String::from_utf8_lossy(run.files.get(path).map(Vec::as_slice).unwrap_or_default()).into_owned();
        for text in texts {
            let ok = match text.strip_prefix('!') {
                Some(absent) => !content.contains(absent),
                None => content.contains(text.as_str()),
            };
            if !ok {
                bad.push(format!("{case}: kubeadm's {file} breaks the documented {text:?}:\n{content}"));
            }
        }
    }
    bad
}

/// The real kubeadm's behaviour on every case, as tests/fixtures/patches/kubeadm.yaml documents
/// it: what it accepts or refuses, what it logs, the quirks the comparisons depend on. Runs only
/// kubeadm, so it holds whatever kubestrap does.
#[test]
fn kubeadm_outcomes() {
    need!(crate::kubeadm_need());
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
    let want = expectations();
    assert_eq!(want.keys().collect::<Vec<_>>(), cases.iter().collect::<Vec<_>>(), "kubeadm.yaml's cases");
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
        if !readme.contains(&format!("`{case}`")) {
            bad.push(format!("{case}: no row in tests/fixtures/patches/README.md"));
        }
        bad.extend(check(case, &want[case], run));
    }
    assert!(
        bad.is_empty(),
        "the real kubeadm differs from tests/fixtures/patches/kubeadm.yaml:\n\n{}",
        bad.join("\n\n")
    );
}

/// kubeadm refuses `--patches` next to `--config`, even empty, before reading anything; so the
/// flag's precedence over `patches.directory` (init.go PatchesDir) cannot be reached. kubestrap
/// must refuse the same way and write nothing.
#[test]
fn patches_flag_with_config_is_refused() {
    need!(crate::kubeadm_need());
    let s = Scratch::new(&config());
    let flag_dir = "/etc/kubernetes/flag-patches";
    let put = |root: &str| {
        format!(
            "{} && {}",
            prepare("flag-config-dir", &format!("{root}{NODE_DIR}")),
            prepare("flag-dir", &format!("{root}{flag_dir}"))
        )
    };
    let body = format!(
        "{}\nset +e\nfor p in --patches={flag_dir} --patches=; do {} init phase control-plane scheduler --config {} $p; echo \"rc=$?\"; done 2>&1\n\
         ls /etc/kubernetes/manifests 2>&1; true",
        put(""),
        q(&bins::bin("kubeadm")),
        q(Path::new(&s.config()))
    );
    let (code, out, err) = kubeadm::in_namespace(s.dir.path(), "flag-with-config", &body);
    assert_eq!(code, 0, "{out}{err}");
    let refusal = "can not mix '--config' with arguments [patches]";
    assert_eq!(out.matches(refusal).count(), 2, "kubeadm accepted --patches with --config:\n{out}");
    assert_eq!(out.matches("rc=1").count(), 2, "{out}");
    assert!(out.contains("No such file or directory"), "kubeadm wrote manifests:\n{out}");

    std::fs::create_dir_all(s.path("/etc/kubernetes")).expect("mkdir");
    let (code, out, err) = common::sh(&put(&s.root_str()));
    assert_eq!(code, 0, "{out}{err}");
    for flag in [format!("--patches={flag_dir}"), "--patches=".to_string()] {
        let run = s.init(&["--ignore-preflight-errors=all", &flag]);
        let err = run.stderr();
        assert_ne!(run.code(), 0, "kubestrap accepted {flag} with --config:\n{err}");
        assert!(err.contains(refusal), "kubestrap's refusal of {flag} differs from kubeadm's:\n{err}");
        assert!(!s.path("/etc/kubernetes/manifests").exists(), "kubestrap wrote manifests after refusing {flag}");
    }
}

/// `--patches DIR` without `--config`: both read the directory (a node path for kubestrap) and
/// write the same kube-scheduler manifest. kubeadm's scheduler phase cannot default an advertise
/// address in a namespace with no route, so its dry run (into a fixed directory) stands in.
#[test]
fn patches_flag_without_config() {
    need!(crate::kubeadm_need());
    let s = Scratch::new("");
    let flags = "--kubernetes-version v1.37.2 --apiserver-advertise-address 192.0.2.10 --node-name cp-1 \
                 --cri-socket unix:///var/run/containerd/containerd.sock --ignore-preflight-errors=all";
    let out = s.dir.path().join("kubeadm-scheduler.yaml");
    let body = format!(
        "{}\nKUBEADM_INIT_DRYRUN_DIR=/etc/kubernetes/dry {} init --dry-run --skip-phases=addon --patches {NODE_DIR} {flags}\n\
         cp /etc/kubernetes/dry/kube-scheduler.yaml {}",
        prepare("flag-dir", NODE_DIR),
        q(&bins::bin("kubeadm")),
        q(&out)
    );
    let (code, stdout, err) = kubeadm::in_namespace(s.dir.path(), "flag-without-config", &body);
    assert_eq!(code, 0, "kubeadm failed:\n{stdout}{err}");
    let theirs = std::fs::read_to_string(&out).expect("kubeadm's manifest");
    assert!(theirs.contains("example.com/from: --patches"), "kubeadm did not apply --patches:\n{theirs}");
    let want = patches_lines(&stdout, "");
    assert_eq!(want.len(), 4, "kubeadm logged {want:?}");

    let dest = s.path(NODE_DIR);
    std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
    let (code, o, e) = common::sh(&prepare("flag-dir", &dest.display().to_string()));
    assert_eq!(code, 0, "{o}{e}");
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
    zero_values = "zero-values";
    duplicate_key = "duplicate-key";
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
