//! Compares kubeadm's facts with kubestrap's: every difference is either on the allow-list
//! (allow.rs, with its reason) or counts against the test.

use crate::allow;
use crate::facts::Facts;
use std::collections::BTreeSet;
use std::fmt::Write;

/// One fact that differs: None where that side has no such fact.
struct Diff<'a> {
    key: &'a str,
    kubeadm: Option<&'a str>,
    kubestrap: Option<&'a str>,
}

/// The differences; an `<order>` fact differs only if the names both sides have are in a
/// different order (a missing or extra name is reported on its own).
fn diffs<'a>(kubeadm: &'a Facts, kubestrap: &'a Facts) -> Vec<Diff<'a>> {
    let keys: BTreeSet<&String> = kubeadm.keys().chain(kubestrap.keys()).collect();
    let mut out = Vec::new();
    for key in keys {
        let (a, b) = (kubeadm.get(key).map(String::as_str), kubestrap.get(key).map(String::as_str));
        if a == b {
            continue;
        }
        if let (true, Some(a), Some(b)) = (key.ends_with("<order>"), a, b) {
            let (a, b): (Vec<&str>, Vec<&str>) = (a.split(' ').collect(), b.split(' ').collect());
            if common(&a, &b) == common(&b, &a) {
                continue;
            }
        }
        out.push(Diff { key, kubeadm: a, kubestrap: b });
    }
    out
}

/// The words of `x` that `y` has too, in `x`'s order.
fn common<'a>(x: &[&'a str], y: &[&str]) -> Vec<&'a str> {
    x.iter().filter(|w| y.contains(w)).copied().collect()
}

fn show(v: Option<&str>) -> &str {
    v.unwrap_or("(none)")
}

/// The number of differences the allow-list does not cover, and the report for `config`.
pub fn compare(config: &str, kubeadm: &Facts, kubestrap: &Facts) -> (usize, String) {
    let (mut bad, mut allowed) = (String::new(), String::new());
    let mut n = 0;
    for d in diffs(kubeadm, kubestrap) {
        let body = format!("  kubeadm:   {}\n  kubestrap: {}\n", show(d.kubeadm), show(d.kubestrap));
        match allow::reason(config, d.key, d.kubeadm, d.kubestrap) {
            Some(why) => _ = write!(allowed, "{}  (allowed: {why})\n{body}", d.key),
            None => {
                n += 1;
                _ = write!(bad, "{}\n{body}", d.key);
            }
        }
    }
    let report = format!(
        "=== parity {config}: kubeadm v1.37.2 vs kubestrap, {n} unexpected difference(s) ===\n{bad}\
         --- allowed differences ---\n{allowed}"
    );
    (n, report)
}

#[test]
fn an_order_differs_only_in_the_names_both_have() {
    let facts = |order: &str| Facts::from([("f <order>".to_string(), order.to_string())]);
    assert!(diffs(&facts("a b c"), &facts("a c")).is_empty(), "a missing name is reported on its own");
    assert_eq!(diffs(&facts("a b"), &facts("b a")).len(), 1);
}
