use std::sync::Mutex;
use std::time::Duration;

use super::*;
use crate::clock::FakeClock;
use crate::fsutil::NodeFs;
use crate::node::Node;
use crate::objects::test_support::cfg;

/// An API server that answers from `api_at` (virtual seconds; `None`: never), recording which
/// manifests were on disk at each question.
struct Scripted<'a> {
    clock: &'a FakeClock,
    dir: std::path::PathBuf,
    api_at: Option<u64>,
    asked: Mutex<Asked>,
}

impl Health for Scripted<'_> {
    fn ask(&self, url: &str) -> std::result::Result<(), String> {
        let mut on_disk: Vec<String> = std::fs::read_dir(&self.dir)
            .map(|d| d.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
            .unwrap_or_default();
        on_disk.sort();
        self.asked.lock().unwrap().push((url.to_string(), on_disk));
        match self.api_at {
            Some(t) if self.clock.elapsed().as_secs() >= t => Ok(()),
            _ => Err("connection refused".into()),
        }
    }
}

/// Each question: the URL asked and the manifests on disk then.
type Asked = Vec<(String, Vec<String>)>;

/// The pre-kubelet stage's control-plane phase (`apiserver_first`), then the post-kubelet
/// stage's: the manifests after the first, each question, the manifests after the second, and
/// the virtual time taken.
fn boot(api_at: Option<u64>) -> (Vec<String>, Asked, Vec<String>, Duration) {
    let t = tempfile::tempdir().unwrap();
    let fs = NodeFs::new(t.path());
    let clock = FakeClock::new();
    let dir = t.path().join("etc/kubernetes/manifests");
    let listing = || {
        let mut v: Vec<String> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        v.sort();
        v
    };
    let mut pre = InitContext::new(cfg(""), Node::new(&fs, &clock, None), Vec::new());
    assert!(applies(&pre, |_| false));
    pre.apiserver_first = true;
    control_plane::run(&pre).unwrap();
    fs.commit().unwrap();
    let before = listing();
    let post = InitContext::new(cfg(""), Node::new(&fs, &clock, None), Vec::new());
    let h = Scripted { clock: &clock, dir: dir.clone(), api_at, asked: Mutex::new(Vec::new()) };
    run_with(&post, &h).unwrap();
    fs.commit().unwrap();
    (before, h.asked.into_inner().unwrap(), listing(), clock.elapsed())
}

const ALL: [&str; 3] = ["kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"];

#[test]
fn the_controller_manager_and_scheduler_wait_for_the_api_server() {
    let (before, asked, written, at) = boot(Some(8));
    assert_eq!(before, ["kube-apiserver.yaml"], "the pre-kubelet stage writes the API server's alone");
    assert_eq!(written, ALL);
    // Asked at its startup probe, with its manifest alone there, until it answered.
    assert!(!asked.is_empty(), "{asked:?}");
    assert!(
        asked.iter().all(|(u, d)| u == "https://10.0.0.10:6443/livez" && d == &["kube-apiserver.yaml"]),
        "{asked:?}"
    );
    assert!(at >= Duration::from_secs(8) && at < Duration::from_secs(9), "{at:?}");
}

#[test]
fn an_api_server_that_never_answers_holds_them_back_at_most_hold() {
    let (_, asked, written, at) = boot(None);
    assert_eq!(written, ALL);
    assert!(asked.len() > 2, "{asked:?}");
    assert!(at >= HOLD && at < HOLD + Duration::from_secs(2), "{at:?}");
}

#[test]
fn only_a_boot_with_a_local_etcd_and_both_phases_holds_them_back() {
    let t = tempfile::tempdir().unwrap();
    let fs = NodeFs::new(t.path());
    let clock = FakeClock::new();
    let node = || Node::new(&fs, &clock, None);
    // As the boot asks it: the user's skipPhases, as phases::is_skipped reads them.
    let skipping = |phase: &str| {
        let mut c = cfg("");
        c.init.skip_phases = vec![phase.to_string()];
        let ctx = InitContext::new(c, node(), Vec::new());
        applies(&ctx, |p| crate::phases::is_skipped(&ctx.cfg.init.skip_phases, p))
    };
    assert!(!skipping("etcd") && !skipping("control-plane"));
    assert!(skipping("addon/coredns"));
    let external = cfg("etcd:\n  external:\n    endpoints: [https://10.0.0.50:2379]\n");
    assert!(!applies(&InitContext::new(external, node(), Vec::new()), |_| false));
}
