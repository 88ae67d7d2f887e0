//! The kernel command line: the datasource override (`kubestrap.ds=`, cloud-init's `ds=`), and
//! the `nocloud-net` source it can name (`ds=nocloud;s=http://host/path/`).
//!
//! Accepted values of `kubestrap.ds=` (and of `ds=`, case-insensitive):
//! `nocloud` (seed dir, then the cidata filesystem), `nocloud-net` (needs `s=URL`),
//! `credentials`, `configdrive` (alias `openstack`), `ec2` (optional `;s=URL` base), `file:PATH`.
//! Options after `;`: `s=`/`seedfrom=` (URL), `i=`/`instance-id=`, `h=`/`local-hostname=`.
//! `kubestrap.ds=` wins over `ds=`; the cmdline wins over `<root>/etc/kubestrap/datasource`.

use std::time::Duration;

use super::http;
use super::{Datasource, Env, Gathered, MetaData, OVERRIDE_FILE, SourceError};

/// What is wrong with a datasource override word; `key` is `kubestrap.ds` or `ds`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverrideProblem {
    #[error("{key}={value}: option {option:?} is not KEY=VALUE")]
    NotKeyValue { key: String, value: String, option: String },
    #[error("{key}={value}: unknown option {option:?} (known: s, i, h)")]
    UnknownOption { key: String, value: String, option: String },
    #[error("{key}=file:{path}: the path must be absolute")]
    RelativePath { key: String, path: String },
    #[error("{key}: seed URL {url:?} must start with http:// or https://")]
    NotHttp { key: String, url: String },
    #[error("{key}=nocloud-net needs a seed URL: {key}=nocloud-net;s=http://HOST/PATH/")]
    NoSeedUrl { key: String },
    #[error("{key}={name:?} is not a datasource (nocloud, nocloud-net, credentials, configdrive, ec2, file:PATH)")]
    UnknownSource { key: String, name: String },
}

/// A NoCloud seed reached over HTTP, plus meta-data given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetSeed {
    /// Base URL; `user-data` and `meta-data` are fetched relative to it.
    pub url: String,
    pub meta: MetaData,
}

/// What the operator forced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Override {
    NoCloud,
    NoCloudNet(NetSeed),
    Credentials,
    ConfigDrive,
    /// IMDS, with a base URL from `s=` when given.
    Ec2(Option<String>),
    /// Absolute path (under the root) of a user-data file.
    File(String),
}

impl Override {
    /// The override from the cmdline, else from `<root>/etc/kubestrap/datasource`.
    pub fn from_env(env: &Env) -> Result<Option<Override>, SourceError> {
        let wrong = |origin: String| move |problem| SourceError::Override { origin, problem };
        if let Some(o) = parse(&env.cmdline).map_err(wrong("kernel cmdline".into()))? {
            return Ok(Some(o));
        }
        let path = env.path(OVERRIDE_FILE);
        match super::read_capped(&path)? {
            Some(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                parse(&text).map_err(wrong(path.display().to_string()))
            }
            None => Ok(None),
        }
    }
}

/// Splits a kernel command line into words; double quotes group (`a="b c"` is one word `a=b c`).
pub fn words(cmdline: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in cmdline.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

/// Finds the override in a command line (the last `kubestrap.ds=` word, else the last `ds=`).
pub fn parse(cmdline: &str) -> Result<Option<Override>, OverrideProblem> {
    let ws = words(cmdline);
    let pick = |key: &str| ws.iter().rev().find_map(|w| w.strip_prefix(key).map(str::to_string));
    let (key, value): (&str, String) = match (pick("kubestrap.ds="), pick("ds=")) {
        (Some(v), _) => ("kubestrap.ds", v),
        (None, Some(v)) => ("ds", v),
        (None, None) => return Ok(None),
    };
    let mut parts = value.split(';');
    let name = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let mut url = None;
    let mut meta = MetaData::default();
    for p in parts.filter(|p| !p.is_empty()) {
        let (k, v) = p.split_once('=').ok_or_else(|| OverrideProblem::NotKeyValue {
            key: key.into(),
            value: value.clone(),
            option: p.into(),
        })?;
        match k {
            "s" | "seedfrom" => url = Some(v.to_string()),
            "i" | "instance-id" => meta.instance_id = Some(v.to_string()),
            "h" | "local-hostname" => meta.local_hostname = Some(v.to_string()),
            _ => {
                return Err(OverrideProblem::UnknownOption { key: key.into(), value: value.clone(), option: k.into() });
            }
        }
    }
    if let Some(path) = name.strip_prefix("file:") {
        if !path.starts_with('/') {
            return Err(OverrideProblem::RelativePath { key: key.into(), path: path.into() });
        }
        // Keep the path's case: only the scheme was lowercased.
        let original = value.split(';').next().unwrap_or_default().trim();
        return Ok(Some(Override::File(original["file:".len()..].to_string())));
    }
    Ok(Some(match name.as_str() {
        "nocloud" | "nocloud-net" => match url {
            Some(u) => {
                check_http(key, &u)?;
                Override::NoCloudNet(NetSeed { url: u, meta })
            }
            None if name == "nocloud" => Override::NoCloud,
            None => return Err(OverrideProblem::NoSeedUrl { key: key.into() }),
        },
        "credentials" => Override::Credentials,
        "configdrive" | "config-drive" | "openstack" => Override::ConfigDrive,
        "ec2" => {
            if let Some(u) = &url {
                check_http(key, u)?;
            }
            Override::Ec2(url)
        }
        other => return Err(OverrideProblem::UnknownSource { key: key.into(), name: other.into() }),
    }))
}

fn check_http(key: &str, url: &str) -> Result<(), OverrideProblem> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(OverrideProblem::NotHttp { key: key.into(), url: url.into() })
    }
}

/// NoCloud over HTTP: `<url>user-data` and `<url>meta-data` (cloud-init appends to the seed URL as
/// given, so it should end with `/`).
pub(crate) struct NoCloudNet {
    seed: NetSeed,
    timeout: Duration,
}

impl NoCloudNet {
    pub fn new(seed: NetSeed, timeout: Duration) -> Self {
        NoCloudNet { seed, timeout }
    }
}

impl Datasource for NoCloudNet {
    fn name(&self) -> &'static str {
        "nocloud-net"
    }

    fn probe(&self) -> Result<Option<Gathered>, SourceError> {
        let get = |file: &str| -> Result<Option<Vec<u8>>, SourceError> {
            let url = format!("{}{file}", self.seed.url);
            let r = http::request("GET", &url, &[], self.timeout, super::MAX_READ_BYTES)?;
            match r.status {
                200 => Ok(Some(r.body)),
                404 => Ok(None),
                status => Err(SourceError::HttpStatus { method: "GET".into(), url, status }),
            }
        };
        let user_data = get("user-data")?;
        let mut meta = match get("meta-data")? {
            Some(b) => super::parse_nocloud_meta(&format!("{}meta-data", self.seed.url), &b)?,
            None => MetaData::default(),
        };
        // Values on the command line win, as in cloud-init.
        if let Some(id) = &self.seed.meta.instance_id {
            meta.instance_id = Some(id.clone());
            super::metadata::set_key(&mut meta.tree, "instance-id", id);
        }
        if let Some(h) = &self.seed.meta.local_hostname {
            meta.local_hostname = Some(h.clone());
            super::metadata::set_key(&mut meta.tree, "local-hostname", h);
        }
        if user_data.is_none() {
            let url = format!("{}user-data", self.seed.url);
            return Err(SourceError::HttpStatus { method: "GET".into(), url, status: 404 });
        }
        Ok(Some(Gathered { source: self.name().into(), user_data, meta, ..Default::default() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_and_quote() {
        assert_eq!(words(" a b=\"c d\"  e\n"), vec!["a", "b=c d", "e"]);
        assert_eq!(words(""), Vec::<String>::new());
    }

    #[test]
    fn parse_cmdline_overrides() {
        assert_eq!(parse("root=/dev/vda ro quiet").unwrap(), None);
        assert_eq!(parse("ro kubestrap.ds=nocloud").unwrap(), Some(Override::NoCloud));
        assert_eq!(parse("ds=NoCloud").unwrap(), Some(Override::NoCloud));
        assert_eq!(
            parse("console=ttyS0 ds=nocloud;s=http://10.0.2.2:8000/seed/;h=node-1").unwrap(),
            Some(Override::NoCloudNet(NetSeed {
                url: "http://10.0.2.2:8000/seed/".into(),
                meta: MetaData { local_hostname: Some("node-1".into()), ..Default::default() }
            }))
        );
        // kubestrap.ds wins over ds, wherever it stands.
        assert_eq!(parse("kubestrap.ds=ec2 ds=nocloud").unwrap(), Some(Override::Ec2(None)));
        assert_eq!(
            parse("kubestrap.ds=ec2;s=http://127.0.0.1:9").unwrap(),
            Some(Override::Ec2(Some("http://127.0.0.1:9".into())))
        );
        assert_eq!(parse("kubestrap.ds=file:/etc/Kube/ud").unwrap(), Some(Override::File("/etc/Kube/ud".into())));
        assert_eq!(parse("kubestrap.ds=openstack").unwrap(), Some(Override::ConfigDrive));
        assert_eq!(parse("kubestrap.ds=credentials").unwrap(), Some(Override::Credentials));
    }

    #[test]
    fn parse_cmdline_errors_name_the_problem() {
        let err = |cmdline: &str| parse(cmdline).unwrap_err().to_string();
        assert!(err("kubestrap.ds=azure").starts_with("kubestrap.ds=\"azure\" is not a datasource"));
        assert_eq!(err("ds=nocloud;s=ftp://x/"), "ds: seed URL \"ftp://x/\" must start with http:// or https://");
        assert!(err("ds=nocloud-net").contains("needs a seed URL"));
        assert!(err("ds=nocloud;x=1").contains("unknown option \"x\""));
        assert_eq!(err("kubestrap.ds=file:relative"), "kubestrap.ds=file:relative: the path must be absolute");
        let wrapped = SourceError::Override {
            origin: "/etc/kubestrap/datasource".into(),
            problem: parse("ds=nocloud;x=1").unwrap_err(),
        };
        assert!(wrapped.to_string().starts_with("/etc/kubestrap/datasource: ds=nocloud;x=1: unknown option"));
    }
}
