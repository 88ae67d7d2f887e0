//! EC2-style IMDSv2: `PUT /latest/api/token` (with `X-aws-ec2-metadata-token-ttl-seconds`), then
//! `GET /latest/user-data`, `/latest/meta-data/instance-id` and `/latest/meta-data/local-hostname`
//! with the session token in `X-aws-ec2-metadata-token`. A 404 user-data means none was given.
//! The session token is never logged.

use std::time::Duration;

use super::http;
use super::{Datasource, Gathered, MAX_READ_BYTES, MetaData, SourceError};

pub(crate) const TOKEN_TTL_HEADER: &str = "X-aws-ec2-metadata-token-ttl-seconds";
pub(crate) const TOKEN_HEADER: &str = "X-aws-ec2-metadata-token";
/// Session token lifetime we ask for; we only need it for a few requests.
pub(crate) const TOKEN_TTL_SECS: &str = "300";

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
        let meta = MetaData {
            instance_id: self.text(token, "/latest/meta-data/instance-id")?,
            local_hostname: self.text(token, "/latest/meta-data/local-hostname")?,
        };
        let mut notices = Vec::new();
        if user_data.is_none() {
            notices.push("ec2: the instance has no user-data".into());
        }
        Ok(Some(Gathered { source: self.name().into(), user_data, meta, notices, ..Default::default() }))
    }
}
