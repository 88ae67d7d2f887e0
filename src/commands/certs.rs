//! `kubestrap certs check-expiration` and `kubestrap certs renew`: kubeadm's two verbs over
//! [`crate::pki::expiry`] and [`crate::pki::renew`], printed as kubeadm v1.37 prints them.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use log::warn;
use serde::Serialize;
use time::OffsetDateTime;

use crate::cli;
use crate::clock::{Clock, SystemClock};
use crate::config::HostFacts;
use crate::error::{Context, Error, Result};
use crate::fsutil::NodeFs;
use crate::pki::expiry::{self, Entry, Inventory, Settings};
use crate::pki::renew::{self, Backup, Outcome};

/// The ClusterConfiguration's certificate settings: from `--config` (a file on this machine,
/// not under `--root`) or kubeadm's defaults, then `--cert-dir`. The node's own name and
/// address play no part, so kubeadm's static host facts stand in.
pub fn settings(config: Option<&Path>, cert_dir: Option<&str>) -> Result<Settings> {
    let host = HostFacts { hostname: "node".into(), default_address: Some(IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4))) };
    let cfg = crate::config::load_init(config, &host)?;
    let mut s = Settings::from_config(&cfg);
    if let Some(dir) = cert_dir.filter(|d| !d.is_empty()) {
        if !dir.starts_with('/') {
            return Err(Error::bad_flag(format!("--cert-dir {dir:?} must be an absolute path")));
        }
        s.certs_dir = dir.trim_end_matches('/').to_string();
    }
    Ok(s)
}

/// `--kubeconfig` is kubeadm's way to the cluster's configuration, which kubestrap never reads
/// here: said at run time, not silently dropped.
pub(super) fn unused_kubeconfig(flag: Option<&Path>, verb: &str) {
    if let Some(p) = flag {
        warn!(
            "--kubeconfig {}: kubestrap {verb} reads no configuration from the cluster (only --config, or kubeadm's defaults); the flag is ignored",
            p.display()
        );
    }
}

pub fn check_expiration(c: cli::CheckExpiration) -> Result<()> {
    unused_kubeconfig(c.kubeconfig.as_deref(), "certs check-expiration");
    let format = c.output.as_str();
    if !matches!(format, "text" | "json" | "yaml") {
        return Err(Error::bad_flag(format!("-o {format:?}: kubestrap prints text, json or yaml")));
    }
    let s = settings(c.config.as_deref(), c.cert_dir.as_deref())?;
    let fs = NodeFs::new(&c.root);
    let now = SystemClock.wall();
    let inv = expiry::inventory(&fs, &s, now)?;
    for w in &inv.warnings {
        warn!("[check-expiration] WARNING: {w}");
    }
    let out = match format {
        "json" => to_json(&inv, now)?,
        "yaml" => to_yaml(&inv, now),
        _ => to_text(&inv, now),
    };
    std::io::stdout().lock().write_all(out.as_bytes()).ctx("writing to stdout")
}

pub fn renew_command(r: cli::Renew) -> Result<()> {
    unused_kubeconfig(r.kubeconfig.as_deref(), "certs renew");
    let s = settings(r.config.as_deref(), r.cert_dir.as_deref())?;
    let fs = NodeFs::new(&r.root);
    let clock = SystemClock;
    let backup = Backup::at(clock.wall());
    let all = r.name == "all";
    let names: Vec<&str> = if all { s.targets().map(|t| t.name).collect() } else { vec![r.name.as_str()] };
    let mut out = std::io::stdout().lock();
    for name in names {
        let outcome = renew::renew(&fs, name, &clock, &s, &backup)?;
        let t = expiry::find(name).ok_or_else(|| Error::bad_flag(format!("{name} is not a valid certificate")))?;
        let line = match outcome {
            Outcome::Missing => format!("MISSING! {}", t.long_name),
            Outcome::ExternalCa => format!("Detected external {}, {} can't be renewed", t.ca_base, t.long_name),
            Outcome::Renewed { .. } => format!("{} renewed", t.long_name),
        };
        writeln!(out, "{line}").ctx("writing to stdout")?;
    }
    if all {
        writeln!(
            out,
            "\nDone renewing certificates. You must restart the kube-apiserver, kube-controller-manager, kube-scheduler and etcd, so that they can use the new certificates."
        )
        .ctx("writing to stdout")?;
    }
    if fs.exists(backup.dir()) {
        log::info!("[renew] The replaced files are kept in {}", backup.dir());
    }
    Ok(())
}

/// Whole seconds left, truncated toward zero (Go's `int64(d / time.Second)`).
fn residual_secs(e: &Entry, now: OffsetDateTime) -> i64 {
    e.residual(now).map_or(0, |d| d.whole_seconds())
}

/// apimachinery's HumanDuration, the RESIDUAL TIME column.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let d = (hours / 24) % 365;
        return if d == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{d}d", hours / 24 / 365) };
    }
    format!("{}y", hours / 24 / 365)
}

/// `Jan 02, 2006 15:04 MST` in UTC.
fn expires(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    let month = &format!("{:?}", t.month())[..3];
    format!("{month} {:02}, {} {:02}:{:02} UTC", t.day(), t.year(), t.hour(), t.minute())
}

/// metav1.Time's JSON form: RFC 3339, whole seconds, UTC.
fn rfc3339(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    crate::pki::check::rfc3339(t.replace_nanosecond(0).unwrap_or(t))
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// kubeadm's text table: the certificates, a blank line, the CAs.
pub fn to_text(inv: &Inventory, now: OffsetDateTime) -> String {
    let mut lines = vec!["CERTIFICATE\tEXPIRES\tRESIDUAL TIME\tCERTIFICATE AUTHORITY\tEXTERNALLY MANAGED".to_string()];
    for e in &inv.certificates {
        lines.push(match e.not_after {
            None => format!("!MISSING! {}\t\t\t\t", e.name),
            Some(t) => format!(
                "{}\t{}\t{}\t{}\t{:<8}",
                e.name,
                expires(t),
                human_duration(residual_secs(e, now)),
                e.ca_name.unwrap_or_default(),
                yes_no(e.externally_managed)
            ),
        });
    }
    lines.push(String::new());
    lines.push("CERTIFICATE AUTHORITY\tEXPIRES\tRESIDUAL TIME\tEXTERNALLY MANAGED".into());
    for e in &inv.authorities {
        lines.push(match e.not_after {
            None => format!("!MISSING! {}\t\t\t", e.name),
            Some(t) => format!(
                "{}\t{}\t{}\t{:<8}",
                e.name,
                expires(t),
                human_duration(residual_secs(e, now)),
                yes_no(e.externally_managed)
            ),
        });
    }
    crate::tabwrite::tabwrite(&lines)
}

/// kubeadm's output.kubeadm.k8s.io/v1alpha3 Certificate, fields in its order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CertJson {
    name: &'static str,
    expiration_date: Option<String>,
    residual_time: i64,
    externally_managed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    ca_name: Option<&'static str>,
    missing: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InfoJson {
    kind: &'static str,
    api_version: &'static str,
    certificates: Vec<CertJson>,
    certificate_authorities: Vec<CertJson>,
}

const KIND: &str = "CertificateExpirationInfo";
const API_VERSION: &str = "output.kubeadm.k8s.io/v1alpha3";

fn cert_json(e: &Entry, now: OffsetDateTime) -> CertJson {
    CertJson {
        name: e.name,
        expiration_date: e.not_after.map(rfc3339),
        residual_time: residual_secs(e, now),
        externally_managed: e.externally_managed,
        ca_name: e.ca_name.filter(|_| e.not_after.is_some()),
        missing: e.not_after.is_none(),
    }
}

/// `-o json`: kubeadm's JSON printer (4-space indent, a final newline).
pub fn to_json(inv: &Inventory, now: OffsetDateTime) -> Result<String> {
    let info = InfoJson {
        kind: KIND,
        api_version: API_VERSION,
        certificates: inv.certificates.iter().map(|e| cert_json(e, now)).collect(),
        certificate_authorities: inv.authorities.iter().map(|e| cert_json(e, now)).collect(),
    };
    let mut buf = Vec::new();
    let mut ser =
        serde_json::Serializer::with_formatter(&mut buf, serde_json::ser::PrettyFormatter::with_indent(b"    "));
    info.serialize(&mut ser).map_err(|e| Error::internal(format!("rendering JSON: {e}")))?;
    let mut s = String::from_utf8_lossy(&buf).into_owned();
    s.push('\n');
    Ok(s)
}

/// `-o yaml`: the same object through sigs.k8s.io/yaml, whose keys come out sorted.
pub fn to_yaml(inv: &Inventory, now: OffsetDateTime) -> String {
    let mut out = format!("apiVersion: {API_VERSION}\n");
    for (key, list) in [("certificateAuthorities", &inv.authorities), ("certificates", &inv.certificates)] {
        out.push_str(&format!("{key}:\n"));
        for e in list.iter() {
            let c = cert_json(e, now);
            let mut fields = Vec::new();
            if let Some(ca) = c.ca_name {
                fields.push(format!("caName: {ca}"));
            }
            fields.push(match &c.expiration_date {
                Some(d) => format!("expirationDate: \"{d}\""),
                None => "expirationDate: null".into(),
            });
            fields.push(format!("externallyManaged: {}", c.externally_managed));
            fields.push(format!("missing: {}", c.missing));
            fields.push(format!("name: {}", c.name));
            fields.push(format!("residualTime: {}", c.residual_time));
            for (i, f) in fields.iter().enumerate() {
                out.push_str(if i == 0 { "- " } else { "  " });
                out.push_str(f);
                out.push('\n');
            }
        }
    }
    out.push_str(&format!("kind: {KIND}\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_duration_matches_apimachinery() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (10 * 3600, "10h"),
            (50 * 3600, "2d2h"),
            (72 * 3600, "3d"),
            (364 * 86400 + 86000, "364d"),
            (3 * 365 * 86400 + 5 * 86400, "3y5d"),
            (3650 * 86400 - 6, "9y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
    }

    #[test]
    fn expires_is_gos_layout() {
        let t = time::macros::datetime!(2027-11-05 03:04:59 UTC);
        assert_eq!(expires(t), "Nov 05, 2027 03:04 UTC");
        assert_eq!(rfc3339(t), "2027-11-05T03:04:59Z");
    }
}
