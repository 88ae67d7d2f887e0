//! The VM suite's time budget (test-vm/budget.sh): a run over budget fails loudly, with the
//! table naming the scenario, and one within it passes.

use std::path::Path;
use std::process::Command;

fn budget(results: &str, budget_s: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("results");
    std::fs::write(&file, results).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("test-vm/budget.sh");
    let out = Command::new("bash").arg(&script).arg(&file).env("VM_BUDGET_S", budget_s).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

const RESULTS: &str = "PASS cp-lifecycle 512.4s 3 boots (cp-1)\nPASS no-images 21.0s 1 boots\n\
                       FAIL broken-user-data 19.9s 1 boots: something\n";

#[test]
fn within_budget_the_table_is_printed_and_the_run_passes() {
    let (code, out) = budget(RESULTS, "900");
    assert_eq!(code, 0, "{out}");
    let row = out.lines().find(|l| l.starts_with("cp-lifecycle ")).unwrap_or_default();
    // Expected, actual, ratio and boots, from budget.tsv and the results.
    assert!(row.contains("512.4s") && row.contains("x") && row.contains(" 3 "), "{out}");
    assert!(out.lines().any(|l| l.starts_with("total ") && l.contains("553.3s")), "{out}");
    assert!(out.contains("budget: ok"), "{out}");
}

#[test]
fn a_tiny_budget_fails_the_run_and_says_so() {
    let (code, out) = budget(RESULTS, "60");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("budget: FAIL") && out.contains("553 s > 60 s"), "{out}");
}

#[test]
fn a_scenario_at_over_twice_its_expectation_is_named() {
    let (code, out) = budget("PASS no-images 400.0s 1 boots\n", "100000");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("budget: FAIL: no-images("), "{out}");
    let (code, out) = budget("PASS made-up 4.0s 1 boots\n", "100000");
    assert_eq!(code, 1, "a scenario without an expectation fails: {out}");
    assert!(out.contains("made-up(no expectation)"), "{out}");
}
