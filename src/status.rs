//! Boot status you can read from outside: `/run/kubestrap/status.json` rewritten atomically as the
//! run goes, the same events as one-line JSON on stdout (`KUBESTRAP-EVENT {...}`, which the unit
//! sends to the journal and the serial console), and sd_notify STATUS with the current phase.
//! Nothing secret goes in here: messages are our own error texts, which never carry secrets.

use std::cell::RefCell;
use std::time::Instant;

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
}

/// Reports progress: file, console line, sd_notify. Cheap enough to call per phase.
pub struct Reporter<'a> {
    fs: &'a NodeFs,
    status: RefCell<Status>,
    phase_started: RefCell<Option<Instant>>,
}

pub(crate) fn now() -> String {
    crate::pki::check::rfc3339(time::OffsetDateTime::now_utc())
}

impl<'a> Reporter<'a> {
    pub fn new(fs: &'a NodeFs, stage: &str, attempt: u32) -> Reporter<'a> {
        let t = now();
        // What an earlier stage of this boot found (the file lives under /run) stays in the file.
        let earlier = read(fs).filter(|s| s.stage != stage).unwrap_or_default();
        let status = Status {
            stage: stage.into(),
            state: "running".into(),
            attempt,
            started_at: t.clone(),
            updated_at: t,
            images: earlier.images,
            certificates: earlier.certificates,
            ..Default::default()
        };
        let r = Reporter { fs, status: RefCell::new(status), phase_started: RefCell::new(None) };
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
        *self.phase_started.borrow_mut() = Some(Instant::now());
        self.status.borrow_mut().phase = name.into();
        self.emit("phase", name, "");
    }

    fn finish_phase(&self) {
        if let Some(t) = self.phase_started.borrow_mut().take() {
            let mut s = self.status.borrow_mut();
            let name = s.phase.clone();
            s.timings.push((name, t.elapsed().as_millis() as u64));
        }
    }

    pub fn waiting(&self, message: &str) {
        let phase = self.status.borrow().phase.clone();
        self.emit("waiting", &phase, message);
    }

    /// One preloaded archive: in the status file, and as an `image` event.
    pub fn image(&self, p: &crate::images::Preloaded) {
        self.status.borrow_mut().images.push(p.clone());
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
        self.status.borrow_mut().state = "done".into();
        self.emit("done", "", "");
        let _ = libsystemd::daemon::notify(false, &[libsystemd::daemon::NotifyState::Ready]);
    }

    pub fn skipped(&self, why: &str) {
        self.status.borrow_mut().state = "skipped".into();
        self.emit("skipped", "", why);
    }

    pub fn failed(&self, e: &crate::error::Error) {
        self.finish_phase();
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
    if !s.last_error.is_empty() {
        out.push_str(&format!("  failed: {}\n  see: journalctl -u kubestrap -u kubestrap-post\n", s.last_error));
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
}
