//! Boot status you can read from outside: `/run/kubestrap/status.json` rewritten atomically as the
//! run goes, the same events as one-line JSON on stdout (`KUBESTRAP-EVENT {...}`, which the unit
//! sends to the journal and the serial console), and sd_notify STATUS with the current phase.
//! Nothing secret goes in here: messages are our own error texts, which never carry secrets.

use std::cell::RefCell;

use serde::{Deserialize, Serialize};

use crate::fsutil::NodeFs;
use crate::paths;

pub(crate) const EVENT_PREFIX: &str = "KUBESTRAP-EVENT ";

/// One line of the every-boot pass's certificate table.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CertRow {
    pub name: String,
    pub path: String,
    pub not_after: String,
    /// Days left when the pass looked (negative: expired).
    pub residual_days: i64,
    /// `ok`, `renewed`, `warning: …`, `removed`, `re-bootstrap`, `skipped: …`.
    pub action: String,
}

/// The every-boot comparison of the image's Kubernetes version with the node's (boot/image_upgrade.rs).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ImageUpgrade {
    /// The image's version and the node's before this boot.
    pub image: String,
    pub node: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub control_plane: String,
    /// `current`, `upgraded`, `waiting` or `refused`.
    pub state: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// One span of the boot timeline: a stage, a phase, an image import or a wait for a component,
/// on the boot clock ([`crate::clock::boot_ms`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Span {
    pub stage: String,
    pub name: String,
    pub start_ms: u64,
    /// None while it runs (or when the run ended without closing it: killed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Status {
    pub stage: String,
    /// running, done, failed or skipped.
    pub state: String,
    pub phase: String,
    pub role: String,
    pub datasource: String,
    pub attempt: u32,
    pub started_at: String,
    pub updated_at: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_error: String,
    /// The exit code the run ended with (2 bad input, 3 preflight, 1 other).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// (phase, milliseconds).
    #[serde(default)]
    pub timings: Vec<(String, u64)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight: Option<serde_json::Value>,
    /// The image archives preloaded into the runtime (or found present) this run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<crate::images::Preloaded>,
    /// The every-boot pass's certificate table (later boots only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub certificates: Vec<CertRow>,
    /// The every-boot comparison of the image's Kubernetes version with the node's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<ImageUpgrade>,
    /// This boot's stages, phases, image imports and component waits, in the order they began
    /// (the pre-kubelet stage's kept by the post-kubelet one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<Span>,
}

/// Reports progress: file, console line, sd_notify. Cheap enough to call per phase.
pub struct Reporter<'a> {
    fs: &'a NodeFs,
    status: RefCell<Status>,
    /// The timeline's index of this stage's span and of the running phase's.
    stage_span: usize,
    phase_span: RefCell<Option<usize>>,
}

pub(crate) fn now() -> String {
    crate::pki::check::rfc3339(time::OffsetDateTime::now_utc())
}

impl<'a> Reporter<'a> {
    pub fn new(fs: &'a NodeFs, stage: &str, attempt: u32) -> Reporter<'a> {
        let t = now();
        // What an earlier stage of this boot found (the file lives under /run) stays in the file.
        let earlier = read(fs).filter(|s| s.stage != stage).unwrap_or_default();
        // A timeline runs from the pre-kubelet stage on: a post-kubelet stage continues it.
        let mut timeline = if earlier.stage == "pre-kubelet" { earlier.timeline } else { Vec::new() };
        timeline.push(Span {
            stage: stage.into(),
            name: stage.into(),
            start_ms: crate::clock::boot_ms(),
            end_ms: None,
        });
        let stage_span = timeline.len() - 1;
        let status = Status {
            stage: stage.into(),
            state: "running".into(),
            attempt,
            started_at: t.clone(),
            updated_at: t,
            images: earlier.images,
            certificates: earlier.certificates,
            upgrade: earlier.upgrade,
            timeline,
            ..Default::default()
        };
        let r = Reporter { fs, status: RefCell::new(status), stage_span, phase_span: RefCell::new(None) };
        r.emit("start", "", "");
        r
    }

    /// The status as it stands.
    pub(crate) fn snapshot(&self) -> Status {
        self.status.borrow().clone()
    }

    pub fn set(&self, f: impl FnOnce(&mut Status)) {
        f(&mut self.status.borrow_mut());
        self.write();
    }

    pub fn phase(&self, name: &str) {
        self.finish_phase();
        {
            let mut s = self.status.borrow_mut();
            s.phase = name.into();
            let stage = s.stage.clone();
            s.timeline.push(Span { stage, name: name.into(), start_ms: crate::clock::boot_ms(), end_ms: None });
            *self.phase_span.borrow_mut() = Some(s.timeline.len() - 1);
        }
        self.emit("phase", name, "");
    }

    /// Ends the running phase's span, and its row of `timings` from it.
    fn finish_phase(&self) {
        if let Some(i) = self.phase_span.borrow_mut().take() {
            self.end_span(i);
            let mut s = self.status.borrow_mut();
            let span = &s.timeline[i];
            let row = (span.name.clone(), span.end_ms.unwrap_or(span.start_ms) - span.start_ms);
            s.timings.push(row);
        }
    }

    fn end_span(&self, i: usize) {
        if let Some(span) = self.status.borrow_mut().timeline.get_mut(i) {
            span.end_ms.get_or_insert_with(crate::clock::boot_ms);
        }
    }

    /// A span that ended now and began at `start_ms` on the boot clock (a wait for a component's
    /// first healthy answer, an import that ran beside others); written with the next event.
    pub fn span(&self, name: &str, start_ms: u64) {
        let mut s = self.status.borrow_mut();
        let stage = s.stage.clone();
        let end = crate::clock::boot_ms();
        s.timeline.push(Span { stage, name: name.into(), start_ms: start_ms.min(end), end_ms: Some(end) });
    }

    pub fn waiting(&self, message: &str) {
        let phase = self.status.borrow().phase.clone();
        self.emit("waiting", &phase, message);
    }

    /// One preloaded archive: in the status file, and as an `image` event.
    pub fn image(&self, p: &crate::images::Preloaded) {
        self.status.borrow_mut().images.push(p.clone());
        if p.state == "imported" {
            let name = p.archive.rsplit('/').next().unwrap_or(&p.archive);
            self.span(&format!("image {name}"), crate::clock::boot_ms().saturating_sub(p.ms));
        }
        let phase = self.status.borrow().phase.clone();
        self.emit("image", &phase, &format!("{} {}: {} ({} ms)", p.state, p.archive, p.images.join(", "), p.ms));
    }

    /// The every-boot pass's table: in the status file, and one `certs` event saying what it did.
    pub fn certs(&self, rows: &[CertRow]) {
        self.status.borrow_mut().certificates = rows.to_vec();
        let acted: Vec<String> =
            rows.iter().filter(|r| r.action != "ok").map(|r| format!("{}: {}", r.name, r.action)).collect();
        let summary = if acted.is_empty() {
            format!("{} certificates checked, all ok", rows.len())
        } else {
            format!("{} certificates checked; {}", rows.len(), acted.join("; "))
        };
        self.emit("certs", "", &summary);
    }

    pub fn done(&self) {
        self.finish_phase();
        self.end_span(self.stage_span);
        self.status.borrow_mut().state = "done".into();
        self.emit("done", "", "");
        let _ = libsystemd::daemon::notify(false, &[libsystemd::daemon::NotifyState::Ready]);
    }

    pub fn skipped(&self, why: &str) {
        self.finish_phase();
        self.end_span(self.stage_span);
        self.status.borrow_mut().state = "skipped".into();
        self.emit("skipped", "", why);
    }

    pub fn failed(&self, e: &crate::error::Error) {
        self.finish_phase();
        self.end_span(self.stage_span);
        {
            let mut s = self.status.borrow_mut();
            s.state = "failed".into();
            s.last_error = e.message.clone();
            s.exit_code = Some(e.kind.exit_code());
        }
        let phase = self.status.borrow().phase.clone();
        self.emit("error", &phase, &e.message);
    }

    fn emit(&self, event: &str, phase: &str, message: &str) {
        let line = serde_json::json!({ "event": event, "stage": self.status.borrow().stage, "phase": phase, "message": message });
        println!("{EVENT_PREFIX}{line}");
        let status =
            if message.is_empty() { format!("{event} {phase}") } else { format!("{event} {phase}: {message}") };
        let _ = libsystemd::daemon::notify(
            false,
            &[libsystemd::daemon::NotifyState::Status(status.chars().take(200).collect())],
        );
        self.status.borrow_mut().updated_at = now();
        self.write();
    }

    fn write(&self) {
        // The status is a report, not the work: failing to write it is said, never fatal. It
        // lives under /run, which does not outlive the boot, so it is replaced atomically but
        // not fsynced (a first boot writes it ~20 times).
        let written = serde_json::to_vec_pretty(&*self.status.borrow())
            .map_err(|e| crate::error::Error::internal(format!("encoding {}: {e}", paths::STATUS)))
            .and_then(|json| Ok(self.fs.write_unsynced(&paths::STATUS, &json)?));
        if let Err(e) = written {
            log::warn!("[status] {e}");
        }
    }
}

/// Reads the last run's status.
pub fn read(fs: &NodeFs) -> Option<Status> {
    fs.read(&paths::STATUS).ok().flatten().and_then(|b| serde_json::from_slice(&b).ok())
}

/// The last run in words, for `kubestrap status`.
pub(crate) fn describe(s: &Status) -> String {
    let mut out = format!(
        "kubestrap {} stage: {} (attempt {}, started {}, updated {})\n",
        s.stage, s.state, s.attempt, s.started_at, s.updated_at
    );
    if !s.role.is_empty() {
        out.push_str(&format!("  role: {}, datasource: {}\n", s.role, s.datasource));
    }
    if !s.phase.is_empty() {
        out.push_str(&format!("  last phase: {}\n", s.phase));
    }
    for (p, ms) in &s.timings {
        out.push_str(&format!("  {p:<20} {ms} ms\n"));
    }
    for c in &s.certificates {
        out.push_str(&format!("  {:<24} {} ({} days) {}\n", c.name, c.not_after, c.residual_days, c.action));
    }
    if let Some(u) = &s.upgrade {
        let cp =
            if u.control_plane.is_empty() { String::new() } else { format!(", control plane {}", u.control_plane) };
        out.push_str(&format!("  upgrade by image: {} (node {}, image {}{cp})\n", u.state, u.node, u.image));
        if !u.reason.is_empty() && u.state != "refused" {
            out.push_str(&format!("    {}\n", u.reason));
        }
    }
    if !s.last_error.is_empty() {
        out.push_str(&format!("  failed: {}\n  see: journalctl -u kubestrap -u kubestrap-post\n", s.last_error));
    }
    out
}

/// The timeline as a table sorted by start, like `systemd-analyze blame` sorted by time: each
/// span's start and end on the boot clock (seconds since the kernel started), how long it took,
/// its stage and name. A span without an end did not finish (still running, or killed).
pub(crate) fn describe_timeline(s: &Status) -> String {
    let mut spans: Vec<&Span> = s.timeline.iter().collect();
    spans.sort_by_key(|sp| sp.start_ms);
    let secs = |ms: u64| format!("{}.{:03}s", ms / 1000, ms % 1000);
    let mut out = format!("{:>10} {:>10} {:>10}  {:<13} {}\n", "START", "END", "TOOK", "STAGE", "WHAT");
    for sp in spans {
        let (end, took) = match sp.end_ms {
            Some(e) => (secs(e), secs(e.saturating_sub(sp.start_ms))),
            None => ("-".to_string(), "unfinished".to_string()),
        };
        out.push_str(&format!("{:>10} {end:>10} {took:>10}  {:<13} {}\n", secs(sp.start_ms), sp.stage, sp.name));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The post-kubelet stage keeps what the pre-kubelet stage of the same boot found.
    #[test]
    fn a_later_stage_keeps_the_earlier_stages_images_and_certificates() {
        let d = tempfile::tempdir().unwrap();
        let fs = NodeFs::new(d.path());
        let pre = Reporter::new(&fs, "pre-kubelet", 1);
        let p = crate::images::Preloaded {
            archive: "a.tar".into(),
            images: vec!["i".into()],
            state: "imported".into(),
            ms: 1,
        };
        pre.image(&p);
        let row = CertRow {
            name: "apiserver".into(),
            path: "/p".into(),
            not_after: "2030-01-01T00:00:00Z".into(),
            residual_days: 365,
            action: "renewed".into(),
        };
        pre.certs(std::slice::from_ref(&row));
        pre.done();
        let post = Reporter::new(&fs, "post-kubelet", 1);
        post.done();
        let s = read(&fs).unwrap();
        assert_eq!((s.stage.as_str(), &s.images, &s.certificates), ("post-kubelet", &vec![p.clone()], &vec![row]));
        assert!(describe(&s).contains("apiserver"), "{}", describe(&s));
        // The same stage again starts afresh (no list twice).
        Reporter::new(&fs, "post-kubelet", 2).done();
        Reporter::new(&fs, "pre-kubelet", 2).done();
        assert!(read(&fs).unwrap().images.is_empty());
    }

    /// The timeline: both stages of one boot, every phase, an import and a component wait, on
    /// the boot clock; the table sorted by start with an unfinished span marked.
    #[test]
    fn the_timeline_spans_both_stages_on_the_boot_clock() {
        let d = tempfile::tempdir().unwrap();
        let fs = NodeFs::new(d.path());
        let t0 = crate::clock::boot_ms();
        let pre = Reporter::new(&fs, "pre-kubelet", 1);
        pre.phase("gather");
        let p = crate::images::Preloaded {
            archive: "/usr/share/kubestrap/images/etcd.tar".into(),
            images: vec!["registry.k8s.io/etcd:3.7.0-0".into()],
            state: "imported".into(),
            ms: 5,
        };
        pre.phase("images");
        pre.image(&p);
        pre.image(&crate::images::Preloaded { state: "present".into(), ms: 0, ..p.clone() });
        pre.phase("certs");
        pre.done();
        let post = Reporter::new(&fs, "post-kubelet", 1);
        post.phase("wait-control-plane");
        post.span("kube-apiserver healthy", t0);
        let t1 = crate::clock::boot_ms();
        let s = read(&fs).unwrap();
        let names: Vec<(&str, &str)> = s.timeline.iter().map(|sp| (sp.stage.as_str(), sp.name.as_str())).collect();
        assert_eq!(
            names,
            [
                ("pre-kubelet", "pre-kubelet"),
                ("pre-kubelet", "gather"),
                ("pre-kubelet", "images"),
                ("pre-kubelet", "image etcd.tar"),
                ("pre-kubelet", "certs"),
                ("post-kubelet", "post-kubelet"),
                ("post-kubelet", "wait-control-plane"),
            ],
            "the component's span is written with the next event"
        );
        for sp in &s.timeline[..5] {
            let end = sp.end_ms.unwrap_or_else(|| panic!("{} not closed", sp.name));
            assert!(sp.start_ms <= end && end <= t1, "{sp:?} ends after {t1}");
            if sp.name.starts_with("image ") {
                // It ran beside the others: it ends when reported and lasted what the import took.
                assert_eq!(end - sp.start_ms, 5, "{sp:?}");
            } else {
                assert!(t0 <= sp.start_ms, "{sp:?} starts before {t0}");
            }
        }
        assert!(s.timeline[5].end_ms.is_none() && s.timeline[6].end_ms.is_none(), "still running");
        post.done();
        let s = read(&fs).unwrap();
        let api = s.timeline.iter().find(|sp| sp.name == "kube-apiserver healthy").expect("the wait");
        assert_eq!(api.start_ms, t0);
        assert!(s.timeline.iter().all(|sp| sp.end_ms.is_some()), "{:?}", s.timeline);
        // The table: sorted by start (the wait began with the boot), a header, a row per span.
        let table = describe_timeline(&s);
        let rows: Vec<&str> = table.lines().collect();
        assert_eq!(rows.len(), 1 + s.timeline.len(), "{table}");
        assert!(rows[0].contains("START") && rows[0].contains("WHAT"), "{table}");
        let starts: Vec<f64> = rows[1..]
            .iter()
            .map(|r| r.split_whitespace().next().and_then(|c| c.trim_end_matches('s').parse().ok()).expect("start"))
            .collect();
        assert!(starts.windows(2).all(|w| w[0] <= w[1]), "{table}");
        assert!(rows.iter().any(|r| r.contains("image etcd.tar")), "{table}");
        // A new boot's pre-kubelet stage starts a new timeline; an unclosed span says so.
        let again = Reporter::new(&fs, "pre-kubelet", 2);
        again.phase("gather");
        drop(again);
        let s = read(&fs).unwrap();
        assert_eq!(s.timeline.len(), 2, "{:?}", s.timeline);
        assert!(describe_timeline(&s).contains("unfinished"));
    }
}
