//! Renewal on a PKI issued in the past (400 days ago, so every leaf has expired), with the time
//! from a FakeClock.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use time::OffsetDateTime;

use super::*;
use crate::clock::FakeClock;
use crate::config::{HostFacts, InitConfig};
use crate::pki::check::CertFile;
use crate::pki::expiry::{Settings, TARGETS, inventory};
use crate::pki::spec::Usage;

const DAY: Duration = Duration::from_secs(86400);

fn config() -> InitConfig {
    let host = HostFacts { hostname: "cp-1".into(), default_address: Some("10.0.0.10".parse().unwrap()) };
    crate::config::load_init(None, &host).unwrap()
}

/// A node root with kubeadm's PKI and four kubeconfigs, all issued at `start`.
fn node(start: OffsetDateTime) -> (tempfile::TempDir, NodeFs, InitConfig) {
    let dir = tempfile::tempdir().unwrap();
    let fs = NodeFs::new(dir.path());
    let cfg = config();
    let pool = keys::KeyPool::new(cfg.key_algorithm);
    crate::pki::ensure_certs(&fs, &cfg, start, &pool).unwrap();
    let ca = crate::pki::load_ca(&fs, cfg.certs_dir(), "ca").unwrap();
    let ca_key = ca.key.as_ref().unwrap();
    for (file, cn, org) in [
        ("admin.conf", "kubernetes-admin", Some("kubeadm:cluster-admins")),
        ("super-admin.conf", "kubernetes-super-admin", Some("system:masters")),
        ("controller-manager.conf", "system:kube-controller-manager", None),
        ("scheduler.conf", "system:kube-scheduler", None),
    ] {
        let key = keys::generate(cfg.key_algorithm).unwrap();
        let req = issue::Request {
            cn: cn.into(),
            orgs: org.into_iter().map(str::to_string).collect(),
            usage: Usage::Client,
            sans: SanList::default(),
            validity: cfg.cert_validity,
            start,
        };
        let cert_pem = issue::signed(&req, &key, &ca.cert.pem, ca_key).unwrap();
        let creds = crate::kubeconfig::Credentials::Cert { cert_pem, key_pem: keys::to_pem(&key) };
        let kc = crate::kubeconfig::build("kubernetes", "https://10.0.0.10:6443", ca.cert.pem.as_bytes(), cn, creds);
        fs.write(&paths::kubeconfig(file), kc.to_yaml().unwrap().as_bytes()).unwrap();
    }
    fs.commit().unwrap();
    (dir, fs, cfg)
}

fn past() -> OffsetDateTime {
    OffsetDateTime::now_utc() - 400 * DAY
}

/// (subject DER, SAN extension value, EKU extension value, basicConstraints) of a certificate.
fn identity(c: &CertFile) -> (Vec<u8>, Vec<Vec<u8>>) {
    let x = c.x509().unwrap();
    let exts = x
        .extensions()
        .iter()
        .filter(|e| e.oid.to_id_string() != "2.5.29.35") // authorityKeyIdentifier: the same CA anyway
        .map(|e| [e.oid.to_id_string().into_bytes(), vec![e.critical as u8], e.value.to_vec()].concat())
        .collect();
    (x.subject().as_raw().to_vec(), exts)
}

fn read_all(fs: &NodeFs, s: &Settings) -> Vec<CertFile> {
    s.targets().map(|t| expiry::read_current(fs, s, t).unwrap().unwrap()).collect()
}

#[test]
fn inventory_lists_kubeadms_names_in_its_order() {
    let (_d, fs, cfg) = node(past());
    let s = Settings::from_config(&cfg);
    let now = OffsetDateTime::now_utc();
    let inv = inventory(&fs, &s, now).unwrap();
    let names: Vec<&str> = inv.certificates.iter().map(|e| e.name).collect();
    assert_eq!(
        names,
        [
            "admin.conf",
            "apiserver",
            "apiserver-etcd-client",
            "apiserver-kubelet-client",
            "controller-manager.conf",
            "etcd-healthcheck-client",
            "etcd-peer",
            "etcd-server",
            "front-proxy-client",
            "scheduler.conf",
            "super-admin.conf"
        ]
    );
    let cas: Vec<(&str, bool)> = inv.authorities.iter().map(|e| (e.name, e.externally_managed)).collect();
    assert_eq!(cas, [("ca", false), ("etcd-ca", false), ("front-proxy-ca", false)]);
    for e in &inv.certificates {
        assert!(e.residual(now).unwrap().is_negative(), "{} should have expired", e.name);
        assert!(!e.externally_managed);
    }
    assert_eq!(inv.certificates[2].ca_name, Some("etcd-ca"));
    assert_eq!(inv.certificates[2].path, "/etc/kubernetes/pki/apiserver-etcd-client.crt");
    assert!(inv.warnings.is_empty(), "{:?}", inv.warnings);
}

#[test]
fn renew_copies_identity_keeps_ca_and_sa_and_backs_up() {
    let (dir, fs, cfg) = node(past());
    let s = Settings::from_config(&cfg);
    let before = read_all(&fs, &s);
    let keep = [
        "ca.crt",
        "ca.key",
        "etcd/ca.crt",
        "etcd/ca.key",
        "front-proxy-ca.crt",
        "front-proxy-ca.key",
        "sa.key",
        "sa.pub",
    ];
    let kept: Vec<Vec<u8>> =
        keep.iter().map(|f| std::fs::read(dir.path().join("etc/kubernetes/pki").join(f)).unwrap()).collect();
    let old_key = std::fs::read(dir.path().join("etc/kubernetes/pki/apiserver.key")).unwrap();
    let clock = FakeClock::new().at(OffsetDateTime::now_utc().replace_nanosecond(0).unwrap());
    let backup = Backup::at(clock.wall());
    for t in s.targets() {
        let out = renew(&fs, t.name, &clock, &s, &backup).unwrap();
        assert_eq!(out, Outcome::Renewed { not_after: clock.wall() + cfg.cert_validity }, "{}", t.name);
    }
    let after = read_all(&fs, &s);
    for ((t, old), new) in s.targets().zip(&before).zip(&after) {
        assert_eq!(identity(old), identity(new), "{}: subject, SANs and usages copied", t.name);
        assert_ne!(old.spki().unwrap(), new.spki().unwrap(), "{}: a new key", t.name);
        let v = new.x509().unwrap().validity().clone();
        assert_eq!(v.not_after.to_datetime().unix_timestamp(), (clock.wall() + cfg.cert_validity).unix_timestamp());
        assert!(v.not_before.to_datetime() < clock.wall());
    }
    for (f, bytes) in keep.iter().zip(&kept) {
        assert_eq!(&std::fs::read(dir.path().join("etc/kubernetes/pki").join(f)).unwrap(), bytes, "{f} untouched");
    }
    let mode = |p: &str| std::fs::metadata(dir.path().join(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("etc/kubernetes/pki/apiserver.key"), 0o600);
    assert_eq!(mode("etc/kubernetes/pki/etcd/peer.key"), 0o600);
    assert_eq!(mode("etc/kubernetes/admin.conf"), 0o600);
    let b = backup.dir().trim_start_matches('/');
    assert!(b.starts_with("etc/kubernetes/tmp/kubeadm-backup-certs-"), "{b}");
    assert_eq!(mode(b), 0o700);
    assert_eq!(mode("etc/kubernetes/tmp"), 0o700);
    assert_eq!(std::fs::read(dir.path().join(b).join("pki/apiserver.key")).unwrap(), old_key);
    assert_eq!(mode(&format!("{b}/pki/apiserver.key")), 0o600);
    assert_eq!(mode(&format!("{b}/pki/apiserver.crt")), 0o600);
    for f in ["admin.conf", "scheduler.conf", "pki/etcd/server.crt", "pki/front-proxy-client.key"] {
        assert!(dir.path().join(b).join(f).is_file(), "{f} backed up");
    }
    // Every key matches its new certificate.
    for t in s.targets() {
        if let Place::Pki { base } = t.place {
            let key = crate::pki::load_key(&fs, paths::key(&s.certs_dir, base)).unwrap().unwrap();
            let crt = crate::pki::load_cert(&fs, paths::cert(&s.certs_dir, base)).unwrap().unwrap();
            assert_eq!(keys::spki(&key), crt.spki().unwrap(), "{base}");
        }
    }
    // And nothing expires any more.
    let inv = inventory(&fs, &s, clock.wall()).unwrap();
    assert!(inv.certificates.iter().all(|e| e.residual(clock.wall()).unwrap() > time::Duration::days(364)));
}

#[test]
fn kubeconfig_renewal_changes_only_the_two_values() {
    let (dir, fs, cfg) = node(past());
    let s = Settings::from_config(&cfg);
    let path = dir.path().join("etc/kubernetes/admin.conf");
    let old = std::fs::read_to_string(&path).unwrap();
    let clock = FakeClock::new();
    renew(&fs, "admin.conf", &clock, &s, &Backup::at(clock.wall())).unwrap();
    let new = std::fs::read_to_string(&path).unwrap();
    let (old_lines, new_lines): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    assert_eq!(old_lines.len(), new_lines.len());
    let mut changed = Vec::new();
    for (a, b) in old_lines.iter().zip(&new_lines) {
        if a != b {
            let field = |l: &str| l.split(':').next().unwrap().trim().to_string();
            assert_eq!(field(a), field(b));
            changed.push(field(a));
        }
    }
    assert_eq!(changed, ["client-certificate-data", "client-key-data"]);
    // The rest, byte for byte (line endings included).
    let strip =
        |t: &str| t.split_inclusive('\n').filter(|l| !l.trim_start().starts_with("client-")).collect::<String>();
    assert_eq!(strip(&old), strip(&new));
    assert!(new.ends_with('\n') == old.ends_with('\n'));
}

#[test]
fn replacing_in_place_keeps_every_other_byte_of_an_odd_file() {
    // Comments, odd spacing and CRLF line ends that re-serialising would lose.
    let (_d, fs, _cfg) = node(past());
    let text = String::from_utf8(fs.read(paths::kubeconfig("scheduler.conf").as_str()).unwrap().unwrap()).unwrap();
    let kc = Kubeconfig::parse(text.as_bytes()).unwrap();
    let user = kc.current().unwrap().1.unwrap().clone();
    let odd = format!("# kept\r\n{}# trailing comment\n", text.replace("kind: Config", "kind:   Config  # spaced"));
    let out = String::from_utf8(replace_client_data("/x.conf", odd.as_bytes(), "CERT", "KEY").unwrap()).unwrap();
    let want = odd.replacen(&user.client_certificate_data, "Q0VSVA==", 1).replacen(&user.client_key_data, "S0VZ", 1);
    assert_eq!(out, want);
    // A value that is not there verbatim (here: twice) is refused, never guessed at.
    let twice = format!("{odd}# {}\n", user.client_key_data);
    let err = replace_client_data("/x.conf", twice.as_bytes(), "CERT", "KEY").unwrap_err();
    assert!(err.to_string().starts_with("/x.conf holds its client-key-data value more than once"), "{err}");
}

#[test]
fn missing_and_external_are_reported_not_renewed() {
    let (dir, fs, cfg) = node(past());
    let s = Settings::from_config(&cfg);
    let pki = dir.path().join("etc/kubernetes/pki");
    std::fs::remove_file(pki.join("front-proxy-ca.key")).unwrap();
    std::fs::remove_file(dir.path().join("etc/kubernetes/scheduler.conf")).unwrap();
    std::fs::remove_file(pki.join("etcd/peer.crt")).unwrap();
    let before = std::fs::read(pki.join("front-proxy-client.crt")).unwrap();
    let clock = FakeClock::new();
    let backup = Backup::at(clock.wall());
    assert_eq!(renew(&fs, "front-proxy-client", &clock, &s, &backup).unwrap(), Outcome::ExternalCa);
    assert_eq!(renew(&fs, "scheduler.conf", &clock, &s, &backup).unwrap(), Outcome::Missing);
    assert_eq!(renew(&fs, "etcd-peer", &clock, &s, &backup).unwrap(), Outcome::Missing);
    assert_eq!(std::fs::read(pki.join("front-proxy-client.crt")).unwrap(), before);
    let inv = inventory(&fs, &s, clock.wall()).unwrap();
    let row = |n: &str| inv.certificates.iter().chain(&inv.authorities).find(|e| e.name == n).unwrap().clone();
    assert!(row("front-proxy-client").externally_managed);
    assert!(row("front-proxy-ca").externally_managed);
    assert_eq!(row("scheduler.conf").not_after, None);
    assert_eq!(row("etcd-peer").not_after, None);
    assert!(!row("apiserver").externally_managed);
}

#[test]
fn never_a_ca_or_the_service_account_key() {
    let (_d, fs, cfg) = node(past());
    let s = Settings::from_config(&cfg);
    let clock = FakeClock::new();
    for name in ["ca", "etcd-ca", "front-proxy-ca", "sa", "kubelet.conf", "nope"] {
        let err = renew(&fs, name, &clock, &s, &Backup::at(clock.wall())).unwrap_err();
        assert!(matches!(err, PkiError::UnknownCertificate { .. }), "{name}: {err}");
        assert!(err.to_string().contains("apiserver, "), "{err}");
    }
    assert!(TARGETS.iter().all(|t| !t.name.contains("ca") || t.name.contains("-client")));
}

#[test]
fn a_ca_within_a_year_of_expiry_is_a_warning() {
    let (_d, fs, cfg) = node(OffsetDateTime::now_utc());
    let s = Settings::from_config(&cfg);
    let clock = FakeClock::new();
    clock.advance(cfg.ca_validity - 200 * DAY);
    let inv = inventory(&fs, &s, clock.wall()).unwrap();
    assert_eq!(inv.warnings.len(), 3, "{:?}", inv.warnings);
    assert!(inv.warnings[0].contains("the ca certificate authority (/etc/kubernetes/pki/ca.crt) expires at"));
    assert!(inv.warnings[0].contains("in 199 days") || inv.warnings[0].contains("in 200 days"), "{}", inv.warnings[0]);
    clock.advance(300 * DAY);
    let inv = inventory(&fs, &s, clock.wall()).unwrap();
    assert!(inv.warnings[1].contains("etcd-ca") && inv.warnings[1].contains("expired at"), "{:?}", inv.warnings);
}

#[test]
fn a_renewal_cut_between_key_and_certificate_converges_on_rerun() {
    let (dir, fs, cfg) = node(past());
    let s = Settings::from_config(&cfg);
    // The cut: a new key renamed into place, the old certificate still there.
    let stray = keys::generate(cfg.key_algorithm).unwrap();
    std::fs::write(dir.path().join("etc/kubernetes/pki/apiserver.key"), keys::to_pem(&stray)).unwrap();
    let old = read_all(&fs, &s);
    let clock = FakeClock::new();
    assert!(matches!(renew(&fs, "apiserver", &clock, &s, &Backup::at(clock.wall())).unwrap(), Outcome::Renewed { .. }));
    let key = crate::pki::load_key(&fs, "/etc/kubernetes/pki/apiserver.key").unwrap().unwrap();
    let crt = crate::pki::load_cert(&fs, "/etc/kubernetes/pki/apiserver.crt").unwrap().unwrap();
    assert_eq!(keys::spki(&key), crt.spki().unwrap());
    assert_eq!(identity(&old[1]), identity(&crt));
}

#[test]
fn a_backup_is_never_overwritten_in_the_same_run() {
    let (dir, fs, cfg) = node(past());
    let s = Settings::from_config(&cfg);
    let original = std::fs::read(dir.path().join("etc/kubernetes/pki/apiserver.crt")).unwrap();
    let clock = FakeClock::new();
    let backup = Backup::at(clock.wall());
    renew(&fs, "apiserver", &clock, &s, &backup).unwrap();
    renew(&fs, "apiserver", &clock, &s, &backup).unwrap();
    let b = dir.path().join(backup.dir().trim_start_matches('/')).join("pki/apiserver.crt");
    assert_eq!(std::fs::read(b).unwrap(), original);
}

#[test]
fn the_clock_decides_the_new_validity_and_the_config_its_length() {
    let (_d, fs, mut cfg) = node(past());
    cfg.cert_validity = 30 * DAY;
    let s = Settings::from_config(&cfg);
    let when = (OffsetDateTime::now_utc() + 730 * DAY).replace_nanosecond(0).unwrap();
    let clock = FakeClock::new().at(when);
    let out = renew(&fs, "etcd-server", &clock, &s, &Backup::at(clock.wall())).unwrap();
    assert_eq!(out, Outcome::Renewed { not_after: when + 30 * DAY });
    let inv = inventory(&fs, &s, when).unwrap();
    let row = inv.certificates.iter().find(|e| e.name == "etcd-server").unwrap();
    assert_eq!(row.residual(when).unwrap().whole_days(), 30);
}
