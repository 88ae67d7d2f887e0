//! The `file` datasource: user-data from a file on the image, selected explicitly with
//! `kubestrap.ds=file:/path/to/user-data` (the path is taken under the root). A `meta-data` file
//! next to it, if present, is read as NoCloud meta-data.

use std::path::PathBuf;

use super::{Datasource, Env, Gathered, MetaData, SourceError};

pub struct File {
    path: PathBuf,
}

impl File {
    pub fn new(env: &Env, abs: &str) -> Self {
        File { path: env.path(abs) }
    }
}

impl Datasource for File {
    fn name(&self) -> &'static str {
        "file"
    }

    fn probe(&self) -> Result<Option<Gathered>, SourceError> {
        let Some(user_data) = super::read_capped(&self.path)? else {
            return Ok(None);
        };
        let meta = match self.path.parent().map(|d| d.join("meta-data")) {
            Some(p) if p != self.path => match super::read_capped(&p)? {
                Some(b) => super::parse_nocloud_meta(&p.display().to_string(), &b)?,
                None => MetaData::default(),
            },
            _ => MetaData::default(),
        };
        Ok(Some(Gathered { source: self.name().into(), user_data: Some(user_data), meta, ..Default::default() }))
    }

    fn absent(&self) -> String {
        format!("{} does not exist", self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_source_reads_user_data_and_sibling_meta() {
        let d = tempfile::tempdir().unwrap();
        let f = File { path: d.path().join("ud") };
        assert_eq!(f.probe().unwrap(), None);
        std::fs::write(d.path().join("ud"), "x").unwrap();
        std::fs::write(d.path().join("meta-data"), "local-hostname: n1\n").unwrap();
        let g = f.probe().unwrap().unwrap();
        assert_eq!(g.meta.local_hostname.as_deref(), Some("n1"));
        assert_eq!(g.user_data.as_deref(), Some(&b"x"[..]));
    }
}
