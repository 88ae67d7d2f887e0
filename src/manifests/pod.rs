//! The static Pod template shared by all control-plane components (kubeadm's ComponentPod),
//! built as JSON values so keys come out sorted, as Go's YAML marshalling writes them.

use serde_json::{Value, json};

use crate::config::types::{Arg, EnvVar, HostPathMount};

/// A hostPath volume and its mount.
#[derive(Debug, Clone)]
pub struct Volume {
    pub name: String,
    pub host_path: String,
    pub mount_path: String,
    pub read_only: bool,
    pub path_type: String,
}

impl Volume {
    pub fn new(name: &str, path: &str, read_only: bool, path_type: &str) -> Volume {
        Volume {
            name: name.into(),
            host_path: path.into(),
            mount_path: path.into(),
            read_only,
            path_type: path_type.into(),
        }
    }
    pub fn from_extra(v: &HostPathMount) -> Volume {
        Volume {
            name: v.name.clone(),
            host_path: v.host_path.clone(),
            mount_path: v.mount_path.clone(),
            read_only: v.read_only,
            path_type: v.path_type.clone(),
        }
    }
}

/// `binary --name=value ...`: extra args replace every default of the same name (and may repeat);
/// flags sorted by name, then value.
pub fn command(binary: &str, defaults: Vec<(String, String)>, extra: &[Arg]) -> Vec<String> {
    let mut flags: Vec<(String, String)> =
        defaults.into_iter().filter(|(n, _)| !extra.iter().any(|a| &a.name == n)).collect();
    flags.extend(extra.iter().map(|a| (a.name.clone(), a.value.clone())));
    flags.sort();
    std::iter::once(binary.to_string()).chain(flags.into_iter().map(|(n, v)| format!("--{n}={v}"))).collect()
}

/// The value a flag ends up with, if set.
pub fn flag_value<'a>(command: &'a [String], name: &str) -> Option<&'a str> {
    let prefix = format!("--{name}=");
    command.iter().find_map(|c| c.strip_prefix(&prefix))
}

#[derive(Debug, Clone)]
pub struct Probe {
    pub host: Option<String>,
    pub path: &'static str,
    pub port: Value,
    pub scheme: &'static str,
}

/// kubeadm's probe timings: liveness, readiness, startup.
pub fn probe(p: &Probe, kind: &str, startup_failure_threshold: u64) -> Value {
    let mut get = json!({ "path": p.path, "port": p.port, "scheme": p.scheme });
    if let Some(h) = &p.host {
        get["host"] = json!(h);
    }
    let (delay, fail, period) = match kind {
        "liveness" => (10, 8, 10),
        "readiness" => (0, 3, 1),
        _ => (10, startup_failure_threshold, 10),
    };
    let mut v = json!({ "failureThreshold": fail, "httpGet": get, "periodSeconds": period, "timeoutSeconds": 15 });
    if delay > 0 {
        v["initialDelaySeconds"] = json!(delay);
    }
    v
}

pub struct Component {
    pub name: &'static str,
    pub image: String,
    pub image_pull_policy: String,
    pub command: Vec<String>,
    pub liveness: Probe,
    pub readiness: Option<Probe>,
    pub startup: Probe,
    pub startup_failure_threshold: u64,
    pub requests: Value,
    pub volumes: Vec<Volume>,
    pub env: Vec<EnvVar>,
    pub annotations: Vec<(String, String)>,
    pub ports: Option<Value>,
}

/// Proxy variables from our environment merged with the component's extraEnvs (user wins),
/// sorted by name.
pub fn merge_env(proxy_env: &[(String, String)], extra: &[EnvVar]) -> Vec<EnvVar> {
    let mut out: Vec<EnvVar> = proxy_env
        .iter()
        .filter(|(n, _)| !extra.iter().any(|e| &e.name == n))
        .map(|(n, v)| EnvVar { name: n.clone(), value: Some(v.clone()), value_from: None })
        .collect();
    out.extend(extra.iter().cloned());
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

pub fn render(c: &Component) -> Value {
    let mut vols = c.volumes.clone();
    vols.sort_by(|a, b| a.name.cmp(&b.name));
    vols.dedup_by(|a, b| a.name == b.name);
    let volumes: Vec<Value> = vols
        .iter()
        .map(|v| {
            let mut hp = json!({ "path": v.host_path });
            if !v.path_type.is_empty() {
                hp["type"] = json!(v.path_type);
            }
            json!({ "hostPath": hp, "name": v.name })
        })
        .collect();
    let mounts: Vec<Value> = vols
        .iter()
        .map(|v| {
            let mut m = json!({ "mountPath": v.mount_path, "name": v.name });
            if v.read_only {
                m["readOnly"] = json!(true);
            }
            m
        })
        .collect();
    let mut container = json!({
        "command": c.command,
        "image": c.image,
        "imagePullPolicy": c.image_pull_policy,
        "livenessProbe": probe(&c.liveness, "liveness", 0),
        "name": c.name,
        "resources": { "requests": c.requests },
        "startupProbe": probe(&c.startup, "startup", c.startup_failure_threshold),
        "volumeMounts": mounts,
    });
    if let Some(r) = &c.readiness {
        container["readinessProbe"] = probe(r, "readiness", 0);
    }
    if !c.env.is_empty() {
        container["env"] = json!(c.env);
    }
    if let Some(p) = &c.ports {
        container["ports"] = p.clone();
    }
    let mut metadata = json!({
        "labels": { "component": c.name, "tier": "control-plane" },
        "name": c.name,
        "namespace": "kube-system",
    });
    if !c.annotations.is_empty() {
        let a: serde_json::Map<String, Value> = c.annotations.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        metadata["annotations"] = Value::Object(a);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "containers": [container],
            "hostNetwork": true,
            "priority": 2000001000,
            "priorityClassName": "system-node-critical",
            "securityContext": { "seccompProfile": { "type": "RuntimeDefault" } },
            "volumes": volumes,
        },
        "status": {},
    })
}

/// The manifest text of a static Pod; an error (never an empty manifest) if it cannot be rendered.
pub fn to_yaml(v: &Value) -> Result<String, crate::objects::RenderError> {
    crate::objects::to_yaml(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_args_replace_defaults_and_sort() {
        let defaults = vec![("b".to_string(), "1".to_string()), ("a".to_string(), "2".to_string())];
        let extra = vec![Arg { name: "b".into(), value: "y".into() }, Arg { name: "b".into(), value: "x".into() }];
        assert_eq!(command("bin", defaults, &extra), ["bin", "--a=2", "--b=x", "--b=y"]);
    }
}
