//! Datasource detection against fake roots (tempdirs), a local IMDS/NoCloud HTTP server, real
//! seed images (xorriso ISO, mkfs.vfat) and a real read-only mount through a loop device.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::needs::{Need, need};
use crate::common::{TOKEN, fixture, free_port, write_file};
use kubestrap::clock::FakeClock;
use kubestrap::datasource::block::{self, FsType};
use kubestrap::datasource::nocloud::Cidata;
use kubestrap::datasource::{Datasource, Env};
use kubestrap::error::Kind;
use kubestrap::userdata::{NodePlan, plan_detailed};

/// A worker's #cloud-config user-data (the token comes as a credential).
const WORKER: &str = fixture!("nocloud-worker/user-data");

fn env(root: &Path) -> Env {
    Env {
        root: root.into(),
        cmdline: "console=ttyS0 root=/dev/vda ro".into(),
        credentials_dir: None,
        imds_base: None,
        mount_dir: root.join("mnt"),
    }
}

/// Detection with a fake clock: no real waiting.
fn detect(e: &Env, timeout: Duration) -> Result<kubestrap::datasource::Gathered, kubestrap::error::Error> {
    kubestrap::datasource::detect(e, timeout, &FakeClock::new()).map_err(kubestrap::error::Error::from)
}

fn soon() -> Duration {
    Duration::from_secs(5)
}

// ---------- a tiny HTTP server ----------

#[derive(Debug, Clone)]
struct Req {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
}

impl Req {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

struct Server {
    base: String,
    log: Arc<Mutex<Vec<Req>>>,
}

/// Serves on 127.0.0.1 from a thread; one request per connection (Connection: close).
fn serve(handler: impl Fn(&Req) -> (u16, Vec<u8>) + Send + 'static) -> Server {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = log.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut s) = conn else { continue };
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut line = String::new();
            if r.read_line(&mut line).is_err() {
                continue;
            }
            let mut parts = line.split_whitespace();
            let method = parts.next().unwrap_or_default().to_string();
            let path = parts.next().unwrap_or_default().to_string();
            let mut headers = Vec::new();
            let mut len = 0usize;
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
                if let Some((k, v)) = h.trim_end().split_once(':') {
                    if k.eq_ignore_ascii_case("content-length") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    headers.push((k.to_string(), v.trim().to_string()));
                }
            }
            let mut body = vec![0u8; len];
            let _ = r.read_exact(&mut body);
            let req = Req { method, path, headers };
            let (code, body) = handler(&req);
            log2.lock().unwrap().push(req);
            let head = format!("HTTP/1.1 {code} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&body);
        }
    });
    Server { base, log }
}

/// IMDSv2 semantics: PUT for a token (TTL header required), GETs only with that token.
fn imds(user_data: &'static str) -> Server {
    serve(move |r| {
        const SESSION: &str = "session-token-xyz";
        match (r.method.as_str(), r.path.as_str()) {
            ("PUT", "/latest/api/token") => match r.header("X-aws-ec2-metadata-token-ttl-seconds") {
                Some(_) => (200, SESSION.into()),
                None => (400, b"missing ttl".to_vec()),
            },
            ("GET", p) if r.header("X-aws-ec2-metadata-token") != Some(SESSION) => (401, p.as_bytes().to_vec()),
            ("GET", "/latest/user-data") => (200, user_data.into()),
            ("GET", "/latest/meta-data/instance-id") => (200, b"i-0123456789".to_vec()),
            ("GET", "/latest/meta-data/local-hostname") => (200, b"ip-10-0-0-7.ec2.internal\n".to_vec()),
            _ => (404, Vec::new()),
        }
    })
}

/// A port nothing listens on.
fn closed_port_url() -> String {
    format!("http://127.0.0.1:{}", free_port())
}

// ---------- detection order, overrides, credentials ----------

#[test]
fn detect_order_credentials_then_seed_and_credentials_merged() {
    let d = tempfile::tempdir().unwrap();
    let e = env(d.path());
    write_file(&d.path().join("var/lib/cloud/seed/nocloud/user-data"), WORKER);
    write_file(&d.path().join("var/lib/cloud/seed/nocloud/meta-data"), "instance-id: iid-1\nlocal-hostname: W1\n");
    // The system credentials dir is used when $CREDENTIALS_DIRECTORY is unset.
    write_file(&d.path().join("run/credentials/@system/kubestrap.token"), format!("{TOKEN}\n"));
    let g = detect(&e, soon()).unwrap();
    assert_eq!(g.source, "nocloud-seed");
    assert_eq!(g.meta.local_hostname.as_deref(), Some("W1"));
    assert_eq!(g.credentials.keys().collect::<Vec<_>>(), vec!["kubestrap.token"]);
    assert!(!format!("{g:?}").contains("0123456789abcdef"));
    // The whole chain: seed user-data + token credential + meta-data node name.
    let NodePlan::Join { join } = plan_detailed(&g).unwrap().plan else { panic!("expected join") };
    assert_eq!(join.node_registration.name, "w1");
    assert_eq!(join.discovery.bootstrap_token.unwrap().token, TOKEN);

    // A kubestrap.user-data credential comes first.
    let creds = d.path().join("creds");
    write_file(&creds.join("kubestrap.user-data"), format!("{WORKER}  token: {TOKEN}\n"));
    let e2 = Env { credentials_dir: Some(creds.clone()), ..e };
    let g = detect(&e2, soon()).unwrap();
    assert_eq!(g.source, "credentials");
    // $CREDENTIALS_DIRECTORY replaces the system dir: the @system token is not read.
    assert_eq!(g.credentials.keys().collect::<Vec<_>>(), vec!["kubestrap.user-data"]);
}

#[test]
fn detect_cmdline_override_and_override_file() {
    let d = tempfile::tempdir().unwrap();
    write_file(&d.path().join("var/lib/cloud/seed/nocloud/user-data"), WORKER);
    write_file(&d.path().join("etc/kubestrap/user-data"), "from-file");
    let mut e = env(d.path());
    e.cmdline = "ro kubestrap.ds=file:/etc/kubestrap/user-data quiet".into();
    let g = detect(&e, soon()).unwrap();
    assert_eq!((g.source.as_str(), g.user_data.as_deref()), ("file", Some(&b"from-file"[..])));

    // The same words in /etc/kubestrap/datasource, when the cmdline says nothing.
    e.cmdline = "ro".into();
    write_file(&d.path().join("etc/kubestrap/datasource"), "kubestrap.ds=file:/etc/kubestrap/user-data\n");
    assert_eq!(detect(&e, soon()).unwrap().source, "file");

    // An override restricts detection: ec2 is disabled here, so nothing else is tried.
    e.cmdline = "kubestrap.ds=ec2".into();
    let err = detect(&e, soon()).unwrap_err();
    assert_eq!(err.kind, Kind::Config);
    assert!(err.message.contains("no IMDS address"), "{}", err.message);

    e.cmdline = "kubestrap.ds=azure".into();
    let err = detect(&e, soon()).unwrap_err();
    assert_eq!(err.kind.exit_code(), 2);
    assert!(err.message.contains("\"azure\" is not a datasource"), "{}", err.message);
}

// ---------- HTTP sources ----------

#[test]
fn ec2_imdsv2_token_then_user_data_and_meta_data() {
    let s = imds("#cloud-config\nkubestrap: {role: worker}\n");
    let d = tempfile::tempdir().unwrap();
    let mut e = env(d.path());
    e.imds_base = Some(s.base.clone());
    let g = detect(&e, soon()).unwrap();
    assert_eq!(g.source, "ec2");
    assert_eq!(g.user_data.as_deref(), Some(&b"#cloud-config\nkubestrap: {role: worker}\n"[..]));
    assert_eq!(g.meta.instance_id.as_deref(), Some("i-0123456789"));
    assert_eq!(g.meta.local_hostname.as_deref(), Some("ip-10-0-0-7.ec2.internal"));
    let log = s.log.lock().unwrap();
    assert_eq!((log[0].method.as_str(), log[0].path.as_str()), ("PUT", "/latest/api/token"));
    assert!(log[0].header("X-aws-ec2-metadata-token-ttl-seconds").is_some());
    let gets: Vec<&Req> = log.iter().filter(|r| r.method == "GET").collect();
    // The user-data and the seven meta-data keys the variable table names.
    assert_eq!(gets.len(), 8, "{log:?}");
    assert!(gets.iter().all(|r| r.header("X-aws-ec2-metadata-token") == Some("session-token-xyz")), "{log:?}");
}

#[test]
fn ec2_not_answering_at_first_is_retried_until_it_answers() {
    let calls = Arc::new(Mutex::new(0));
    let c2 = calls.clone();
    let s = serve(move |r| {
        let mut n = c2.lock().unwrap();
        *n += 1;
        match (r.method.as_str(), r.path.as_str()) {
            (_, _) if *n <= 2 => (503, Vec::new()),
            ("PUT", _) => (200, b"t".to_vec()),
            ("GET", "/latest/user-data") => (200, b"ud".to_vec()),
            _ => (404, Vec::new()),
        }
    });
    let d = tempfile::tempdir().unwrap();
    let mut e = env(d.path());
    e.imds_base = Some(s.base.clone());
    let g = detect(&e, soon()).unwrap();
    assert_eq!((g.source.as_str(), g.user_data.as_deref()), ("ec2", Some(&b"ud"[..])));
    assert_eq!(g.meta.instance_id, None, "404 meta-data is absent, not an error");
    assert!(*calls.lock().unwrap() >= 4);
}

#[test]
fn nocloud_net_from_cmdline_seed_url() {
    let s = serve(|r| match r.path.as_str() {
        "/seed/user-data" => (200, b"#cloud-config\n".to_vec()),
        "/seed/meta-data" => (200, b"instance-id: net-1\nlocal-hostname: from-meta\n".to_vec()),
        _ => (404, Vec::new()),
    });
    let d = tempfile::tempdir().unwrap();
    let mut e = env(d.path());
    // Present but lower priority: an override must win over the seed dir.
    write_file(&d.path().join("var/lib/cloud/seed/nocloud/user-data"), WORKER);
    e.cmdline = format!("ro ds=nocloud;s={}/seed/;h=cmdline-host", s.base);
    let g = detect(&e, soon()).unwrap();
    assert_eq!(g.source, "nocloud-net");
    assert_eq!(g.user_data.as_deref(), Some(&b"#cloud-config\n"[..]));
    assert_eq!(g.meta.instance_id.as_deref(), Some("net-1"));
    assert_eq!(g.meta.local_hostname.as_deref(), Some("cmdline-host"), "cmdline h= wins");
}

// ---------- bounded waiting ----------

#[test]
fn detect_waits_for_a_seed_that_appears_late() {
    let d = tempfile::tempdir().unwrap();
    let e = env(d.path());
    let seed = d.path().join("var/lib/cloud/seed/nocloud/user-data");
    // The seed appears once 3 s of (virtual) time have passed.
    let clock = FakeClock::new().on_advance(move |t| {
        if t >= Duration::from_secs(3) && !seed.exists() {
            write_file(&seed, WORKER);
        }
    });
    let g = kubestrap::datasource::detect(&e, Duration::from_secs(10), &clock).unwrap();
    assert_eq!(g.source, "nocloud-seed");
    let waits = clock.waits();
    // Every 500 ms (±25%) until 3 s: 5 to 8 rounds, each saying which sources were absent.
    assert!((5..=8).contains(&waits.len()), "{waits:?}");
    assert!(waits.iter().all(|w| w.why.contains("nocloud-seed: no user-data or meta-data in")), "{waits:?}");
    assert!(clock.elapsed() >= Duration::from_secs(3) && clock.elapsed() < Duration::from_secs(5));
}

#[test]
fn detect_deadline_names_every_sources_reason() {
    let d = tempfile::tempdir().unwrap();
    let mut e = env(d.path());
    e.imds_base = Some(closed_port_url());
    let clock = FakeClock::new();
    let err =
        kubestrap::error::Error::from(kubestrap::datasource::detect(&e, Duration::from_secs(60), &clock).unwrap_err());
    // Exactly the deadline, in rounds of at most 625 ms: at least 96 probes of every source.
    assert_eq!(clock.elapsed(), Duration::from_secs(60));
    assert!(clock.waits().len() >= 96, "{}", clock.waits().len());
    assert_eq!(err.kind, Kind::Runtime);
    let m = err.message;
    assert!(m.starts_with("no datasource found after 60"), "{m}");
    for want in [
        "credentials: no kubestrap.user-data in",
        "nocloud-seed: no user-data or meta-data in",
        "nocloud: cidata not present",
        "configdrive: no filesystem labelled config-2",
        "ec2: IMDS PUT http://127.0.0.1:",
        "connection refused",
    ] {
        assert!(m.contains(want), "missing {want:?} in: {m}");
    }
}

// ---------- seed images: labels and the read-only mount ----------

/// Makes a NoCloud ISO with xorriso exactly as the VM tests do.
fn make_iso(dir: &Path, label: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join("iso-src");
    write_file(&src.join("user-data"), WORKER);
    write_file(&src.join("meta-data"), "instance-id: iso-1\nlocal-hostname: iso-node\n");
    let iso = dir.join("seed.iso");
    let out = Command::new("xorriso")
        .args(["-as", "mkisofs", "-V", label])
        .args(flags)
        .arg("-o")
        .arg(&iso)
        .arg(&src)
        .output()
        .expect("xorriso (scripts/install-test-deps installs it)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    iso
}

#[test]
fn label_of_real_iso_and_vfat_images() {
    need!(Need::tool("xorriso"), Need::tool("mkfs.vfat"));
    let d = tempfile::tempdir().unwrap();
    let iso = make_iso(d.path(), "cidata", &["-J", "-r"]);
    assert_eq!(block::read_label(&iso).unwrap(), Some((FsType::Iso9660, "cidata".into())));

    let vfat = d.path().join("seed.vfat");
    std::fs::File::create(&vfat).unwrap().set_len(2 << 20).unwrap();
    let out = Command::new("mkfs.vfat").args(["-n", "CONFIG-2"]).arg(&vfat).output().expect("mkfs.vfat (dosfstools)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(block::read_label(&vfat).unwrap(), Some((FsType::Vfat, "CONFIG-2".into())));

    // Found through /dev/disk/by-label, or by scanning /sys/class/block when udev made no links.
    let root = d.path().join("root");
    let e = env(&root);
    std::os::unix::fs::symlink(&iso, {
        std::fs::create_dir_all(root.join("dev/disk/by-label")).unwrap();
        root.join("dev/disk/by-label/cidata")
    })
    .unwrap();
    let f = block::find_by_label(&e, &["cidata", "CIDATA"]).unwrap();
    assert_eq!((f.device, f.fstype), (std::fs::canonicalize(&iso).unwrap(), FsType::Iso9660));
    std::fs::create_dir_all(root.join("sys/class/block/vdb")).unwrap();
    std::fs::create_dir_all(root.join("sys/class/block/vdc")).unwrap();
    std::fs::copy(&vfat, root.join("dev/vdc")).unwrap();
    std::fs::write(root.join("dev/vdb"), b"not a filesystem").unwrap();
    let f = block::find_by_label(&e, &["config-2", "CONFIG-2"]).unwrap();
    assert_eq!((f.device, f.fstype, f.label.as_str()), (root.join("dev/vdc"), FsType::Vfat, "CONFIG-2"));
    assert_eq!(block::find_by_label(&e, &["nothing"]), None);
}

/// A loop device for a test, detached on drop.
struct Loop(String);

impl Loop {
    fn attach(image: &Path) -> Loop {
        let out = Command::new("losetup").args(["-f", "--show", "-r"]).arg(image).output().expect("losetup");
        assert!(out.status.success(), "losetup: {}", String::from_utf8_lossy(&out.stderr));
        Loop(String::from_utf8(out.stdout).unwrap().trim().to_string())
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.0).status();
    }
}

fn mounted(dir: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let d = dir.to_string_lossy();
    info.lines().any(|l| l.split(' ').nth(4) == Some(&*d))
}

/// The mount(2) path with a real kernel mount: ext4 stands in for the seed filesystem because
/// this sandbox's kernel has no iso9660/vfat driver (the helper is filesystem-agnostic).
#[test]
fn mount_ro_reads_a_real_filesystem_and_unmounts() {
    need!(Need::tool("mkfs.ext4"), Need::tool("losetup"), Need::root());
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("src");
    write_file(&src.join("user-data"), WORKER);
    let img = d.path().join("seed.ext4");
    std::fs::File::create(&img).unwrap().set_len(4 << 20).unwrap();
    let out = Command::new("mkfs.ext4").args(["-q", "-L", "cidata", "-d"]).arg(&src).arg(&img).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lo = Loop::attach(&img);
    let m = block::mount_ro(Path::new(&lo.0), "ext4", &d.path().join("mnt"), "cidata").unwrap();
    let dir = m.path().to_path_buf();
    assert!(mounted(&dir));
    assert_eq!(std::fs::read_to_string(dir.join("user-data")).unwrap(), WORKER);
    let w = std::fs::write(dir.join("x"), "y").unwrap_err();
    assert_eq!(w.raw_os_error(), Some(nix::libc::EROFS), "{w}");
    drop(m);
    assert!(!mounted(&dir), "still mounted");
    assert!(!dir.exists(), "mount point not removed");

    // A regular file is not a block device: the error says what was mounted where, and why.
    let e = block::mount_ro(&img, "ext4", &d.path().join("mnt"), "t").unwrap_err().to_string();
    assert!(e.contains("seed.ext4") && e.contains("read-only"), "{e}");
}

/// A cidata ISO on a loop device is read in place (no iso9660 driver, no mount). One the
/// in-place reader cannot name the seed files in (plain ISO 9660, `USER_DAT.;1`) is mounted: the
/// kernel's isofs finds no seed there either, or, where there is no iso9660 driver (this
/// sandbox), the probe fails naming the device, the filesystem and the missing driver — never
/// passes silently.
#[test]
fn nocloud_cidata_iso_on_a_loop_device() {
    need!(Need::tool("xorriso"), Need::tool("losetup"), Need::root());
    let d = tempfile::tempdir().unwrap();
    let iso = make_iso(d.path(), "cidata", &["-J", "-r"]);
    let lo = Loop::attach(&iso);
    let root = d.path().join("root");
    std::fs::create_dir_all(root.join("dev/disk/by-label")).unwrap();
    std::os::unix::fs::symlink(&lo.0, root.join("dev/disk/by-label/cidata")).unwrap();
    let e = env(&root);
    let g = Cidata::new(&e).probe().unwrap().expect("the cidata ISO");
    assert_eq!(g.user_data.as_deref(), Some(WORKER.as_bytes()));
    assert_eq!(g.meta.local_hostname.as_deref(), Some("iso-node"));
    let mounts = || std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts().contains(&*root.to_string_lossy()), "read in place, not mounted");
    assert!(!root.join("mnt").exists(), "no mount point made");

    let plain = tempfile::tempdir().unwrap();
    let iso = make_iso(plain.path(), "cidata", &["--norock"]);
    let lo = Loop::attach(&iso);
    std::fs::remove_file(root.join("dev/disk/by-label/cidata")).unwrap();
    std::os::unix::fs::symlink(&lo.0, root.join("dev/disk/by-label/cidata")).unwrap();
    let have_iso9660 = std::fs::read_to_string("/proc/filesystems").unwrap().contains("iso9660");
    let m = Cidata::new(&e).probe().map(|g| g.map(|g| g.source)).unwrap_err().to_string();
    assert!(m.contains(&lo.0), "{m}");
    if !have_iso9660 {
        assert!(m.contains("iso9660") && m.contains("no iso9660 driver"), "{m}");
    }
    assert!(!mounts().contains(&*root.to_string_lossy()), "unmounted again");
}

// ---------- the documented examples ----------

/// Every ```yaml block in docs/user-data.md plans (with the token credential the worker example
/// relies on), and the control-plane ones load and resolve like `init --config`.
#[test]
fn docs_user_data_examples_plan() {
    let md = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/user-data.md")).unwrap();
    let blocks: Vec<&str> = md.split("```yaml\n").skip(1).map(|b| b.split("```").next().unwrap()).collect();
    assert_eq!(blocks.len(), 8, "examples in docs/user-data.md");
    let (mut inits, mut joins) = (0, 0);
    for b in blocks {
        let mut g = kubestrap::datasource::Gathered {
            source: "docs".into(),
            user_data: Some(b.as_bytes().to_vec()),
            ..Default::default()
        };
        g.meta.local_hostname = Some("worker-1".into());
        g.credentials.insert("kubestrap.token".into(), TOKEN.as_bytes().to_vec());
        g.credentials.insert("kubestrap.certificate-key".into(), "0f".repeat(32).into_bytes());
        if b.contains("initNode: cp-1") {
            // The shared control-plane example: cp-1 inits and uploads, the others join it.
            let mut on_cp1 = g.clone();
            on_cp1.meta.local_hostname = Some("cp-1".into());
            let p = plan_detailed(&on_cp1).unwrap_or_else(|e| panic!("{e}\n{b}"));
            assert!(matches!(p.plan, NodePlan::Init { upload_certs: true, .. }), "{:?}", p.plan);
            let p = plan_detailed(&g).unwrap_or_else(|e| panic!("{e}\n{b}"));
            assert!(matches!(&p.plan, NodePlan::Join { join } if join.control_plane.is_some()), "{:?}", p.plan);
        }
        let p = plan_detailed(&g).unwrap_or_else(|e| panic!("{e}\n{b}"));
        match p.plan {
            NodePlan::Init { docs, .. } => {
                let host = kubestrap::config::HostFacts {
                    hostname: "h".into(),
                    default_address: Some("10.0.0.10".parse().unwrap()),
                };
                kubestrap::config::resolve_init("docs", docs, &host).unwrap_or_else(|e| panic!("{e}\n{b}"));
                inits += 1;
            }
            NodePlan::Join { join } => {
                assert_eq!(join.discovery.bootstrap_token.unwrap().token, TOKEN);
                joins += 1;
            }
        }
    }
    assert_eq!((inits, joins), (4, 4));
}
