//! One table of metadata variables, so a name means the same value everywhere: cloud-init's
//! Jinja names (`ds.meta_data.*` dotted or bracketed, `v1.*`), Afterburn's environment
//! (`COREOS_<PLATFORM>_*`, `AFTERBURN_<PLATFORM>_*`) and `${VAR}` in envsubst'd files.
//! (Issue #22, item 3. This first cut knows the flat meta-data keys only.)

use super::Gathered;

/// A name no datasource supplied: the error says the name and the datasource.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} is not supplied by the {datasource} datasource{hint}")]
pub struct VarError {
    pub name: String,
    pub datasource: String,
    /// Extra advice, starting with "; " or empty.
    pub hint: String,
}

/// The variables of one boot, built from what the datasource gathered.
#[derive(Debug, Clone, Default)]
pub struct Vars {
    source: String,
    instance_id: Option<String>,
    local_hostname: Option<String>,
}

impl Vars {
    pub fn new(g: &Gathered) -> Vars {
        Vars {
            source: if g.source.is_empty() { "unknown".into() } else { g.source.clone() },
            instance_id: g.meta.instance_id.clone(),
            local_hostname: g.meta.local_hostname.clone(),
        }
    }

    fn missing(&self, name: &str) -> VarError {
        VarError { name: name.into(), datasource: self.source.clone(), hint: String::new() }
    }

    /// A Jinja variable as cloud-init names it (`ds.meta_data.local_hostname`,
    /// `ds.meta_data["local-hostname"]`, `v1.local_hostname`, `local_hostname`).
    pub fn jinja(&self, name: &str) -> Result<String, VarError> {
        let v = match name {
            "ds.meta_data.local_hostname" | "v1.local_hostname" | "local_hostname" => &self.local_hostname,
            "ds.meta_data.instance_id" | "v1.instance_id" | "instance_id" => &self.instance_id,
            _ => return Err(self.missing(name)),
        };
        v.clone().ok_or_else(|| self.missing(name))
    }

    /// Afterburn's environment for this platform, both spellings: `COREOS_<P>_<KEY>` (Flatcar,
    /// `/run/metadata/flatcar`) and `AFTERBURN_<P>_<KEY>` (`/run/metadata/afterburn`).
    pub fn afterburn(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// `${NAME}` as envsubst would see it in the pre-commands' environment.
    pub fn env(&self, name: &str) -> Result<String, VarError> {
        self.afterburn().into_iter().find(|(k, _)| k == name).map(|(_, v)| v).ok_or_else(|| self.missing(name))
    }
}
