use std::sync::Mutex;
use std::time::Duration;

use super::*;
use crate::clock::FakeClock;
use crate::fsutil::NodeFs;
use crate::node::Node;
use crate::objects::test_support::cfg;

/// A node whose etcd answers from `etcd_at` and whose API server from `api_at` (virtual seconds;
/// `None`: never), recording which manifests were on disk at each question.
struct Scripted<'a> {
    clock: &'a FakeClock,
    dir: std::path::PathBuf,
    etcd_at: Option<u64>,
    api_at: Option<u64>,
    asked: Mutex<Vec<(String, Vec<String>)>>,
}

impl Health for Scripted<'_> {
    fn ask(&self, url: &str) -> std::result::Result<(), String> {
        let mut on_disk: Vec<String> = std::fs::read_dir(&self.dir)
            .map(|d| d.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
            .unwrap_or_default();
        on_disk.sort();
        self.asked.lock().unwrap().push((url.to_string(), on_disk));
        let now = self.clock.elapsed().as_secs();
        let from = if url.contains(":2381/") { self.etcd_at } else { self.api_at };
        match from {
            Some(t) if now >= t => Ok(()),
            _ => Err("connection refused".into()),
        }
    }
}

fn run(etcd_at: Option<u64>, api_at: Option<u64>) -> (Vec<(String, Vec<String>)>, Vec<String>, Duration) {
    let t = tempfile::tempdir().unwrap();
    let fs = NodeFs::new(t.path());
    let clock = FakeClock::new();
    let ctx = InitContext::new(cfg(""), Node::new(&fs, &clock, None), Vec::new());
    let dir = t.path().join("etc/kubernetes/manifests");
    let h = Scripted { clock: &clock, dir: dir.clone(), etcd_at, api_at, asked: Mutex::new(Vec::new()) };
    run_with(&ctx, &h).unwrap();
    fs.commit().unwrap();
    let mut written: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    written.sort();
    (h.asked.into_inner().unwrap(), written, clock.elapsed())
}

const ALL: [&str; 3] = ["kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"];

#[test]
fn the_api_server_waits_for_etcd_and_the_other_two_for_the_api_server() {
    let (asked, written, at) = run(Some(3), Some(8));
    assert_eq!(written, ALL);
    // etcd is asked at its probe (kubeadm's metrics port) while no control-plane manifest exists.
    let etcd: Vec<_> = asked.iter().filter(|(u, _)| u == "http://127.0.0.1:2381/readyz").collect();
    assert!(!etcd.is_empty() && etcd.iter().all(|(_, d)| d.is_empty()), "{asked:?}");
    // The API server at its startup probe, once its manifest alone is there.
    let api: Vec<_> = asked.iter().filter(|(u, _)| u == "https://10.0.0.10:6443/livez").collect();
    assert!(!api.is_empty() && api.iter().all(|(_, d)| d == &["kube-apiserver.yaml"]), "{asked:?}");
    assert_eq!(asked.len(), etcd.len() + api.len(), "{asked:?}");
    assert!(at >= Duration::from_secs(8) && at < Duration::from_secs(9), "{at:?}");
}

#[test]
fn components_that_never_answer_hold_each_step_back_at_most_hold() {
    let (asked, written, at) = run(None, None);
    assert_eq!(written, ALL);
    assert!(asked.iter().any(|(_, d)| d == &["kube-apiserver.yaml"]), "{asked:?}");
    assert!(at >= 2 * HOLD && at < 2 * HOLD + Duration::from_secs(2), "{at:?}");
}

#[test]
fn only_a_boot_with_a_local_etcd_and_both_phases_writes_in_order() {
    let t = tempfile::tempdir().unwrap();
    let fs = NodeFs::new(t.path());
    let clock = FakeClock::new();
    let node = || Node::new(&fs, &clock, None);
    assert!(applies(&InitContext::new(cfg(""), node(), Vec::new())));
    let skipping = |phase: &str| {
        let mut c = cfg("");
        c.init.skip_phases = vec![phase.to_string()];
        applies(&InitContext::new(c, node(), Vec::new()))
    };
    assert!(!skipping("etcd") && !skipping("control-plane"));
    assert!(skipping("addon/coredns"));
    let external = cfg("etcd:\n  external:\n    endpoints: [https://10.0.0.50:2379]\n");
    assert!(!applies(&InitContext::new(external, node(), Vec::new())));
}
