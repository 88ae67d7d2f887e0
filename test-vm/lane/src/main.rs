//! `vm-lane`: the VM landing lane's choice and report (test-vm/run-all.sh --lane, .ci/run).
//!   vm-lane select [--budget S] [--base REV] [--history FILE]   the scenarios to boot, one line
//!   vm-lane report RESULTS [--budget S] [--history FILE]          what ran, what waited, and when
//!                                                                  each last ran; records RESULTS

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use argh::FromArgs;
use vm_lane::{PERIOD, Plan, Scenario, Why, parse, runs, select};

/// The VM landing lane (test-vm/lane.tsv).
#[derive(FromArgs)]
struct Args {
    #[argh(subcommand)]
    cmd: Cmd,
}

#[derive(FromArgs)]
#[argh(subcommand)]
enum Cmd {
    Select(SelectArgs),
    Report(ReportArgs),
}

/// Print the scenarios this landing boots (stdout, one line) and why (stderr).
#[derive(FromArgs)]
#[argh(subcommand, name = "select")]
struct SelectArgs {
    /// the lane's budget in expected seconds (budget.tsv)
    #[argh(option, default = "2400")]
    budget: u64,
    /// the commit the change is measured from (default: the last green lane run in --history
    /// if HEAD descends from it, else HEAD~1)
    #[argh(option)]
    base: Option<String>,
    /// the lane's record of green runs on this machine
    #[argh(option)]
    history: Option<PathBuf>,
    /// the commit that lands (default HEAD; give the same one to report)
    #[argh(option, default = "String::from(\"HEAD\")")]
    head: String,
}

/// Print what ran, what was rotated out or deferred, and when each last ran; record the results.
#[derive(FromArgs)]
#[argh(subcommand, name = "report")]
struct ReportArgs {
    /// run.sh's results (lines `PASS|FAIL NAME SECONDSs ...`)
    #[argh(positional)]
    results: PathBuf,
    /// the lane's budget in expected seconds, as given to select
    #[argh(option, default = "2400")]
    budget: u64,
    /// the base commit, as given to select
    #[argh(option)]
    base: Option<String>,
    /// the lane's record of green runs on this machine
    #[argh(option)]
    history: Option<PathBuf>,
    /// append this run's results to --history (a green lane: the next landing's base)
    #[argh(switch)]
    record: bool,
    /// the commit that lands, as given to select
    #[argh(option, default = "String::from(\"HEAD\")")]
    head: String,
}

fn main() -> ExitCode {
    let args: Args = argh::from_env();
    let r = match args.cmd {
        Cmd::Select(a) => cmd_select(a),
        Cmd::Report(a) => cmd_report(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vm-lane: {e}");
            ExitCode::from(2)
        }
    }
}

fn git(args: &[&str]) -> Result<String, String> {
    let out = Command::new("git").args(args).output().map_err(|e| format!("git {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!("git {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn scenarios() -> Result<Vec<Scenario>, String> {
    let root = PathBuf::from(git(&["rev-parse", "--show-toplevel"])?).join("test-vm");
    let read = |f: &str| std::fs::read_to_string(root.join(f)).map_err(|e| format!("test-vm/{f}: {e}"));
    parse(&read("lane.tsv")?, &read("budget.tsv")?)
}

/// The first-parent commit count of `rev` (the rotation's clock).
fn count(rev: &str) -> Result<u64, String> {
    git(&["rev-list", "--count", "--first-parent", rev])?.parse().map_err(|e| format!("git rev-list --count: {e}"))
}

fn changed(base: Option<&str>, rev: &str) -> Result<Vec<String>, String> {
    let Some(base) = base else { return Ok(Vec::new()) };
    Ok(git(&["diff", "--name-only", base, rev])?.lines().map(str::to_string).collect())
}

/// History lines: `commit<TAB>date<TAB>scenario<TAB>PASS|FAIL`.
fn history(path: Option<&Path>) -> Vec<(String, String, String, String)> {
    let text = path.and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f.len() == 4).then(|| (f[0].into(), f[1].into(), f[2].into(), f[3].into()))
        })
        .collect()
}

fn base_of(explicit: Option<String>, hist: Option<&Path>, head: &str) -> Option<String> {
    if explicit.is_some() {
        return explicit;
    }
    // The last commit whose lane ran green here, if HEAD descends from it.
    let last = history(hist).into_iter().rev().find(|h| h.3 == "PASS").map(|h| h.0);
    if let Some(c) = last
        && git(&["merge-base", "--is-ancestor", &c, head]).is_ok()
        && git(&["rev-parse", head]).is_ok_and(|h| h != c)
    {
        return Some(c);
    }
    git(&["rev-parse", "--verify", "--quiet", &format!("{head}~1")]).ok()
}

fn plan(budget: u64, base: Option<&str>, head: &str) -> Result<(Vec<Scenario>, Plan, Vec<String>), String> {
    let all = scenarios()?;
    let changed = changed(base, head)?;
    let plan = select(&all, count(head)?, &changed, budget)?;
    Ok((all, plan, changed))
}

fn why(w: &Why) -> String {
    w.describe()
}

fn cmd_select(a: SelectArgs) -> Result<(), String> {
    let base = base_of(a.base, a.history.as_deref(), &a.head);
    let (_, plan, changed) = plan(a.budget, base.as_deref(), &a.head)?;
    let head = count(&a.head)?;
    eprintln!(
        "vm-lane: commit {head} (slot {}), {} files changed since {}, {} s expected of {} s",
        head % PERIOD,
        changed.len(),
        base.as_deref().map(|b| &b[..b.len().min(12)]).unwrap_or("nothing"),
        plan.expected_s,
        a.budget
    );
    for (n, w) in plan.run.iter().chain(&plan.out) {
        eprintln!("vm-lane: {n:<18} {}", why(w));
    }
    let names: Vec<&str> = plan.run.iter().map(|(n, _)| n.as_str()).collect();
    println!("{}", names.join(" "));
    Ok(())
}

fn cmd_report(a: ReportArgs) -> Result<(), String> {
    let base = base_of(a.base, a.history.as_deref(), &a.head);
    let (all, plan, _) = plan(a.budget, base.as_deref(), &a.head)?;
    let results = std::fs::read_to_string(&a.results).map_err(|e| format!("{}: {e}", a.results.display()))?;
    let verdict = |n: &str| {
        results.lines().find_map(|l| {
            let mut f = l.split_whitespace();
            let v = f.next()?;
            (f.next() == Some(n)).then(|| v.to_string())
        })
    };
    let hist = history(a.history.as_deref());
    let head = git(&["rev-parse", &a.head])?;
    let date = git(&["show", "-s", "--format=%cs", &a.head])?;
    println!("---- VM landing lane: commit {} (slot {}) ----", &head[..12], count(&head)? % PERIOD);
    println!("{:<18} {:<8} {:<24} {:<24} why", "scenario", "now", "last in the lane (git)", "last green here");
    for s in &all {
        let (now, w) = match plan.run.iter().find(|(n, _)| n == &s.name) {
            Some((n, w)) => (verdict(n).unwrap_or_else(|| "MISSING".into()), w),
            // select() puts every scenario in run or out: a miss is a bug in it, not bad input.
            None => {
                ("-".to_string(), &plan.out.iter().find(|(n, _)| n == &s.name).expect("every scenario is planned").1)
            }
        };
        let w = why(w);
        let green = hist.iter().rev().find(|h| h.2 == s.name && h.3 == "PASS");
        let green =
            green.map(|h| format!("{} {}", &h.0[..12.min(h.0.len())], h.1)).unwrap_or_else(|| "never here".into());
        println!("{:<18} {:<8} {:<24} {green:<24} {w}", s.name, now, last_run(&all, &s.name, a.budget, &head)?);
    }
    if let Some(path) = a.history.filter(|_| a.record) {
        let mut add = String::new();
        for (n, _) in &plan.run {
            if let Some(v) = verdict(n) {
                add.push_str(&format!("{head}\t{date}\t{n}\t{v}\n"));
            }
        }
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, old + &add).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// The newest earlier commit whose lane, recomputed from git, ran `name` (each commit's change
/// measured against its parent), within the rotation's period.
fn last_run(all: &[Scenario], name: &str, budget: u64, head: &str) -> Result<String, String> {
    let revs = git(&["rev-list", "--first-parent", "--max-count", &(PERIOD + 1).to_string(), head])?;
    for rev in revs.lines().skip(1) {
        let parent = git(&["rev-parse", "--verify", "--quiet", &format!("{rev}~1")]).ok();
        let changed = changed(parent.as_deref(), rev)?;
        if runs(all, count(rev)?, &changed, budget, name) {
            return Ok(format!("{} {}", &rev[..12], git(&["show", "-s", "--format=%cs", rev])?));
        }
    }
    Ok(format!("not in the last {PERIOD} commits"))
}
