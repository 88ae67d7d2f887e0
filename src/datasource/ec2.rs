//! EC2-style IMDSv2: `PUT /latest/api/token` (with `X-aws-ec2-metadata-token-ttl-seconds`), then
//! `GET /latest/user-data` and the meta-data keys in [`META_KEYS`] with the session token in
//! `X-aws-ec2-metadata-token`. A 404 means the key (or the user-data) was not given; so does any
//! HTTP error on a key other than instance-id and local-hostname. The keys form the meta-data
//! tree as cloud-init's EC2 source shows it (`placement/region` nests under `placement`). The
//! session token is never logged.

use std::time::Duration;

use super::http;
use super::{Datasource, Gathered, MAX_READ_BYTES, MetaData, SourceError};

pub(crate) const TOKEN_TTL_HEADER: &str = "X-aws-ec2-metadata-token-ttl-seconds";
pub(crate) const TOKEN_HEADER: &str = "X-aws-ec2-metadata-token";
/// Session token lifetime we ask for; we only need it for a few requests.
pub(crate) const TOKEN_TTL_SECS: &str = "300";
/// The meta-data keys kubestrap fetches (under `/latest/meta-data/`): what the variable table
/// names, not the whole service, which would cost a request per key at every boot.
pub(crate) const META_KEYS: [&str; 7] = [
    "instance-id",
    "local-hostname",
    "hostname",
    "local-ipv4",
    "public-ipv4",
    "placement/availability-zone",
    "placement/region",
];
/// The keys read before the variable table existed: their errors still fail the probe.
const REQUIRED: [&str; 2] = ["instance-id", "local-hostname"];

pub(crate) struct Ec2 {
    base: String,
    timeout: Duration,
}

impl Ec2 {
    pub fn new(base: &str, timeout: Duration) -> Self {
        Ec2 { base: base.trim_end_matches('/').to_string(), timeout }
    }

    fn get(&self, token: &str, path: &str) -> Result<Option<Vec<u8>>, SourceError> {
        let url = format!("{}{path}", self.base);
        let r = http::request("GET", &url, &[(TOKEN_HEADER, token)], self.timeout, MAX_READ_BYTES)
            .map_err(|e| SourceError::Imds(Box::new(e)))?;
        match r.status {
            200 => Ok(Some(r.body)),
            404 => Ok(None),
            status => Err(SourceError::Imds(Box::new(SourceError::HttpStatus { method: "GET".into(), url, status }))),
        }
    }

    fn text(&self, token: &str, path: &str) -> Result<Option<String>, SourceError> {
        Ok(self.get(token, path)?.map(|b| String::from_utf8_lossy(&b).trim().to_string()).filter(|s| !s.is_empty()))
    }

    /// The [`META_KEYS`] the service answers, as a tree (`a/b` nests `b` under `a`).
    fn meta_data(&self, token: &str) -> Result<MetaData, SourceError> {
        let mut tree = serde_json::Map::new();
        for key in META_KEYS {
            let path = format!("/latest/meta-data/{key}");
            let value = match self.text(token, &path) {
                // Only the two keys kubestrap always read may fail the probe: a cloud that copies
                // IMDS without, say, placement/region answers 403 or 500 for it.
                Err(SourceError::Imds(e))
                    if !REQUIRED.contains(&key) && matches!(*e, SourceError::HttpStatus { .. }) =>
                {
                    log::debug!("ec2: IMDS {e}: {key} left out of the meta-data");
                    None
                }
                other => other?,
            };
            let Some(value) = value else { continue };
            let mut at = &mut tree;
            let mut parts = key.split('/').peekable();
            while let Some(part) = parts.next() {
                if parts.peek().is_none() {
                    at.insert(part.to_string(), serde_json::Value::String(value.clone()));
                    break;
                }
                let child = at.entry(part).or_insert_with(|| serde_json::Value::Object(Default::default()));
                let serde_json::Value::Object(m) = child else { break };
                at = m;
            }
        }
        let field = |k: &str| tree.get(k).and_then(|v| v.as_str()).map(str::to_string);
        Ok(MetaData {
            instance_id: field("instance-id"),
            local_hostname: field("local-hostname"),
            tree: serde_json::Value::Object(tree),
        })
    }
}

impl Datasource for Ec2 {
    fn name(&self) -> &'static str {
        "ec2"
    }

    fn probe(&self) -> Result<Option<Gathered>, SourceError> {
        let url = format!("{}/latest/api/token", self.base);
        let r = http::request("PUT", &url, &[(TOKEN_TTL_HEADER, TOKEN_TTL_SECS)], self.timeout, 4096)
            .map_err(|e| SourceError::Imds(Box::new(e)))?;
        if r.status != 200 {
            return Err(SourceError::ImdsTokenRefused { url, status: r.status });
        }
        let token = String::from_utf8(r.body).map_err(|_| SourceError::ImdsTokenNotText { url })?;
        let token = token.trim();
        let user_data = self.get(token, "/latest/user-data")?;
        let meta = self.meta_data(token)?;
        let mut notices = Vec::new();
        if user_data.is_none() {
            notices.push("ec2: the instance has no user-data".into());
        }
        Ok(Some(Gathered { source: self.name().into(), user_data, meta, notices, ..Default::default() }))
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};

    use super::*;

    /// A loopback IMDSv2 double answering `answers` (path → body), 404 otherwise; `n` requests.
    fn imds(answers: &'static [(&'static str, &'static str)], n: usize) -> String {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", l.local_addr().unwrap());
        std::thread::spawn(move || {
            for s in l.incoming().take(n) {
                let mut s = s.unwrap();
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut first = String::new();
                r.read_line(&mut first).unwrap();
                let mut h = String::new();
                while r.read_line(&mut h).unwrap() > 2 {
                    h.clear();
                }
                let path = first.split(' ').nth(1).unwrap_or_default();
                let (code, body) = match answers.iter().find(|(p, _)| *p == path) {
                    Some((_, "!500")) => (500, ""),
                    Some((_, b)) => (200, *b),
                    None if path == "/latest/api/token" => (200, "tok"),
                    None => (404, ""),
                };
                let head = format!("HTTP/1.1 {code} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                s.write_all(head.as_bytes()).unwrap();
                s.write_all(body.as_bytes()).unwrap();
            }
        });
        base
    }

    #[test]
    fn ec2_meta_data_forms_cloud_inits_tree() {
        let base = imds(
            &[
                ("/latest/user-data", "#cloud-config\n"),
                ("/latest/meta-data/instance-id", "i-0abc"),
                ("/latest/meta-data/local-hostname", "ip-10-0-0-7.ec2.internal\n"),
                ("/latest/meta-data/local-ipv4", "10.0.0.7"),
                ("/latest/meta-data/placement/availability-zone", "us-east-1a"),
                ("/latest/meta-data/placement/region", "us-east-1"),
                ("/latest/meta-data/public-ipv4", "!500"),
            ],
            9,
        );
        let g = Ec2::new(&base, Duration::from_secs(5)).probe().unwrap().unwrap();
        assert_eq!(g.meta.instance_id.as_deref(), Some("i-0abc"));
        assert_eq!(g.meta.local_hostname.as_deref(), Some("ip-10-0-0-7.ec2.internal"));
        assert_eq!(
            g.meta.tree,
            serde_json::json!({"instance-id": "i-0abc", "local-hostname": "ip-10-0-0-7.ec2.internal",
                "local-ipv4": "10.0.0.7", "placement": {"availability-zone": "us-east-1a", "region": "us-east-1"}})
        );
    }
}
