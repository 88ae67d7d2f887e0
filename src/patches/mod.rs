//! kubeadm's patches (`--patches DIR`, `patches.directory`): files in a directory that patch
//! the static Pods, the KubeletConfiguration and the CoreDNS and kube-proxy workloads before
//! they are written, with RFC 6902 JSON patches, RFC 7386 merge patches or Kubernetes'
//! strategic merge patches, in the directory's order. Read once per run and path, as kubeadm
//! does; every patch is applied in memory, so a bad one fails before its phase writes a file.

mod decode;
mod quantity;
mod read;
mod schema;
mod strategic;
#[cfg(test)]
mod tests;
mod yaml11;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use log::info;
use serde_json::Value;

use crate::fsutil::NodeFs;

/// kubeadm 1.37's patch targets, in its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Etcd,
    KubeApiserver,
    KubeControllerManager,
    KubeScheduler,
    KubeletConfiguration,
    CorednsDeployment,
    KubeproxyDaemonset,
}

impl Target {
    pub const ALL: [Target; 7] = [
        Target::Etcd,
        Target::KubeApiserver,
        Target::KubeControllerManager,
        Target::KubeScheduler,
        Target::KubeletConfiguration,
        Target::CorednsDeployment,
        Target::KubeproxyDaemonset,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Target::Etcd => "etcd",
            Target::KubeApiserver => "kube-apiserver",
            Target::KubeControllerManager => "kube-controller-manager",
            Target::KubeScheduler => "kube-scheduler",
            Target::KubeletConfiguration => "kubeletconfiguration",
            Target::CorednsDeployment => "corednsdeployment",
            Target::KubeproxyDaemonset => "kubeproxydaemonset",
        }
    }

    /// The static Pod target of that name (a component's Pod name is its target name).
    pub fn pod(name: &str) -> Option<Target> {
        Target::ALL[..4].iter().copied().find(|t| t.name() == name)
    }

    /// The schema type the target's document is (its strategic merge keys).
    fn schema_root(self) -> &'static str {
        let name = match self {
            Target::KubeletConfiguration => "kubeletconfiguration",
            Target::CorednsDeployment => "deployment",
            Target::KubeproxyDaemonset => "daemonset",
            _ => "pod",
        };
        schema::schema().root(name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
}

impl PatchType {
    /// The MIME type kubeadm's log names it by.
    pub fn mime(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Strategic => "application/strategic-merge-patch+json",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The directory cannot be listed (missing, not a directory, a symlink, unreadable).
    #[error(
        "could not list patch files for path {dir:?}: {why}; give a directory of patch files (kubeadm's --patches / patches.directory)"
    )]
    Dir { dir: String, why: String },
    /// A file's name or content is not a patch.
    #[error("patch file {file:?}: {why}")]
    File { file: String, why: String },
    /// A patch that does not apply to its target.
    #[error(
        "could not apply the patch in {file:?} (document {doc}) of type {:?} to target {:?}: {why}; fix or remove the patch",
        .ptype.mime(),
        .target.name()
    )]
    Apply { file: String, doc: usize, ptype: PatchType, target: Target, why: String },
    /// The patched document is no longer the object it was.
    #[error("target {:?} after the patches in {}: {why}; fix them", .target.name(), .files.join(", "))]
    Result { files: Vec<String>, target: Target, why: String },
}

/// One file's patches.
#[derive(Debug)]
pub(crate) struct PatchSet {
    target: Target,
    ptype: PatchType,
    /// The file's path on the node.
    file: String,
    docs: Vec<Value>,
}

/// A directory's patches, in the order kubeadm applies them.
#[derive(Debug)]
pub struct Patches {
    sets: Vec<PatchSet>,
}

/// Directories read in this run, by their path under the node root (kubeadm's pathCache).
static READ: Mutex<Vec<(PathBuf, Arc<Patches>)>> = Mutex::new(Vec::new());

/// The patches in `dir` (a path on the node), read once per run.
pub fn load(fs: &NodeFs, dir: &str) -> Result<Arc<Patches>, PatchError> {
    let real = fs.real(dir);
    // A poisoned lock only means another thread panicked mid-read; the list is still valid.
    let mut cache = READ.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = cache.iter().find(|(p, _)| *p == real) {
        return Ok(p.clone());
    }
    let sets = read::read_dir(&real, dir)?;
    let p = Arc::new(Patches { sets });
    cache.push((real, p.clone()));
    Ok(p)
}

/// The patches a configuration names, if any (an empty directory name is none).
pub fn for_dir(fs: &NodeFs, dir: Option<&str>) -> Result<Option<Arc<Patches>>, PatchError> {
    match dir {
        Some(d) if !d.is_empty() => load(fs, d).map(Some),
        _ => Ok(None),
    }
}

impl Patches {
    /// The files that patch `target`, in order.
    fn files(&self, target: Target) -> Vec<String> {
        self.sets.iter().filter(|s| s.target == target).map(|s| s.file.clone()).collect()
    }

    /// Whether any file patches `target`.
    pub fn touches(&self, target: Target) -> bool {
        self.sets.iter().any(|s| s.target == target)
    }

    /// `doc` with every patch for `target` applied in order, as JSON (kubeadm's
    /// ApplyPatchesToTarget); `quiet` leaves out the log lines (a check ahead of the phase).
    pub fn apply(&self, target: Target, doc: Value, quiet: bool) -> Result<Value, PatchError> {
        let mut doc = doc;
        for set in self.sets.iter().filter(|s| s.target == target) {
            for (i, patch) in set.docs.iter().enumerate() {
                let fail = |why: String| PatchError::Apply {
                    file: set.file.clone(),
                    doc: i + 1,
                    ptype: set.ptype,
                    target,
                    why,
                };
                doc = match set.ptype {
                    PatchType::Json => {
                        let p: json_patch::Patch =
                            serde_json::from_value(patch.clone()).map_err(|e| fail(e.to_string()))?;
                        json_ops(&mut doc, &p).map_err(fail)?;
                        doc
                    }
                    PatchType::Merge => merge(doc, patch).map_err(fail)?,
                    PatchType::Strategic => strategic::apply(doc, patch.clone(), target.schema_root()).map_err(fail)?,
                };
                if !quiet {
                    info!("[patches] Applied patch of type {:?} to target {:?}", set.ptype.mime(), target.name());
                }
            }
        }
        Ok(doc)
    }

    /// A static Pod with its patches, decoded as a v1.Pod and encoded again, as kubeadm writes it.
    pub fn pod(&self, name: &str, pod: Value, quiet: bool) -> Result<Value, PatchError> {
        let Some(target) = Target::pod(name) else { return Ok(pod) };
        self.object(target, pod, ("v1", "Pod"), quiet)
    }

    /// A workload (the CoreDNS Deployment, the kube-proxy DaemonSet) or static Pod with its
    /// patches, decoded as its Go type and encoded again.
    pub fn object(&self, target: Target, obj: Value, kind: (&str, &str), quiet: bool) -> Result<Value, PatchError> {
        if !self.touches(target) {
            return Ok(obj);
        }
        let patched = self.apply(target, obj, quiet)?;
        let result = |why: String| PatchError::Result { files: self.files(target), target, why };
        let (api_version, k) = (patched["apiVersion"].as_str(), patched["kind"].as_str());
        if (api_version, k) != (Some(kind.0), Some(kind.1)) {
            return Err(result(format!(
                "it is no longer a {}/{} (apiVersion {:?}, kind {:?})",
                kind.0,
                kind.1,
                api_version.unwrap_or(""),
                k.unwrap_or("")
            )));
        }
        // TypeMeta is inline in the Go types, so the schema's fields carry apiVersion and kind.
        decode::reencode(target.schema_root(), &patched).map_err(result)
    }
}

impl Patches {
    /// A KubeletConfiguration with its patches. kubeadm writes the patched JSON back as YAML
    /// without a decode, so unknown fields stay.
    pub fn kubelet_config(&self, m: serde_yaml::Mapping, quiet: bool) -> Result<serde_yaml::Mapping, PatchError> {
        let target = Target::KubeletConfiguration;
        if !self.touches(target) {
            return Ok(m);
        }
        let result = |why: String| PatchError::Result { files: self.files(target), target, why };
        let doc = serde_json::to_value(&m).map_err(|e| result(e.to_string()))?;
        let patched = self.apply(target, doc, quiet)?;
        match serde_yaml::to_value(&patched).map_err(|e| result(e.to_string()))? {
            serde_yaml::Value::Mapping(m) => Ok(m),
            other => Err(result(format!("it is no longer a mapping but {other:?}"))),
        }
    }
}

/// kubeadm applies the node's instance-config.yaml to the KubeletConfiguration as a strategic
/// patch through its patch manager, so every kubelet-start logs this line, patches or not.
pub fn log_instance_config() {
    info!(
        "[patches] Applied patch of type {:?} to target {:?}",
        PatchType::Strategic.mime(),
        Target::KubeletConfiguration.name()
    );
}

/// The largest document a JSON patch may grow its target to, counted as `value_bytes` does. Each
/// `copy` of a document into itself doubles it: 30 such operations in 1.5 kB would ask for
/// terabytes. kubeadm's json-patch sets no limit; a patched Pod is kilobytes.
pub(crate) const MAX_PATCHED_BYTES: u64 = 16 << 20;

/// RFC 6902 operations in order, each as json_patch applies it, the size checked after every
/// `copy` (the one operation that can grow a document beyond the patch's own text).
fn json_ops(doc: &mut Value, ops: &json_patch::Patch) -> Result<(), String> {
    for (i, op) in ops.iter().enumerate() {
        json_patch::patch(doc, std::slice::from_ref(op)).map_err(|mut e| {
            e.operation = i;
            e.to_string()
        })?;
        if matches!(op, json_patch::PatchOperation::Copy(_)) && value_bytes(doc, MAX_PATCHED_BYTES).is_none() {
            return Err(format!("operation '/{i}' (copy) grows the document past {} MiB", MAX_PATCHED_BYTES >> 20));
        }
    }
    Ok(())
}

/// `v`'s size as its text plus 32 bytes a node, or `None` once past `limit` (the walk stops there,
/// so measuring an oversized document costs no more than the limit).
pub(crate) fn value_bytes(v: &Value, limit: u64) -> Option<u64> {
    let mut total = 0u64;
    let mut todo = vec![v];
    while let Some(v) = todo.pop() {
        total += 32;
        match v {
            Value::String(s) => total += s.len() as u64,
            Value::Array(a) => todo.extend(a.iter()),
            Value::Object(m) => {
                for (k, x) in m {
                    total += k.len() as u64;
                    todo.push(x);
                }
            }
            _ => {}
        }
        if total > limit {
            return None;
        }
    }
    Some(total)
}

/// RFC 7386 merge, as evanphx/json-patch's MergePatch: a null patch is refused, a patch that
/// is not an object replaces the document.
fn merge(mut doc: Value, patch: &Value) -> Result<Value, String> {
    match patch {
        Value::Null => Err("Invalid JSON Patch".into()),
        Value::Object(_) => {
            json_patch::merge(&mut doc, patch);
            Ok(doc)
        }
        other => Ok(other.clone()),
    }
}

/// Entry points for the cargo-fuzz targets (`fuzz/fuzz_targets/patch_file.rs`,
/// `strategic_merge.rs`) and tests/fuzz.rs: the crate-private parsers behind a patch file, and
/// a strategic merge with the re-encode after it. Not an API.
#[doc(hidden)]
pub mod fuzzing {
    use serde_json::Value;

    use super::Target;

    /// One fuzz input as a patch file: the first line its name, the rest its text, both decoded
    /// lossily as the directory reader decodes them; through the name parser, the document
    /// splitter and the YAML 1.1 reader, then applied to an etcd Pod as its name's type.
    pub fn patch_file(data: &[u8]) {
        let (name, text) = match data.iter().position(|&b| b == b'\n') {
            Some(i) => (&data[..i], &data[i + 1..]),
            None => (data, &[][..]),
        };
        let named = super::read::parse_name(&String::from_utf8_lossy(name));
        let Ok(docs) = super::read::documents(&String::from_utf8_lossy(text)) else { return };
        // Each document applied to a small Pod as the file's name says, through the same
        // bounds a patch directory has (the size of what a JSON patch's copies build).
        let Ok(super::read::Name::Patch(_, ptype)) = named else { return };
        let sets = vec![super::PatchSet { target: Target::Etcd, ptype, file: "fuzz".into(), docs }];
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "etcd"},
            "spec": {"containers": [{"name": "etcd", "command": ["etcd"]}]}});
        let _ = super::Patches { sets }.pod("etcd", pod, true);
    }

    /// One fuzz input as two JSON values, an original and a strategic merge patch (one value
    /// alone patches `{}`), merged for a static Pod and a KubeletConfiguration; the Pod decoded
    /// and encoded again as kubeadm writes it, the kubelet config turned into YAML.
    pub fn strategic_merge(data: &[u8]) {
        let mut values = serde_json::Deserializer::from_slice(data).into_iter::<Value>();
        let (Some(Ok(first)), second) = (values.next(), values.next()) else { return };
        let (original, patch) = match second {
            Some(Ok(p)) => (first, p),
            _ => (serde_json::json!({}), first),
        };
        for target in [Target::KubeApiserver, Target::KubeletConfiguration] {
            if let Ok(patched) = super::strategic::apply(original.clone(), patch.clone(), target.schema_root()) {
                let _ = super::decode::reencode(target.schema_root(), &patched);
                let _ = serde_yaml::to_value(&patched);
            }
        }
    }
}
