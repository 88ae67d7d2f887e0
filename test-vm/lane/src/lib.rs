//! The VM landing lane: which scenarios a landing boots. Every landing runs the smoke set; each
//! other scenario has a rotation slot and runs when HEAD's first-parent commit count, modulo 3,
//! is its slot, so any three consecutive commits run them all; a scenario whose paths the change
//! touches runs too. All of it within a fixed budget of expected seconds (budget.tsv): what does
//! not fit is deferred, and said so, never dropped in silence.

use std::collections::BTreeMap;

/// The rotation's period: every scenario runs at least once in this many consecutive commits.
pub const PERIOD: u64 = 3;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Smoke,
    Slot(u64),
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub role: Role,
    /// Path prefixes; one ending in `/` is a directory.
    pub paths: Vec<String>,
    pub expected_s: u64,
}

/// Why a scenario runs, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    Smoke,
    Rotation(u64),
    Touched(String),
    /// Chosen, but over the lane budget: runs at its next slot (or the next landing that fits it).
    Deferred(String),
    /// Not its slot and nothing it proves was touched.
    RotatedOut(u64),
}

impl Why {
    /// In words, for the lane's table.
    pub fn describe(&self) -> String {
        match self {
            Why::Smoke => "smoke (every landing)".into(),
            Why::Rotation(s) => format!("rotation slot {s} (this commit's)"),
            Why::Touched(p) => format!("the change touches {p}"),
            Why::Deferred(m) => format!("DEFERRED: {m}"),
            Why::RotatedOut(s) => format!("rotated out (slot {s})"),
        }
    }
}

#[derive(Debug, Default)]
pub struct Plan {
    /// In the order to run: cheapest first, so a long one cannot crowd out the others' verdicts.
    pub run: Vec<(String, Why)>,
    pub out: Vec<(String, Why)>,
    pub expected_s: u64,
}

/// lane.tsv (scenario, role, paths) joined with budget.tsv (scenario, expected seconds).
pub fn parse(lane_tsv: &str, budget_tsv: &str) -> Result<Vec<Scenario>, String> {
    let mut expected = BTreeMap::new();
    for (n, line) in rows(budget_tsv) {
        let f: Vec<&str> = line.split('\t').collect();
        let secs = f.get(1).and_then(|s| s.trim().parse::<u64>().ok());
        let secs = secs.ok_or_else(|| format!("budget.tsv line {n}: want `scenario<TAB>seconds`, got {line:?}"))?;
        expected.insert(f[0].to_string(), secs);
    }
    let mut out: Vec<Scenario> = Vec::new();
    for (n, line) in rows(lane_tsv) {
        let f: Vec<&str> = line.split('\t').collect();
        let [name, role, paths] = f[..] else {
            return Err(format!("lane.tsv line {n}: want `scenario<TAB>role<TAB>paths`, got {line:?}"));
        };
        let role = match role {
            "smoke" => Role::Smoke,
            r => match r.parse::<u64>() {
                Ok(s) if s < PERIOD => Role::Slot(s),
                _ => return Err(format!("lane.tsv line {n}: role {r:?} is not smoke, 0, 1 or 2")),
            },
        };
        let Some(&expected_s) = expected.get(name) else {
            return Err(format!("lane.tsv line {n}: {name} has no expected seconds in budget.tsv"));
        };
        if out.iter().any(|s| s.name == name) {
            return Err(format!("lane.tsv line {n}: {name} is listed twice"));
        }
        let paths = paths.split_whitespace().map(str::to_string).collect();
        out.push(Scenario { name: name.to_string(), role, paths, expected_s });
    }
    Ok(out)
}

/// Lines that are not blank or comments, numbered from 1.
fn rows(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l)).filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
}

/// The first changed path a scenario proves, if any.
pub fn touched<'c>(s: &Scenario, changed: &'c [String]) -> Option<&'c String> {
    changed.iter().find(|c| s.paths.iter().any(|p| if p.ends_with('/') { c.starts_with(p.as_str()) } else { *c == p }))
}

/// The landing's plan at first-parent commit count `count`, for the files `changed` since the
/// last landing, within `budget_s` expected seconds. Err when the smoke set alone does not fit.
pub fn select(all: &[Scenario], count: u64, changed: &[String], budget_s: u64) -> Result<Plan, String> {
    let slot = count % PERIOD;
    let mut plan = Plan::default();
    let smoke: u64 = all.iter().filter(|s| s.role == Role::Smoke).map(|s| s.expected_s).sum();
    if smoke > budget_s {
        return Err(format!("the smoke set alone expects {smoke} s, over the lane budget of {budget_s} s"));
    }
    // Smoke first, then the slot (the rotation's promise), then what the change touched.
    let rank = |s: &Scenario| match (&s.role, touched(s, changed)) {
        (Role::Smoke, _) => (0, Why::Smoke),
        (Role::Slot(n), _) if *n == slot => (1, Why::Rotation(slot)),
        (_, Some(p)) => (2, Why::Touched(p.clone())),
        (Role::Slot(n), None) => (3, Why::RotatedOut(*n)),
    };
    let mut ranked: Vec<(u8, Why, &Scenario)> = all.iter().map(|s| (rank(s).0, rank(s).1, s)).collect();
    ranked.sort_by_key(|(r, _, s)| (*r, s.expected_s));
    for (r, why, s) in ranked {
        if r == 3 {
            plan.out.push((s.name.clone(), why));
        } else if plan.expected_s + s.expected_s <= budget_s {
            plan.expected_s += s.expected_s;
            plan.run.push((s.name.clone(), why));
        } else {
            let left = budget_s - plan.expected_s;
            let msg = format!(
                "{}, but it expects {} s and {left} s of the lane budget are left",
                why.describe(),
                s.expected_s
            );
            plan.out.push((s.name.clone(), Why::Deferred(msg)));
        }
    }
    plan.run.sort_by_key(|(n, _)| all.iter().find(|s| &s.name == n).map(|s| s.expected_s));
    Ok(plan)
}

/// Whether the plan at `count` for those changed files runs `name` (for "when did it last run").
pub fn runs(all: &[Scenario], count: u64, changed: &[String], budget_s: u64, name: &str) -> bool {
    select(all, count, changed, budget_s).is_ok_and(|p| p.run.iter().any(|(n, _)| n == name))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// test-vm/, from the directory cargo runs this test in (read at run time: a test binary
    /// reused from another checkout sharing the target directory names that checkout).
    fn test_vm() -> String {
        let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
        format!("{manifest}/..")
    }

    fn real() -> Vec<Scenario> {
        let root = test_vm();
        let lane = std::fs::read_to_string(format!("{root}/lane.tsv")).unwrap();
        let budget = std::fs::read_to_string(format!("{root}/budget.tsv")).unwrap();
        parse(&lane, &budget).unwrap()
    }

    const BUDGET: u64 = 2400;

    #[test]
    fn any_three_consecutive_commits_run_every_scenario() {
        let all = real();
        for start in 0..12 {
            for s in &all {
                let ran = (start..start + PERIOD).any(|c| runs(&all, c, &[], BUDGET, &s.name));
                assert!(ran, "{} is not run in commits {start}..{}", s.name, start + PERIOD);
            }
        }
    }

    #[test]
    fn the_lane_covers_run_sh_all_and_the_smoke_set_is_a_control_plane_and_a_join() {
        let all = real();
        let run_sh = std::fs::read_to_string(format!("{}/run.sh", test_vm())).unwrap();
        let line = run_sh.lines().find(|l| l.starts_with("SCENARIOS=(")).unwrap();
        let mut listed: Vec<&str> = line.trim_start_matches("SCENARIOS=(").trim_end_matches(')').split(' ').collect();
        let mut mapped: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
        listed.sort();
        mapped.sort();
        assert_eq!(listed, mapped, "lane.tsv must map exactly run.sh's `all`");
        let smoke: Vec<&str> = all.iter().filter(|s| s.role == Role::Smoke).map(|s| s.name.as_str()).collect();
        assert_eq!(smoke, ["capi-cp-init", "token-credential"]);
    }

    #[test]
    fn a_touched_path_always_selects_its_scenarios() {
        let all = real();
        for s in &all {
            for p in &s.paths {
                let file = if p.ends_with('/') { format!("{p}x") } else { p.clone() };
                for count in 0..PERIOD {
                    let plan = select(&all, count, std::slice::from_ref(&file), BUDGET).unwrap();
                    let chosen = plan.run.iter().any(|(n, _)| n == &s.name)
                        || plan.out.iter().any(|(n, w)| n == &s.name && matches!(w, Why::Deferred(_)));
                    assert!(chosen, "{file} does not select {} at commit {count}", s.name);
                }
            }
        }
        // Under the default budget one touched scenario always fits beside the smoke set and any slot.
        let plan = select(&all, 0, &["src/boot/failure.rs".to_string()], BUDGET).unwrap();
        let why = plan.run.iter().find(|(n, _)| n == "broken-user-data").map(|(_, w)| w.clone());
        assert_eq!(why, Some(Why::Touched("src/boot/failure.rs".into())));
        // A path no scenario names selects nothing beyond the smoke set and the slot.
        let plain = select(&all, 1, &[], BUDGET).unwrap();
        let docs = select(&all, 1, &["docs/testing.md".to_string()], BUDGET).unwrap();
        assert_eq!(plain.run, docs.run);
    }

    #[test]
    fn the_budget_is_never_exceeded_and_what_does_not_fit_is_deferred_by_name() {
        let all = real();
        let everything: Vec<String> = all.iter().flat_map(|s| s.paths.iter().map(|p| format!("{p}x"))).collect();
        for count in 0..PERIOD {
            let plan = select(&all, count, &everything, BUDGET).unwrap();
            assert!(plan.expected_s <= BUDGET, "{} s", plan.expected_s);
            assert_eq!(plan.run.len() + plan.out.len(), all.len(), "every scenario is accounted for");
        }
        // A tiny budget: the smoke set, nothing else; the rest deferred, each naming why.
        let smoke: u64 = all.iter().filter(|s| s.role == Role::Smoke).map(|s| s.expected_s).sum();
        let plan = select(&all, 0, &everything, smoke).unwrap();
        assert!(plan.run.iter().all(|(_, w)| *w == Why::Smoke));
        let deferred = plan.out.iter().filter(|(_, w)| matches!(w, Why::Deferred(m) if m.contains("lane budget")));
        assert_eq!(deferred.count(), all.len() - 2);
        // Smaller still: refused, the smoke set is not optional.
        assert!(select(&all, 0, &[], smoke - 1).unwrap_err().contains("smoke set alone"));
    }

    #[test]
    fn bad_maps_are_refused_naming_the_line() {
        let budget = "a\t10\nb\t20\n";
        assert!(parse("a\tsmoke\tsrc/\nb\t3\tsrc/\n", budget).unwrap_err().contains("line 2: role \"3\""));
        assert!(parse("a\tsmoke\tsrc/\nc\t1\tsrc/\n", budget).unwrap_err().contains("c has no expected seconds"));
        assert!(parse("a\tsmoke\n", budget).unwrap_err().contains("line 1"));
        assert!(parse("a\tsmoke\tx\na\t1\ty\n", budget).unwrap_err().contains("listed twice"));
        assert!(parse("a\tsmoke\tx\n", "a ten\n").unwrap_err().contains("budget.tsv line 1"));
    }
}
