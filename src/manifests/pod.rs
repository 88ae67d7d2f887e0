//! The static Pod template shared by all control-plane components (kubeadm's ComponentPod),
//! built as JSON values so keys come out sorted, as Go's YAML marshalling writes them.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::config::types::{Arg, EnvVar, HostPathMount};

/// The named container port every probe targets (kubeadm's ProbePort, all components since 1.34).
pub(crate) const PROBE_PORT: &str = "probe-port";

/// A hostPath volume and its mount.
#[derive(Debug, Clone)]
pub struct Volume {
    pub name: String,
    pub host_path: String,
    pub mount_path: String,
    pub read_only: bool,
    /// kubeadm's own volumes always name a type; an extraVolume's is written even when empty
    /// (`type: ""`: kubeadm sets the pointer to the user's value).
    pub path_type: Option<String>,
}

impl Volume {
    pub fn new(name: &str, path: &str, read_only: bool, path_type: &str) -> Volume {
        Volume {
            name: name.into(),
            host_path: path.into(),
            mount_path: path.into(),
            read_only,
            path_type: Some(path_type.into()),
        }
    }
    pub(crate) fn from_extra(v: &HostPathMount) -> Volume {
        Volume {
            name: v.name.clone(),
            host_path: v.host_path.clone(),
            mount_path: v.mount_path.clone(),
            read_only: v.read_only,
            path_type: Some(v.path_type.clone()),
        }
    }
}

/// `binary --name=value ...` as kubeadm's ArgumentsToCommand: the defaults sorted by name, then
/// value; a default that any extra arg names is dropped; the extra args follow in the user's
/// order (a repeated flag such as `--service-account-issuer` keeps its first value first).
pub fn command(binary: &str, mut defaults: Vec<(String, String)>, extra: &[Arg]) -> Vec<String> {
    defaults.sort();
    let kept = defaults.into_iter().filter(|(n, _)| !extra.iter().any(|a| &a.name == n));
    let flags = kept.chain(extra.iter().map(|a| (a.name.clone(), a.value.clone())));
    std::iter::once(binary.to_string()).chain(flags.map(|(n, v)| format!("--{n}={v}"))).collect()
}

/// The value a flag ends up with, if set (the first occurrence).
pub fn flag_value<'a>(command: &'a [String], name: &str) -> Option<&'a str> {
    let prefix = format!("--{name}=");
    command.iter().find_map(|c| c.strip_prefix(&prefix))
}

/// The last extra arg of that name, as kubeadm's GetArgValue(args, name, -1) finds it.
pub(crate) fn last_arg<'a>(extra: &'a [Arg], name: &str) -> Option<&'a str> {
    extra.iter().rev().find(|a| a.name == name).map(|a| a.value.as_str())
}

/// kubeadm's getProbeAddress: only the literal wildcards mean "no host" (the kubelet then
/// probes the Pod IP, which is the node's with hostNetwork).
pub(crate) fn probe_address(addr: &str) -> Option<String> {
    if addr == "0.0.0.0" || addr == "::" { None } else { Some(addr.to_string()) }
}

/// An HTTP GET probe on the named probe port.
#[derive(Debug, Clone)]
pub struct Probe {
    pub host: Option<String>,
    pub path: &'static str,
    pub scheme: &'static str,
}

/// kubeadm's probe timings: liveness, readiness, startup.
pub fn probe(p: &Probe, kind: &str, startup_failure_threshold: u64) -> Value {
    let mut get = json!({ "path": p.path, "port": PROBE_PORT, "scheme": p.scheme });
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
    pub command: Vec<String>,
    pub liveness: Probe,
    pub readiness: Option<Probe>,
    pub startup: Probe,
    pub startup_failure_threshold: u64,
    pub requests: Value,
    pub volumes: Vec<Volume>,
    pub env: Vec<EnvVar>,
    pub annotations: Vec<(String, String)>,
    /// The containerPort behind the `probe-port` name.
    pub probe_port: u16,
    /// Mounts in `volumes` order rather than sorted by name (etcd).
    pub keep_mount_order: bool,
}

/// kubeadm's MergeKubeadmEnvVars: later lists override earlier ones by name; sorted by name.
pub(crate) fn merge_env(proxy_env: &[(String, String)], extra: &[EnvVar]) -> Vec<EnvVar> {
    // kubeadm's GetProxyEnvVars skips a *_proxy variable with an empty value.
    let mut out: Vec<EnvVar> = proxy_env
        .iter()
        .filter(|(n, v)| !v.is_empty() && !extra.iter().any(|e| &e.name == n))
        .map(|(n, v)| EnvVar { name: n.clone(), value: Some(v.clone()), value_from: None })
        .collect();
    for e in extra {
        // A name repeated in extraEnvs: the last one wins, as in kubeadm's map.
        out.retain(|o| o.name != e.name);
        out.push(e.clone());
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

pub fn render(c: &Component) -> Value {
    // kubeadm keys volumes by name, so a later one (an extraVolume) replaces a default of the
    // same name; the list comes out sorted by name.
    let vols: BTreeMap<&str, &Volume> = c.volumes.iter().map(|v| (v.name.as_str(), v)).collect();
    let volumes: Vec<Value> = vols
        .values()
        .map(|v| {
            let mut hp = json!({ "path": v.host_path });
            if let Some(t) = &v.path_type {
                hp["type"] = json!(t);
            }
            json!({ "hostPath": hp, "name": v.name })
        })
        .collect();
    // etcd lists its mounts in kubeadm's own order (data, then certs); the others sort by name.
    let mount_list: Vec<&Volume> =
        if c.keep_mount_order { c.volumes.iter().collect() } else { vols.values().copied().collect() };
    let mounts: Vec<Value> = mount_list
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
        // kubeadm writes IfNotPresent whatever nodeRegistration.imagePullPolicy says (that
        // setting governs only its own image pulls).
        "imagePullPolicy": "IfNotPresent",
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
    container["ports"] = json!([{ "containerPort": c.probe_port, "name": PROBE_PORT, "protocol": "TCP" }]);
    let mut metadata = json!({
        "labels": { "component": c.name, "tier": "control-plane" },
        "name": c.name,
        "namespace": "kube-system",
    });
    if !c.annotations.is_empty() {
        // Inserts rather than collect(): each collect() into a map instantiates its own sort.
        let mut a = serde_json::Map::new();
        for (k, v) in &c.annotations {
            a.insert(k.clone(), json!(v));
        }
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
    Ok(crate::objects::goyaml::go_quotes(&crate::objects::to_yaml(v)?))
}

/// The URL of a Pod's startup (else liveness) httpGet probe.
pub(crate) fn probe_url(pod: &Value) -> Option<String> {
    let c = &pod["spec"]["containers"][0];
    let probe = ["startupProbe", "livenessProbe"].iter().map(|k| &c[*k]["httpGet"]).find(|p| p.is_object())?;
    let host = probe["host"].as_str().filter(|h| !h.is_empty()).unwrap_or("127.0.0.1");
    let port = match &probe["port"] {
        Value::Number(n) => n.to_string(),
        Value::String(name) => c["ports"]
            .as_array()?
            .iter()
            .find(|p| p["name"] == name.as_str())
            .and_then(|p| p["containerPort"].as_u64())?
            .to_string(),
        _ => return None,
    };
    let scheme = probe["scheme"].as_str().unwrap_or("HTTP").to_ascii_lowercase();
    let host = if host.contains(':') { format!("[{host}]") } else { host.to_string() };
    Some(format!("{scheme}://{host}:{port}{}", probe["path"].as_str().unwrap_or("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arg(n: &str, v: &str) -> Arg {
        Arg { name: n.into(), value: v.into() }
    }

    #[test]
    fn defaults_sorted_extra_args_appended_in_user_order() {
        let defaults =
            vec![("c".to_string(), "3".to_string()), ("b".to_string(), "1".to_string()), ("a".into(), "2".into())];
        let extra = vec![arg("b", "y"), arg("z", "last"), arg("b", "x")];
        // kubeadm's ArgumentsToCommand: sorted defaults minus overridden names, then the overrides.
        assert_eq!(command("bin", defaults, &extra), ["bin", "--a=2", "--c=3", "--b=y", "--z=last", "--b=x"]);
    }

    #[test]
    fn repeated_issuers_keep_the_users_first_value_first() {
        let defaults = vec![("service-account-issuer".to_string(), "https://kubernetes.default.svc".to_string())];
        let extra = vec![
            arg("service-account-issuer", "https://new.example"),
            arg("service-account-issuer", "https://a.example"),
        ];
        let cmd = command("kube-apiserver", defaults, &extra);
        assert_eq!(
            cmd[1..],
            ["--service-account-issuer=https://new.example", "--service-account-issuer=https://a.example"]
        );
        assert_eq!(flag_value(&cmd, "service-account-issuer"), Some("https://new.example"));
    }

    #[test]
    fn last_arg_and_probe_address() {
        let extra = vec![arg("bind-address", "10.0.0.1"), arg("bind-address", "0.0.0.0")];
        assert_eq!(last_arg(&extra, "bind-address"), Some("0.0.0.0"));
        assert_eq!(last_arg(&extra, "port"), None);
        assert_eq!(probe_address("0.0.0.0"), None);
        assert_eq!(probe_address("::"), None);
        assert_eq!(probe_address("::1").as_deref(), Some("::1"));
        assert_eq!(probe_address("10.0.0.1").as_deref(), Some("10.0.0.1"));
    }

    #[test]
    fn later_volume_of_a_name_replaces_the_default() {
        let c = Component {
            name: "x",
            image: "img".into(),
            command: vec!["x".into()],
            liveness: Probe { host: None, path: "/livez", scheme: "HTTPS" },
            readiness: None,
            startup: Probe { host: None, path: "/livez", scheme: "HTTPS" },
            startup_failure_threshold: 24,
            requests: json!({"cpu": "1"}),
            volumes: vec![
                Volume::new("b", "/default", true, "DirectoryOrCreate"),
                Volume::new("a", "/a", false, ""),
                Volume::new("b", "/user", false, ""),
            ],
            env: vec![],
            annotations: vec![],
            probe_port: 1234,
            keep_mount_order: false,
        };
        let pod = render(&c);
        assert_eq!(
            pod["spec"]["volumes"],
            json!([{"hostPath": {"path": "/a", "type": ""}, "name": "a"}, {"hostPath": {"path": "/user", "type": ""}, "name": "b"}]),
            "an empty pathType is written, as kubeadm writes an extraVolume's (tests/parity rich)"
        );
        let ctr = &pod["spec"]["containers"][0];
        assert_eq!(ctr["volumeMounts"], json!([{"mountPath": "/a", "name": "a"}, {"mountPath": "/user", "name": "b"}]));
        assert_eq!(ctr["ports"], json!([{"containerPort": 1234, "name": "probe-port", "protocol": "TCP"}]));
        assert_eq!(ctr["livenessProbe"]["httpGet"]["port"], "probe-port");
        assert_eq!(ctr["imagePullPolicy"], "IfNotPresent");
    }

    #[test]
    fn merge_env_user_wins_and_sorts() {
        let proxy = vec![
            ("https_proxy".to_string(), "p".to_string()),
            ("NO_PROXY".to_string(), "n".to_string()),
            ("ftp_proxy".to_string(), String::new()),
        ];
        let e = |n: &str, v: &str| EnvVar { name: n.into(), value: Some(v.into()), value_from: None };
        let out = merge_env(&proxy, &[e("https_proxy", "u"), e("A", "1"), e("A", "2")]);
        let got: Vec<(String, Option<String>)> = out.into_iter().map(|e| (e.name, e.value)).collect();
        assert_eq!(
            got,
            vec![
                ("A".into(), Some("2".into())),
                ("NO_PROXY".into(), Some("n".into())),
                ("https_proxy".into(), Some("u".into()))
            ]
        );
    }
}
