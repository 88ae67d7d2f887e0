use super::*;
use crate::clock::FakeClock;
use crate::error::Kind;
use crate::pki::issue::{Request, self_signed, signed};
use crate::pki::spec::Usage;

const DAY: time::Duration = time::Duration::days(1);

fn days(n: u64) -> Duration {
    Duration::from_secs(n * 86_400)
}

fn req(cn: &str, orgs: &[&str], usage: Usage, validity: Duration, start: OffsetDateTime) -> Request {
    Request {
        cn: cn.into(),
        orgs: orgs.iter().map(|s| s.to_string()).collect(),
        usage,
        sans: Default::default(),
        validity,
        start,
    }
}

struct Node {
    dir: tempfile::TempDir,
    fs: NodeFs,
    ca_pem: String,
    ca_key: rcgen::KeyPair,
}

/// A node root with a cluster CA made `ca_age` ago for `ca_life` (key on the node when `cp`).
fn node(cp: bool, ca_age: time::Duration, ca_life: Duration) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let fs = NodeFs::new(dir.path());
    let now = OffsetDateTime::now_utc();
    let ca_key = crate::pki::keys::generate(crate::config::KeyAlgorithm::EcdsaP256).unwrap();
    let ca_pem = self_signed(&req("kubernetes", &[], Usage::Ca, ca_life, now - ca_age), &ca_key).unwrap();
    fs.write(&paths::cert(paths::DEFAULT_CERTS_DIR, "ca"), ca_pem.as_bytes()).unwrap();
    if cp {
        fs.write(&paths::key(paths::DEFAULT_CERTS_DIR, "ca"), crate::pki::keys::to_pem(&ca_key).as_bytes()).unwrap();
    }
    fs.commit().unwrap();
    Node { dir, fs, ca_pem, ca_key }
}

impl Node {
    /// The kubelet's client bundle, issued `age` ago for `life`, as the current identity.
    fn kubelet_client(&self, age: time::Duration, life: Duration) {
        let key = crate::pki::keys::generate(crate::config::KeyAlgorithm::EcdsaP256).unwrap();
        let now = OffsetDateTime::now_utc();
        let r = req("system:node:n1", &["system:nodes"], Usage::Client, life, now - age);
        let cert = signed(&r, &key, &self.ca_pem, &self.ca_key).unwrap();
        let file = paths::kubelet_client_bundle("2020-01-01-00-00-00");
        self.fs.write(&file, format!("{cert}{}", crate::pki::keys::to_pem(&key)).as_bytes()).unwrap();
        self.fs.symlink(&KUBELET_CLIENT_CURRENT, file.as_str()).unwrap();
        let kc = crate::objects::kubelet::kubelet_conf_for_rotation("https://127.0.0.1:6443", self.ca_pem.as_bytes());
        self.fs.write(&KUBELET_CONF, kc.to_yaml().unwrap().as_bytes()).unwrap();
        self.fs.commit().unwrap();
    }

    fn run(&self, clock: &FakeClock, creds: &std::path::Path) -> Result<Vec<CertRow>> {
        run(&self.fs, &Env { clock, credentials_dir: creds.into(), config: None })
    }

    fn read(&self, p: &str) -> Vec<u8> {
        self.fs.read(p).unwrap().unwrap()
    }
}

fn action<'a>(rows: &'a [CertRow], name: &str) -> &'a str {
    &rows.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("no {name} row in {rows:?}")).action
}

#[test]
fn a_control_plane_re_issues_an_expired_kubelet_client_certificate_from_its_ca() {
    let n = node(true, 800 * DAY, days(3650));
    n.kubelet_client(400 * DAY, days(365));
    let ca_before = n.read("/etc/kubernetes/pki/ca.crt");
    let rows = n.run(&FakeClock::new(), n.dir.path()).unwrap();
    assert!(action(&rows, "kubelet-client").starts_with("renewed (was expired at "), "{rows:?}");
    assert_eq!(action(&rows, "ca"), "ok");

    let target = std::fs::read_link(n.fs.real(KUBELET_CLIENT_CURRENT.as_str())).unwrap();
    assert!(target.is_absolute() && !target.ends_with("kubelet-client-2020-01-01-00-00-00.pem"), "{target:?}");
    assert!(n.fs.exists("/var/lib/kubelet/pki/kubelet-client-2020-01-01-00-00-00.pem"), "the old bundle is kept");
    let bundle = n.fs.read_following_link(KUBELET_CLIENT_CURRENT.as_str()).unwrap().unwrap();
    let c = CertFile::parse(&bundle).unwrap();
    let x = c.x509().unwrap();
    assert_eq!(x.subject().to_string(), "O=system:nodes, CN=system:node:n1");
    let ca = CertFile::parse(&ca_before).unwrap();
    assert_eq!(x.issuer(), ca.x509().unwrap().subject());
    x.verify_signature(Some(ca.x509().unwrap().public_key())).expect("signed by the cluster CA");
    let left = x.validity().not_after.to_datetime() - OffsetDateTime::now_utc();
    assert!(left > 364 * DAY && left <= 365 * DAY, "the old lifetime again: {left}");
    assert!(String::from_utf8_lossy(&bundle).contains("PRIVATE KEY"), "chain then key");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(n.fs.real(target.to_str().unwrap())).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(n.read("/etc/kubernetes/pki/ca.crt"), ca_before, "the CA is never touched");

    // The next boot finds it fine and leaves it alone.
    let rows = n.run(&FakeClock::new(), n.dir.path()).unwrap();
    assert_eq!(action(&rows, "kubelet-client"), "ok");
    assert_eq!(std::fs::read_link(n.fs.real(KUBELET_CLIENT_CURRENT.as_str())).unwrap(), target);
}

#[test]
fn a_worker_without_a_token_says_why_and_with_one_bootstraps_again() {
    let n = node(false, 800 * DAY, days(3650));
    n.kubelet_client(400 * DAY, days(365));
    let creds = n.dir.path().join("creds");
    std::fs::create_dir(&creds).unwrap();
    let e = n.run(&FakeClock::new(), &creds).unwrap_err();
    assert_eq!(e.kind, Kind::State);
    assert!(e.message.contains("system:node:n1") && e.message.contains("expired at "), "{}", e.message);
    assert!(e.message.contains("kubestrap.token"), "{}", e.message);
    assert!(!n.fs.exists(BOOTSTRAP_KUBELET_CONF.as_str()));

    std::fs::write(creds.join("kubestrap.token"), "abcdef.0123456789abcdef\n").unwrap();
    let rows = n.run(&FakeClock::new(), &creds).unwrap();
    assert!(action(&rows, "kubelet-client").starts_with("re-bootstrap"), "{rows:?}");
    let boot = crate::kubeconfig::Kubeconfig::parse(&n.read(BOOTSTRAP_KUBELET_CONF.as_str())).unwrap();
    let (cluster, user) = boot.current().unwrap();
    assert_eq!(cluster.server, "https://127.0.0.1:6443");
    assert_eq!(crate::kubeconfig::decode_b64(&cluster.certificate_authority_data).unwrap(), n.ca_pem.as_bytes());
    assert_eq!(user.unwrap().token, "abcdef.0123456789abcdef");

    std::fs::write(creds.join("kubestrap.token"), "not-a-token").unwrap();
    let e = n.run(&FakeClock::new(), &creds).unwrap_err();
    assert!(e.message.contains("kubestrap.token credential") && !e.message.contains("not-a-token"), "{}", e.message);
}

#[test]
fn a_clock_before_the_ca_was_made_is_waited_for_then_nothing_is_judged() {
    let n = node(true, -30 * DAY, days(3650));
    n.kubelet_client(-30 * DAY + 400 * DAY, days(365));
    let link = std::fs::read_link(n.fs.real(KUBELET_CLIENT_CURRENT.as_str())).unwrap();
    let clock = FakeClock::new();
    let rows = n.run(&clock, n.dir.path()).unwrap();
    assert!(rows.is_empty(), "{rows:?}");
    assert_eq!(clock.elapsed(), CLOCK_WAIT, "waited the bound, no more");
    assert!(clock.waits().iter().all(|w| w.why.contains("time sync")));
    assert_eq!(std::fs::read_link(n.fs.real(KUBELET_CLIENT_CURRENT.as_str())).unwrap(), link, "nothing renewed");
}

#[test]
fn an_expired_kubelet_serving_certificate_is_removed_and_a_ca_near_its_end_warned_about() {
    let n = node(true, 3500 * DAY, days(3650));
    n.kubelet_client(10 * DAY, days(365));
    let key = crate::pki::keys::generate(crate::config::KeyAlgorithm::EcdsaP256).unwrap();
    let now = OffsetDateTime::now_utc();
    let expired = self_signed(&req("n1-ca@1", &[], Usage::Ca, days(365), now - 400 * DAY), &key).unwrap();
    let crt = paths::kubelet_client_bundle("x");
    let crt = crate::paths::File::at(KUBELET_SERVING_CRT.into(), crt.mode);
    n.fs.write(&crt, expired.as_bytes()).unwrap();
    n.fs.write(&crate::paths::File::at(KUBELET_SERVING_KEY.into(), 0o600), b"k").unwrap();
    n.fs.commit().unwrap();
    let rows = n.run(&FakeClock::new(), n.dir.path()).unwrap();
    assert!(action(&rows, "kubelet-serving").starts_with("removed"), "{rows:?}");
    assert!(!n.fs.exists(KUBELET_SERVING_CRT) && !n.fs.exists(KUBELET_SERVING_KEY));
    assert_eq!(action(&rows, "kubelet-client"), "ok");
    let ca = action(&rows, "ca");
    assert!(
        ca.starts_with("warning: the CA /etc/kubernetes/pki/ca.crt ends at ") && ca.contains("never rotated"),
        "{ca}"
    );
    assert!(rows.iter().find(|r| r.name == "ca").unwrap().residual_days < 365);
}

#[test]
fn the_window_is_120_days_or_a_third_of_a_shorter_lifetime() {
    use super::super::every_boot_leaves::window;
    assert_eq!(window(days(365)), 120 * DAY);
    assert_eq!(window(days(90)), 30 * DAY);
    assert_eq!(window(Duration::from_secs(3 * 3600)), time::Duration::hours(1));
}

/// kubeadm's whole PKI made 300 days ago: the leaves have 65 days left (inside the window) and
/// are renewed as `certs renew` does; the CAs and sa.* stay; the next boot has nothing to do.
#[test]
fn a_control_plane_renews_its_leaves_inside_the_window_and_never_a_ca() {
    let dir = tempfile::tempdir().unwrap();
    let fs = NodeFs::new(dir.path());
    let host =
        crate::config::HostFacts { hostname: "cp-1".into(), default_address: Some("10.0.0.10".parse().unwrap()) };
    let cfg = crate::config::load_init(None, &host).unwrap();
    let pool = crate::pki::keys::KeyPool::new(cfg.key_algorithm);
    crate::pki::ensure_certs(&fs, &cfg, OffsetDateTime::now_utc() - 300 * DAY, &pool).unwrap();
    let kept: Vec<(&str, Vec<u8>)> = ["ca.crt", "ca.key", "sa.key", "sa.pub", "etcd/ca.crt", "front-proxy-ca.key"]
        .into_iter()
        .map(|f| (f, fs.read(format!("/etc/kubernetes/pki/{f}")).unwrap().unwrap()))
        .collect();
    let clock = FakeClock::new();
    let rows = run(&fs, &Env { clock: &clock, credentials_dir: dir.path().into(), config: None }).unwrap();
    for name in ["apiserver", "apiserver-kubelet-client", "front-proxy-client", "etcd-server", "etcd-peer"] {
        assert_eq!(action(&rows, name), "renewed", "{rows:?}");
        let r = rows.iter().find(|r| r.name == name).unwrap();
        assert!(r.residual_days >= 364, "{r:?}");
    }
    for (f, before) in &kept {
        assert_eq!(&fs.read(format!("/etc/kubernetes/pki/{f}")).unwrap().unwrap(), before, "{f} changed");
    }
    assert!(fs.exists("/etc/kubernetes/tmp"), "the old pairs are kept");
    let again = run(&fs, &Env { clock: &clock, credentials_dir: dir.path().into(), config: None }).unwrap();
    assert!(again.iter().all(|r| r.action == "ok"), "{again:?}");
}

/// init's kubelet.conf embeds a client certificate; when it has ended the kubelet would try a
/// bootstrap it has no token for, so kubelet.conf is pointed at the rotating pair (re-issued
/// from ca.key when there is none), as kubeadm's kubelet-finalize does.
#[test]
fn an_expired_embedded_kubelet_identity_is_replaced_by_the_rotating_pair() {
    let n = node(true, 800 * DAY, days(3650));
    let key = crate::pki::keys::generate(crate::config::KeyAlgorithm::EcdsaP256).unwrap();
    let r = req("system:node:n1", &["system:nodes"], Usage::Client, days(365), OffsetDateTime::now_utc() - 400 * DAY);
    let cert = signed(&r, &key, &n.ca_pem, &n.ca_key).unwrap();
    let creds = crate::kubeconfig::Credentials::Cert { cert_pem: cert, key_pem: crate::pki::keys::to_pem(&key) };
    let kc =
        crate::kubeconfig::build("kubernetes", "https://10.0.0.10:6443", n.ca_pem.as_bytes(), "system:node:n1", creds);
    n.fs.write(&KUBELET_CONF, kc.to_yaml().unwrap().as_bytes()).unwrap();
    n.fs.commit().unwrap();
    assert!(!n.fs.exists(KUBELET_CLIENT_CURRENT.as_str()));

    let rows = n.run(&FakeClock::new(), n.dir.path()).unwrap();
    assert!(action(&rows, "kubelet.conf").starts_with("now uses kubelet-client-current.pem"), "{rows:?}");
    let conf = crate::kubeconfig::Kubeconfig::parse(&n.read(KUBELET_CONF.as_str())).unwrap();
    let (cluster, user) = conf.current().unwrap();
    assert_eq!(cluster.server, "https://10.0.0.10:6443");
    let user = user.unwrap();
    assert!(user.client_certificate_data.is_empty() && user.client_key_data.is_empty());
    assert_eq!(user.client_certificate, KUBELET_CLIENT_CURRENT.as_str());
    let bundle = n.fs.read_following_link(KUBELET_CLIENT_CURRENT.as_str()).unwrap().expect("a new pair");
    let c = CertFile::parse(&bundle).unwrap();
    assert_eq!(c.x509().unwrap().subject().to_string(), "O=system:nodes, CN=system:node:n1");
    assert!(c.x509().unwrap().validity().not_after.to_datetime() > OffsetDateTime::now_utc() + 360 * DAY);
    // Once rotating, there is nothing embedded to judge.
    let rows = n.run(&FakeClock::new(), n.dir.path()).unwrap();
    assert!(rows.iter().all(|r| r.name != "kubelet.conf"), "{rows:?}");
    assert_eq!(action(&rows, "kubelet-client"), "ok");
}
