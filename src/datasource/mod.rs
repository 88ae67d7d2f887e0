//! Where a node's user-data, meta-data and secrets come from at first boot.
//!
//! Each source lives in its own file and implements [`Datasource`]. [`detect`] asks them in a
//! fixed order and takes the first that answers, retrying until a deadline because a seed disk
//! may be probed late and IMDS may not answer yet.
//!
//! Detection order (see [`sources`]):
//! 0. an override — kernel cmdline `kubestrap.ds=<name>` (or cloud-init's `ds=nocloud;s=URL`),
//!    else the same words in `<root>/etc/kubestrap/datasource` — restricts detection to the named
//!    source(s);
//! 1. `credentials`: a `kubestrap.user-data` systemd credential (user-data without any disk);
//! 2. `nocloud-seed`: the seed directory `/var/lib/cloud/seed/nocloud/`;
//! 3. `nocloud`: a filesystem labelled `cidata`/`CIDATA` (ISO 9660 or vfat);
//! 4. `configdrive`: an OpenStack config drive (label `config-2`);
//! 5. `ec2`: EC2-style IMDSv2 at [`Env::imds_base`].
//!
//! Whatever source wins, the systemd credentials `kubestrap.token`, `kubestrap.user-data` and
//! `kubestrap.ca-cert-hash` are read into [`Gathered::credentials`], so a secret never has to sit
//! in readable user-data.

pub mod block;
pub mod cmdline;
pub mod configdrive;
pub mod credentials;
pub mod ec2;
pub mod file;
pub mod http;
pub mod iso9660;
mod metadata;
pub mod nocloud;
pub mod seed_images;
pub mod vars;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::clock::Clock;

pub(crate) use metadata::parse_nocloud_meta;

/// Default IMDS address (EC2 and the many clouds that copy it).
pub(crate) const DEFAULT_IMDS_BASE: &str = "http://169.254.169.254";
/// Where read-only datasource filesystems are mounted while they are read.
pub(crate) const DEFAULT_MOUNT_DIR: &str = "/run/kubestrap/mnt";
/// systemd's system credentials (SMBIOS type 11, fw_cfg), used when `$CREDENTIALS_DIRECTORY` is unset.
pub(crate) const SYSTEM_CREDENTIALS_DIR: &str = "run/credentials/@system";
/// NoCloud's seed directory, relative to the root.
pub(crate) const NOCLOUD_SEED_DIR: &str = "var/lib/cloud/seed/nocloud";
/// Optional file naming the datasource, relative to the root (same words as the kernel cmdline).
pub(crate) const OVERRIDE_FILE: &str = "etc/kubestrap/datasource";
/// The largest user-data, meta-data or credential file we read (bounds memory on hostile input).
pub(crate) const MAX_READ_BYTES: u64 = 1 << 20;

/// Tests: what the machine must have for a test (xorriso), skipped with one line when it lacks
/// it; the integration tests' own helper (see there).
#[cfg(test)]
#[path = "../../tests/common/needs.rs"]
pub(crate) mod test_needs;

/// Tests: an ISO 9660 seed (Joliet and Rock Ridge, label `cidata`) at `iso` holding `src`.
#[cfg(test)]
pub(crate) fn mkisofs(src: &Path, iso: &Path) {
    let st = std::process::Command::new("xorriso")
        .args(["-as", "mkisofs", "-quiet", "-V", "cidata", "-J", "-r", "-o"])
        .arg(iso)
        .arg(src)
        .status()
        .expect("xorriso (scripts/install-test-deps installs it)");
    assert!(st.success());
}

/// The credential names kubestrap reads; no other credential is touched.
pub(crate) const CRED_TOKEN: &str = "kubestrap.token";
pub(crate) const CRED_USER_DATA: &str = "kubestrap.user-data";
pub(crate) const CRED_CA_CERT_HASH: &str = "kubestrap.ca-cert-hash";
pub(crate) const CRED_CERTIFICATE_KEY: &str = "kubestrap.certificate-key";
/// A CA for the init node to use instead of generating one, so that the pins in shared
/// control-plane user-data can name it beforehand.
pub(crate) const CRED_CA_CRT: &str = "kubestrap.ca-crt";
pub(crate) const CRED_CA_KEY: &str = "kubestrap.ca-key";
pub const CREDENTIAL_NAMES: [&str; 6] =
    [CRED_TOKEN, CRED_USER_DATA, CRED_CA_CERT_HASH, CRED_CERTIFICATE_KEY, CRED_CA_CRT, CRED_CA_KEY];

/// Everything outside the process that detection looks at; tests point it at a tempdir and a
/// local HTTP server.
#[derive(Debug, Clone)]
pub struct Env {
    /// Prefix for `/var/lib/cloud/seed`, `/dev/disk/by-label`, `/dev`, `/sys/class/block`,
    /// `/run/credentials` and `/etc/kubestrap/datasource` ("/" in production).
    pub root: PathBuf,
    /// Contents of /proc/cmdline.
    pub cmdline: String,
    /// `$CREDENTIALS_DIRECTORY`; None falls back to `<root>/run/credentials/@system`.
    pub credentials_dir: Option<PathBuf>,
    /// IMDS base URL, e.g. `http://169.254.169.254`; None disables the ec2 source.
    pub imds_base: Option<String>,
    /// Where filesystems are mounted (read-only) while they are read.
    pub mount_dir: PathBuf,
}

impl Env {
    /// The real machine: `/`, `/proc/cmdline`, `$CREDENTIALS_DIRECTORY`, the EC2 IMDS address.
    pub(crate) fn from_system() -> Env {
        Env {
            root: PathBuf::from("/"),
            cmdline: std::fs::read_to_string("/proc/cmdline").unwrap_or_default(),
            credentials_dir: std::env::var_os("CREDENTIALS_DIRECTORY").map(PathBuf::from),
            imds_base: Some(DEFAULT_IMDS_BASE.into()),
            mount_dir: PathBuf::from(DEFAULT_MOUNT_DIR),
        }
    }

    /// An absolute path (`/var/lib/...`) placed under [`Env::root`].
    pub fn path(&self, abs: &str) -> PathBuf {
        self.root.join(abs.trim_start_matches('/'))
    }

    /// The credentials directory in effect.
    pub(crate) fn credentials_path(&self) -> PathBuf {
        self.credentials_dir.clone().unwrap_or_else(|| self.path(SYSTEM_CREDENTIALS_DIR))
    }
}

/// Why a datasource could not be used, or the override naming one is wrong. Every variant
/// names the file, device, URL or kernel-cmdline word it is about.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("opening {}: {source}", .path.display())]
    Open { path: PathBuf, source: std::io::Error },
    #[error("reading {}: {source}", .path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{} is larger than {limit} bytes", .path.display())]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("{} is missing", .path.display())]
    Missing { path: PathBuf },
    #[error("{}: not JSON: {detail}", .path.display())]
    NotJson { path: PathBuf, detail: String },
    /// NoCloud meta-data from `origin` (a file or URL) that is not what NoCloud specifies.
    #[error("{origin}: meta-data {problem}")]
    MetaData { origin: String, problem: String },
    #[error("credential {name}: {source}")]
    Credential { name: String, source: Box<SourceError> },
    #[error("creating mount point {}: {source}", .dir.display())]
    MountPoint { dir: PathBuf, source: std::io::Error },
    #[error("mounting {} ({fstype}) read-only on {}: {errno}{}", .device.display(), .dir.display(), mount_hint(.errno, .fstype))]
    Mount { device: PathBuf, fstype: String, dir: PathBuf, errno: nix::errno::Errno },
    /// A seed filesystem that was found and mounted but holds nothing.
    #[error("{} (label {label:?}) has no user-data or meta-data", .device.display())]
    EmptySeed { device: PathBuf, label: String },
    /// A problem with what a device holds.
    #[error("{} (label {label:?}): {source}", .device.display())]
    OnDevice { device: PathBuf, label: String, source: Box<SourceError> },
    #[error("unsupported HTTP method {method}")]
    Method { method: String },
    /// No HTTP answer (or no complete body): `detail` is the operator's words ("timed out").
    #[error("{method} {url}: {detail}")]
    Http { method: String, url: String, detail: String },
    #[error("{method} {url}: reading the body: {detail}")]
    HttpBody { method: String, url: String, detail: String },
    #[error("{method} {url}: HTTP {status}")]
    HttpStatus { method: String, url: String, status: u16 },
    /// Something went wrong talking to the EC2 instance metadata service.
    #[error("IMDS {0}")]
    Imds(Box<SourceError>),
    #[error("IMDS PUT {url}: HTTP {status} (IMDSv2 token refused)")]
    ImdsTokenRefused { url: String, status: u16 },
    #[error("IMDS PUT {url}: token is not text")]
    ImdsTokenNotText { url: String },
    #[error("kernel cmdline selects the ec2 datasource but no IMDS address is configured")]
    NoImdsAddress,
    /// The datasource override is wrong; `origin` is "kernel cmdline" or the override file.
    #[error("{origin}: {problem}")]
    Override { origin: String, problem: cmdline::OverrideProblem },
    /// Detection gave up; `reasons` has every source's last answer.
    #[error("no datasource found after {:.1}s: {}", .waited.as_secs_f64(), .reasons.join("; "))]
    NotFound { waited: Duration, reasons: Vec<String> },
}

fn mount_hint(errno: &nix::errno::Errno, fstype: &str) -> String {
    match errno {
        nix::errno::Errno::ENODEV => format!(" (the kernel has no {fstype} driver: load its module)"),
        nix::errno::Errno::ENOTBLK => " (not a block device)".to_string(),
        nix::errno::Errno::EPERM => " (mounting needs root)".to_string(),
        _ => String::new(),
    }
}

/// Instance meta-data: the two values planning reads, and the whole tree for the variable table
/// (`vars`). User-data, which may carry a token, is kept apart; `Debug` still shows only the
/// tree's top-level keys, since some clouds put a secret there (OpenStack's `admin_pass`).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct MetaData {
    pub instance_id: Option<String>,
    /// The node name unless the user-data gives one; also `v1.local_hostname`.
    pub local_hostname: Option<String>,
    /// The datasource's meta-data as it gave it (cloud-init's `ds.meta_data`): NoCloud's YAML,
    /// OpenStack's meta_data.json, the EC2 keys kubestrap fetches. Null when there is none.
    pub tree: serde_json::Value,
}

/// What a datasource found. `Debug` never prints credential values or user-data (both may carry
/// a token).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Gathered {
    /// The datasource's name (`nocloud`, `ec2`, ...).
    pub source: String,
    /// Raw user-data (maybe gzip-compressed); None when the source has none.
    pub user_data: Option<Vec<u8>>,
    pub meta: MetaData,
    /// `kubestrap.*` systemd credentials by name. Secrets: never log them.
    pub credentials: BTreeMap<String, Vec<u8>>,
    /// Things the operator should know (ignored files, replaced values).
    pub notices: Vec<String>,
    /// This machine's hostname at gather time: the node name's last fallback, as data so that
    /// planning stays pure.
    pub hostname: String,
}

impl fmt::Debug for MetaData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<&str> = self.tree.as_object().map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default();
        f.debug_struct("MetaData")
            .field("instance_id", &self.instance_id)
            .field("local_hostname", &self.local_hostname)
            .field("tree_keys", &keys)
            .finish()
    }
}

impl fmt::Debug for Gathered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let creds: BTreeMap<&str, String> =
            self.credentials.iter().map(|(k, v)| (k.as_str(), format!("<redacted, {} bytes>", v.len()))).collect();
        f.debug_struct("Gathered")
            .field("source", &self.source)
            .field("user_data", &self.user_data.as_ref().map(|u| format!("<{} bytes>", u.len())))
            .field("meta", &self.meta)
            .field("credentials", &creds)
            .field("notices", &self.notices)
            .finish()
    }
}

/// One place user-data can come from.
pub trait Datasource {
    fn name(&self) -> &'static str;
    /// `Ok(Some)`: found. `Ok(None)`: not present (now; it may appear later). `Err(reason)`: present
    /// or configured but not usable yet (unreadable, not answering); detection does not fall
    /// through to later sources past an `Err`, it retries until the deadline.
    fn probe(&self) -> Result<Option<Gathered>, SourceError>;
    /// Why `probe` returned `Ok(None)`, for the "no datasource found" message.
    fn absent(&self) -> String {
        "not present".into()
    }
}

/// The sources in detection order, after applying any override (see the module docs).
pub fn sources(env: &Env) -> Result<Vec<Box<dyn Datasource>>, SourceError> {
    let over = cmdline::Override::from_env(env)?;
    let http_timeout = crate::timeouts::DATASOURCE_HTTP;
    let all = || -> Vec<Box<dyn Datasource>> {
        let mut v: Vec<Box<dyn Datasource>> = vec![
            Box::new(credentials::Credentials::new(env)),
            Box::new(nocloud::SeedDir::new(env)),
            Box::new(nocloud::Cidata::new(env)),
            Box::new(configdrive::ConfigDrive::new(env)),
        ];
        if let Some(base) = &env.imds_base {
            v.push(Box::new(ec2::Ec2::new(base, http_timeout)));
        }
        v
    };
    Ok(match over {
        None => all(),
        Some(cmdline::Override::NoCloud) => {
            vec![Box::new(nocloud::SeedDir::new(env)), Box::new(nocloud::Cidata::new(env))]
        }
        Some(cmdline::Override::NoCloudNet(seed)) => vec![Box::new(cmdline::NoCloudNet::new(seed, http_timeout))],
        Some(cmdline::Override::Credentials) => vec![Box::new(credentials::Credentials::new(env))],
        Some(cmdline::Override::ConfigDrive) => vec![Box::new(configdrive::ConfigDrive::new(env))],
        Some(cmdline::Override::Ec2(url)) => {
            let base = url.or_else(|| env.imds_base.clone()).ok_or(SourceError::NoImdsAddress)?;
            vec![Box::new(ec2::Ec2::new(&base, http_timeout))]
        }
        Some(cmdline::Override::File(path)) => vec![Box::new(file::File::new(env, &path))],
    })
}

/// Finds the node's datasource, retrying (`timeouts::DATASOURCE_BACKOFF`) until `timeout` has
/// passed, then reads the `kubestrap.*` credentials into the result. The error lists every
/// source's last reason.
pub fn detect(env: &Env, timeout: Duration, clock: &dyn Clock) -> Result<Gathered, SourceError> {
    let start = clock.now();
    let deadline = start + timeout;
    let mut round = 0;
    let list = sources(env)?;
    loop {
        let mut reasons = Vec::new();
        let mut blocked = false;
        for s in &list {
            let t = std::time::Instant::now();
            let probed = s.probe();
            log::debug!("datasource {}: probed in {:.1?}", s.name(), t.elapsed());
            match probed {
                Ok(Some(mut g)) if !blocked => {
                    g.credentials = credentials::read(&env.credentials_path())?;
                    g.hostname = crate::host::hostname();
                    let names: Vec<&str> = g.credentials.keys().map(String::as_str).collect();
                    log::info!("datasource {}: found (credentials: {})", g.source, names.join(", "));
                    return Ok(g);
                }
                Ok(Some(_)) => {
                    reasons.push(format!("{}: available, but an earlier source is not usable yet", s.name()))
                }
                Ok(None) => reasons.push(format!("{}: {}", s.name(), s.absent())),
                Err(e) => {
                    blocked = true;
                    reasons.push(format!("{}: {e}", s.name()));
                }
            }
        }
        let now = clock.now();
        if now >= deadline {
            return Err(SourceError::NotFound { waited: now.duration_since(start), reasons });
        }
        let why = format!("no datasource yet: {}", reasons.join("; "));
        log::debug!("{why}");
        clock.sleep(crate::timeouts::DATASOURCE_BACKOFF.delay(round).min(deadline - now), &why);
        round += 1;
    }
}

/// Reads a whole file of at most [`MAX_READ_BYTES`]; `Ok(None)` when it does not exist.
pub(crate) fn read_capped(path: &Path) -> Result<Option<Vec<u8>>, SourceError> {
    use std::io::Read;
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(SourceError::Open { path: path.to_path_buf(), source }),
    };
    let mut buf = Vec::new();
    f.take(MAX_READ_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|source| SourceError::Read { path: path.to_path_buf(), source })?;
    if buf.len() as u64 > MAX_READ_BYTES {
        return Err(SourceError::TooLarge { path: path.to_path_buf(), limit: MAX_READ_BYTES });
    }
    Ok(Some(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_credentials_and_user_data() {
        let mut g = Gathered {
            source: "x".into(),
            user_data: Some(b"token: abcdef.0123456789abcdef".to_vec()),
            ..Default::default()
        };
        g.credentials.insert(CRED_TOKEN.into(), b"abcdef.0123456789abcdef".to_vec());
        let d = format!("{g:?}");
        assert!(!d.contains("0123456789abcdef"), "{d}");
        assert!(d.contains("kubestrap.token") && d.contains("redacted"), "{d}");
        g.meta.tree = serde_json::json!({"uuid": "u-1", "admin_pass": "s3cret-pass"});
        let d = format!("{g:?}");
        assert!(d.contains("admin_pass") && !d.contains("s3cret-pass"), "{d}");
    }

    #[test]
    fn errors_name_the_path_and_url() {
        let d = tempfile::tempdir().unwrap();
        let big = d.path().join("user-data");
        std::fs::write(&big, vec![b'a'; (MAX_READ_BYTES + 1) as usize]).unwrap();
        let e = read_capped(&big).unwrap_err().to_string();
        assert_eq!(e, format!("{} is larger than {MAX_READ_BYTES} bytes", big.display()));
        let e = SourceError::Imds(Box::new(SourceError::HttpStatus {
            method: "GET".into(),
            url: "http://169.254.169.254/latest/user-data".into(),
            status: 500,
        }));
        assert_eq!(e.to_string(), "IMDS GET http://169.254.169.254/latest/user-data: HTTP 500");
        let e = SourceError::Mount {
            device: "/dev/sr0".into(),
            fstype: "iso9660".into(),
            dir: "/run/m".into(),
            errno: nix::errno::Errno::ENODEV,
        };
        assert!(e.to_string().starts_with("mounting /dev/sr0 (iso9660) read-only on /run/m: ENODEV"), "{e}");
        assert!(e.to_string().ends_with("(the kernel has no iso9660 driver: load its module)"), "{e}");
    }

    #[test]
    fn env_path_joins_under_root() {
        let env = Env {
            root: "/tmp/r".into(),
            cmdline: String::new(),
            credentials_dir: None,
            imds_base: None,
            mount_dir: "/tmp/m".into(),
        };
        assert_eq!(env.path("/var/lib/cloud"), PathBuf::from("/tmp/r/var/lib/cloud"));
        assert_eq!(env.credentials_path(), PathBuf::from("/tmp/r/run/credentials/@system"));
    }
}
