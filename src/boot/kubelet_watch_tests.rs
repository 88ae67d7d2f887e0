use std::sync::Mutex;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::clock::FakeClock;

const CSI: &str = "failed to initialize CSINode: error updating CSINode annotation: timed out waiting for the condition; caused by: nodes \"w-1\" not found";

/// A kubelet whose Node the API server reports as `script` says at each virtual second.
struct Scripted<'a> {
    clock: &'a FakeClock,
    script: fn(u64) -> Seen,
    restarts: Mutex<Vec<Duration>>,
}

impl Kubelet for Scripted<'_> {
    fn look(&self) -> Seen {
        (self.script)(self.clock.elapsed().as_secs())
    }
    fn restart(&self) {
        self.restarts.lock().unwrap().push(self.clock.elapsed());
    }
}

fn run(script: fn(u64) -> Seen) -> (Outcome, Vec<Duration>, Duration) {
    let clock = FakeClock::new();
    let k = Scripted { clock: &clock, script, restarts: Mutex::new(Vec::new()) };
    let out = watch(&k, &clock, None);
    let restarts = k.restarts.lock().unwrap().clone();
    (out, restarts, clock.elapsed())
}

#[test]
fn a_node_registered_after_the_last_quick_try_gets_its_kubelet_restarted_once() {
    // As under emulation: the API answers 404 for 22 s, then NotReady for CSINode.
    let (out, restarts, at) = run(|s| if s < 22 { Seen::Absent } else { Seen::NotReady(CSI.into()) });
    assert_eq!(out, Outcome::Restarted);
    assert_eq!(restarts, vec![LAST_QUICK_TRY]);
    assert_eq!(at, LAST_QUICK_TRY);
}

#[test]
fn a_csinode_error_before_the_last_quick_try_is_waited_out() {
    // Registered at 3 s; the kubelet's 17.6 s try succeeds and it posts Ready at 19 s.
    let (out, restarts, at) = run(|s| match s {
        0..3 => Seen::Unreachable,
        3..19 => Seen::NotReady("CSINode is not yet initialized".into()),
        _ => Seen::Ready,
    });
    assert_eq!(out, Outcome::Ready);
    assert!(restarts.is_empty());
    assert_eq!(at, Duration::from_secs(19));
}

#[test]
fn other_reasons_and_a_node_that_never_registers_are_left_to_the_kubelet() {
    let (out, restarts, at) = run(|s| {
        if s < 4 {
            Seen::Absent
        } else {
            Seen::NotReady("container runtime network not ready: cni plugin not initialized".into())
        }
    });
    assert!(matches!(out, Outcome::NotReady(m) if m.contains("cni")));
    assert!(restarts.is_empty());
    assert_eq!(at, Duration::from_secs(4));

    let (out, restarts, at) = run(|_| Seen::Absent);
    assert_eq!(out, Outcome::NotRegistered);
    assert!(restarts.is_empty());
    assert_eq!(at, WATCH);
}

#[test]
fn the_ready_condition_is_read_from_the_node() {
    let node = |status: &str, message: &str| {
        json!({"status": {"conditions": [
            {"type": "MemoryPressure", "status": "False", "message": "ok"},
            {"type": "Ready", "status": status, "message": message}]}})
    };
    assert_eq!(ready(&node("True", "kubelet is posting ready status")), Seen::Ready);
    assert_eq!(ready(&node("False", CSI)), Seen::NotReady(CSI.into()));
    assert_eq!(ready(&json!({"status": {}})), Seen::NotReady(String::new()));
}
