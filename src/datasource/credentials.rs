//! systemd credentials (`datasource::CREDENTIAL_NAMES`: token, user-data, CA pins, certificate key, CA), read
//! from `$CREDENTIALS_DIRECTORY` (the unit imports them with `LoadCredential=`/`ImportCredential=`,
//! so SMBIOS type 11 and fw_cfg credentials arrive here) or, when that is unset,
//! `/run/credentials/@system`. Values are secrets: they are never logged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{CRED_USER_DATA, CREDENTIAL_NAMES, Datasource, Env, Gathered, SourceError};

/// Reads the known `kubestrap.*` credentials present in `dir` (a missing dir means none).
pub fn read(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>, SourceError> {
    let mut out = BTreeMap::new();
    for name in CREDENTIAL_NAMES {
        // An empty credential (e.g. left by a drop-in or a provisioning tool) means "none given".
        if let Some(v) = super::read_capped(&dir.join(name))
            .map_err(|e| SourceError::Credential { name: name.to_string(), source: Box::new(e) })?
            && !v.iter().all(u8::is_ascii_whitespace)
        {
            out.insert(name.to_string(), v);
        }
    }
    Ok(out)
}

/// The `credentials` datasource: user-data passed only as the `kubestrap.user-data` credential.
pub struct Credentials {
    dir: PathBuf,
}

impl Credentials {
    pub fn new(env: &Env) -> Self {
        Credentials { dir: env.credentials_path() }
    }
}

impl Datasource for Credentials {
    fn name(&self) -> &'static str {
        "credentials"
    }

    fn probe(&self) -> Result<Option<Gathered>, SourceError> {
        let creds = read(&self.dir)?;
        let Some(user_data) = creds.get(CRED_USER_DATA).cloned() else {
            return Ok(None);
        };
        Ok(Some(Gathered {
            source: self.name().into(),
            user_data: Some(user_data),
            credentials: creds,
            ..Default::default()
        }))
    }

    fn absent(&self) -> String {
        format!("no {CRED_USER_DATA} in {}", self.dir.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_known_credentials() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("kubestrap.token"), "abcdef.0123456789abcdef\n").unwrap();
        std::fs::write(d.path().join("other.secret"), "x").unwrap();
        std::fs::write(d.path().join("kubestrap.ca-cert-hash"), "\n").unwrap();
        let c = read(d.path()).unwrap();
        assert_eq!(c.keys().collect::<Vec<_>>(), vec!["kubestrap.token"]);
        assert!(read(&d.path().join("missing")).unwrap().is_empty());
    }

    #[test]
    fn credentials_source_needs_user_data() {
        let d = tempfile::tempdir().unwrap();
        let s = Credentials { dir: d.path().into() };
        std::fs::write(d.path().join("kubestrap.token"), "t").unwrap();
        assert_eq!(s.probe().unwrap(), None);
        assert!(s.absent().contains("kubestrap.user-data"));
        std::fs::write(d.path().join("kubestrap.user-data"), "#cloud-config\n").unwrap();
        let g = s.probe().unwrap().unwrap();
        assert_eq!(g.source, "credentials");
        assert_eq!(g.user_data.as_deref(), Some(&b"#cloud-config\n"[..]));
        assert_eq!(g.credentials.len(), 2);
    }

    #[test]
    fn oversized_credential_is_refused() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("kubestrap.user-data"), vec![b'a'; (super::super::MAX_READ_BYTES + 1) as usize])
            .unwrap();
        let e = read(d.path()).unwrap_err().to_string();
        assert!(e.starts_with("credential kubestrap.user-data: ") && e.contains("larger than"), "{e}");
    }
}
