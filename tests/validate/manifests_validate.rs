//! Static Pod manifests checked by an independent schema validator (`kubernetes-validate`,
//! strict mode, Kubernetes 1.37 schema) plus structural rules kubeadm follows
//! (reference: kubeadm-facts.md section 8).

use crate::common::needs::{Need, need};
use crate::common::{BASE_CONFIG, Scratch, fixture, kubernetes_validate};
use serde_yaml::Value;

const COMPONENTS: [&str; 4] = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"];

/// BASE_CONFIG's node plus a ClusterConfiguration exercising most customisation knobs.
const RICH_CONFIG: &str = fixture!("rich-manifests/kubeadm.yaml");

const EXTERNAL_ETCD_CONFIG: &str = fixture!("external-etcd/kubeadm.yaml");

// ---------------------------------------------------------------------------------------------
// helpers

fn manifest_path(s: &Scratch, component: &str) -> std::path::PathBuf {
    s.path(&format!("/etc/kubernetes/manifests/{component}.yaml"))
}

fn load(s: &Scratch, component: &str) -> Value {
    let p = manifest_path(s, component);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}\n{text}", p.display()))
}

/// `kubernetes-validate --strict -k 1.37.0 FILE` must exit 0 and say the file passed.
fn assert_validates(s: &Scratch, component: &str) {
    // The manifests' own checks run without it.
    need!(Need::tool("kubernetes-validate"));
    let (code, text) = kubernetes_validate(&[manifest_path(s, component)]);
    assert_eq!(code, 0, "kubernetes-validate rejected {component}.yaml:\n{text}");
    assert!(
        text.contains("passed") && !text.contains("ERROR") && !text.contains("did not validate"),
        "kubernetes-validate did not report {component}.yaml as valid:\n{text}"
    );
}

fn container(pod: &Value) -> &Value {
    let cs = pod["spec"]["containers"].as_sequence().expect("spec.containers is a list");
    assert_eq!(cs.len(), 1, "static Pods have exactly one container");
    &cs[0]
}

fn command(pod: &Value) -> Vec<String> {
    container(pod)["command"]
        .as_sequence()
        .expect("container.command is a list")
        .iter()
        .map(|v| v.as_str().expect("command entries are strings").to_string())
        .collect()
}

/// The `--name=value` flags after the binary name, as (name, value) pairs, in file order.
fn flags(pod: &Value) -> Vec<(String, String)> {
    command(pod)[1..]
        .iter()
        .map(|f| {
            let body = f.strip_prefix("--").unwrap_or_else(|| panic!("flag {f:?} does not start with --"));
            let (n, v) = body.split_once('=').unwrap_or_else(|| panic!("flag {f:?} is not --name=value"));
            (n.to_string(), v.to_string())
        })
        .collect()
}

fn flag_values(pod: &Value, name: &str) -> Vec<String> {
    flags(pod).into_iter().filter(|(n, _)| n == name).map(|(_, v)| v).collect()
}

fn flag(pod: &Value, name: &str) -> String {
    let vs = flag_values(pod, name);
    assert_eq!(vs.len(), 1, "expected exactly one --{name}, got {vs:?} in {:?}", command(pod));
    vs[0].clone()
}

fn names(list: &Value) -> Vec<String> {
    list.as_sequence()
        .map(|s| s.iter().map(|v| v["name"].as_str().expect("entry has a name").to_string()).collect())
        .unwrap_or_default()
}

fn volume<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["spec"]["volumes"]
        .as_sequence()
        .expect("spec.volumes")
        .iter()
        .find(|v| v["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no volume {name:?} in {:?}", names(&pod["spec"]["volumes"])))
}

fn mount<'a>(pod: &'a Value, name: &str) -> &'a Value {
    container(pod)["volumeMounts"]
        .as_sequence()
        .expect("volumeMounts")
        .iter()
        .find(|v| v["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no volumeMount {name:?} in {:?}", names(&container(pod)["volumeMounts"])))
}

/// The component's extraArgs in `config` (its ClusterConfiguration), in the user's order.
fn extra_args(config: &str, component: &str) -> Vec<(String, String)> {
    let cluster = serde_yaml::Deserializer::from_str(config)
        .map(|d| <Value as serde::Deserialize>::deserialize(d).expect("config document"))
        .find(|d| d["kind"].as_str() == Some("ClusterConfiguration"))
        .unwrap_or(Value::Null);
    let section = match component {
        "etcd" => &cluster["etcd"]["local"],
        "kube-apiserver" => &cluster["apiServer"],
        "kube-controller-manager" => &cluster["controllerManager"],
        _ => &cluster["scheduler"],
    };
    section["extraArgs"]
        .as_sequence()
        .map(|l| {
            l.iter()
                .map(|a| (a["name"].as_str().unwrap().to_string(), a["value"].as_str().unwrap().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// Structural rules shared by every manifest kubeadm writes; `extra` are the component's
/// extraArgs from the config.
fn assert_common_shape(pod: &Value, component: &str, extra: &[(String, String)]) {
    assert_eq!(pod["apiVersion"].as_str(), Some("v1"));
    assert_eq!(pod["kind"].as_str(), Some("Pod"));
    assert_eq!(pod["metadata"]["name"].as_str(), Some(component));
    assert_eq!(pod["metadata"]["namespace"].as_str(), Some("kube-system"));
    assert_eq!(pod["metadata"]["labels"]["component"].as_str(), Some(component));
    assert_eq!(pod["metadata"]["labels"]["tier"].as_str(), Some("control-plane"));
    assert_eq!(pod["spec"]["hostNetwork"].as_bool(), Some(true), "{component}: hostNetwork");
    assert_eq!(pod["spec"]["priorityClassName"].as_str(), Some("system-node-critical"));
    assert_eq!(pod["spec"]["securityContext"]["seccompProfile"]["type"].as_str(), Some("RuntimeDefault"));
    assert_eq!(container(pod)["imagePullPolicy"].as_str(), Some("IfNotPresent"));

    // The binary is the first element, then the defaults sorted by name then value (minus any
    // an extraArg names), then the extraArgs in the user's order (kubeadm's ArgumentsToCommand).
    let cmd = command(pod);
    assert_eq!(cmd[0], component, "{component}: binary name");
    let fl = flags(pod);
    let (defaults, tail) = fl.split_at(fl.len() - extra.len());
    assert_eq!(tail, extra, "{component}: extraArgs are not last, in the user's order");
    let mut sorted = defaults.to_vec();
    sorted.sort();
    assert_eq!(defaults, sorted, "{component}: default flags are not sorted by name then value");
    assert!(
        !defaults.iter().any(|(n, _)| extra.iter().any(|(e, _)| e == n)),
        "{component}: an overridden default stayed"
    );

    // Every probe targets the named port, declared once, as kubeadm 1.34+ writes it.
    let ports = container(pod)["ports"].as_sequence().expect("ports");
    assert_eq!(ports.len(), 1, "{component}: one port");
    assert_eq!(ports[0]["name"].as_str(), Some("probe-port"));
    assert_eq!(ports[0]["protocol"].as_str(), Some("TCP"));
    assert!(ports[0]["containerPort"].as_u64().is_some());
    for p in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let probe = &container(pod)[p];
        if !probe.is_null() {
            assert_eq!(probe["httpGet"]["port"].as_str(), Some("probe-port"), "{component} {p}");
        }
    }

    // Volumes are sorted by name, mounts too (etcd's are data, then certs, as kubeadm lists
    // them), and every mount has a volume.
    let vols = names(&pod["spec"]["volumes"]);
    let mounts = names(&container(pod)["volumeMounts"]);
    let mut v2 = vols.clone();
    v2.sort();
    assert_eq!(vols, v2, "{component}: volumes not sorted by name");
    if component == "etcd" {
        assert_eq!(mounts, ["etcd-data", "etcd-certs"], "etcd: volumeMounts order");
    } else {
        let mut m2 = mounts.clone();
        m2.sort();
        assert_eq!(mounts, m2, "{component}: volumeMounts not sorted by name");
    }
    for m in &mounts {
        assert!(vols.contains(m), "{component}: volumeMount {m} has no volume");
    }

    // Env (if any) is sorted by name.
    let env = names(&container(pod)["env"]);
    let mut e2 = env.clone();
    e2.sort();
    assert_eq!(env, e2, "{component}: env not sorted by name");

    // Flags removed from the components long ago must not come back.
    let flag_names: Vec<&str> = fl.iter().map(|(n, _)| n.as_str()).collect();
    let removed: &[&str] = match component {
        "kube-apiserver" => &["insecure-port", "admission-control", "insecure-bind-address"],
        "kube-controller-manager" | "kube-scheduler" => &["address", "port"],
        _ => &[],
    };
    for r in removed {
        assert!(!flag_names.contains(r), "{component}: removed flag --{r} present: {cmd:?}");
    }
}

fn probe_hosts(pod: &Value) -> Vec<(String, Option<String>)> {
    let c = container(pod);
    ["livenessProbe", "readinessProbe", "startupProbe"]
        .iter()
        .filter(|p| !c[**p].is_null())
        .map(|p| (p.to_string(), c[*p]["httpGet"]["host"].as_str().map(str::to_string)))
        .collect()
}

fn init(config: &str) -> Scratch {
    let s = Scratch::new(config);
    s.init(&[]).ok();
    s
}

// ---------------------------------------------------------------------------------------------
// tests

/// Every manifest of a config validates and has kubeadm's shape.
fn assert_all_validate(config: &str) {
    let s = init(config);
    for c in COMPONENTS {
        assert_validates(&s, c);
        assert_common_shape(&load(&s, c), c, &extra_args(config, c));
    }
}

#[test]
fn base_config_manifests_pass_strict_schema_validation() {
    assert_all_validate(BASE_CONFIG);
}

#[test]
fn base_config_defaults_match_kubeadm() {
    let s = init(BASE_CONFIG);
    let api = load(&s, "kube-apiserver");
    assert_eq!(flag(&api, "advertise-address"), "10.0.0.10");
    assert_eq!(flag(&api, "etcd-servers"), "https://127.0.0.1:2379");
    assert_eq!(flag(&api, "enable-admission-plugins"), "NodeRestriction");
    assert_eq!(flag(&api, "authorization-mode"), "Node,RBAC");
    assert_eq!(flag(&api, "secure-port"), "6443");
    assert!(container(&api)["image"].as_str().unwrap().starts_with("registry.k8s.io/kube-apiserver:"));
    for (probe, host) in probe_hosts(&api) {
        assert_eq!(host.as_deref(), Some("10.0.0.10"), "apiserver {probe} host");
    }

    for (c, port) in [("kube-controller-manager", 10257), ("kube-scheduler", 10259)] {
        let pod = load(&s, c);
        assert_eq!(flag(&pod, "bind-address"), "127.0.0.1", "{c}");
        let hosts = probe_hosts(&pod);
        assert!(!hosts.is_empty(), "{c} has probes");
        for (probe, host) in hosts {
            assert_eq!(host.as_deref(), Some("127.0.0.1"), "{c} {probe} host");
            assert_eq!(container(&pod)[probe.as_str()]["httpGet"]["port"].as_str(), Some("probe-port"), "{c} {probe}");
        }
        assert_eq!(container(&pod)["ports"][0]["containerPort"].as_i64(), Some(port), "{c} probe-port");
    }
    assert_eq!(container(&api)["ports"][0]["containerPort"].as_i64(), Some(6443));
    // kubeadm 1.37: the scheduler has /livez, /readyz; the controller-manager /healthz only.
    let sched = load(&s, "kube-scheduler");
    let paths = |pod: &Value| -> Vec<Option<String>> {
        ["livenessProbe", "readinessProbe", "startupProbe"]
            .iter()
            .map(|p| container(pod)[*p]["httpGet"]["path"].as_str().map(str::to_string))
            .collect()
    };
    let some = |s: &str| Some(s.to_string());
    assert_eq!(paths(&sched), [some("/livez"), some("/readyz"), some("/livez")]);
    assert_eq!(paths(&load(&s, "kube-controller-manager")), [some("/healthz"), None, some("/healthz")]);
    // No podSubnet: no node CIDR allocation flags.
    let kcm = load(&s, "kube-controller-manager");
    assert!(flag_values(&kcm, "allocate-node-cidrs").is_empty());
    assert!(flag_values(&kcm, "cluster-cidr").is_empty());
}

#[test]
fn rich_config_manifests_pass_strict_schema_validation() {
    assert_all_validate(RICH_CONFIG);
}

#[test]
fn rich_config_images_use_custom_repository() {
    let s = init(RICH_CONFIG);
    for c in COMPONENTS {
        let pod = load(&s, c);
        let image = container(&pod)["image"].as_str().expect("image").to_string();
        assert!(
            image.starts_with(&format!("my.registry.example/k8s/{c}:")),
            "{c}: image {image:?} does not use the custom imageRepository"
        );
        assert!(!image.contains("registry.k8s.io"), "{c}: {image}");
    }
}

#[test]
fn rich_config_extra_args_are_added_and_replace_defaults() {
    let s = init(RICH_CONFIG);

    let api = load(&s, "kube-apiserver");
    assert_eq!(flag(&api, "audit-log-path"), "/var/log/audit.log");
    // Replaces, not appends to, the default NodeRestriction.
    assert_eq!(flag_values(&api, "enable-admission-plugins"), vec!["NodeRestriction,PodNodeSelector"]);

    let kcm = load(&s, "kube-controller-manager");
    assert_eq!(flag(&kcm, "node-cidr-mask-size"), "24");
    assert_eq!(flag_values(&kcm, "bind-address"), vec!["10.0.0.10"], "default 127.0.0.1 must be replaced");
    assert_eq!(flag(&kcm, "allocate-node-cidrs"), "true");
    assert_eq!(flag(&kcm, "cluster-cidr"), "10.244.0.0/16");
    assert_eq!(flag(&kcm, "service-cluster-ip-range"), "10.96.0.0/12");
    let hosts = probe_hosts(&kcm);
    assert!(!hosts.is_empty());
    for (probe, host) in hosts {
        assert_eq!(host.as_deref(), Some("10.0.0.10"), "kube-controller-manager {probe} host follows --bind-address");
    }

    let sched = load(&s, "kube-scheduler");
    assert_eq!(flag(&sched, "v"), "2");
    assert_eq!(flag_values(&sched, "bind-address"), vec!["0.0.0.0"], "default 127.0.0.1 must be replaced");
    assert!(
        !command(&sched).iter().any(|a| a.contains("127.0.0.1")),
        "kube-scheduler still mentions 127.0.0.1: {:?}",
        command(&sched)
    );
    for (probe, host) in probe_hosts(&sched) {
        assert_ne!(host.as_deref(), Some("127.0.0.1"), "kube-scheduler {probe} host kept the default");
    }

    let etcd = load(&s, "etcd");
    assert_eq!(flag_values(&etcd, "snapshot-count"), vec!["5000"], "default 10000 must be replaced");
    assert_eq!(flag(&etcd, "heartbeat-interval"), "250");
}

/// kubeadm's getProbeAddress (cmd/kubeadm/app/util/staticpod/utils.go): when the bind address
/// is unspecified (0.0.0.0 or ::) the probe host is left empty so the kubelet probes the Pod IP;
/// 0.0.0.0 is not a usable destination address.
#[test]
fn unspecified_bind_address_leaves_probe_host_empty() {
    let s = init(RICH_CONFIG);
    let sched = load(&s, "kube-scheduler");
    let hosts = probe_hosts(&sched);
    assert!(!hosts.is_empty());
    for (probe, host) in hosts {
        assert!(
            host.as_deref().unwrap_or("").is_empty(),
            "kube-scheduler {probe}: bind-address 0.0.0.0 must give an empty probe host (kubelet uses the Pod IP), got {host:?}"
        );
    }
}

#[test]
fn rich_config_extra_volume_and_env() {
    let s = init(RICH_CONFIG);
    let api = load(&s, "kube-apiserver");
    let v = volume(&api, "audit");
    assert_eq!(v["hostPath"]["path"].as_str(), Some("/var/log"));
    assert_eq!(v["hostPath"]["type"].as_str(), Some("DirectoryOrCreate"));
    let m = mount(&api, "audit");
    assert_eq!(m["mountPath"].as_str(), Some("/var/log"));
    assert_ne!(m["readOnly"].as_bool(), Some(true), "readOnly: false was asked for");
    // The defaults are still there.
    assert_eq!(volume(&api, "k8s-certs")["hostPath"]["path"].as_str(), Some("/etc/kubernetes/pki"));
    assert_eq!(mount(&api, "k8s-certs")["readOnly"].as_bool(), Some(true));

    for c in COMPONENTS {
        let pod = load(&s, c);
        let env = container(&pod)["env"].as_sequence().unwrap_or_else(|| panic!("{c}: no env"));
        assert!(
            env.iter().any(|e| e["name"].as_str() == Some("FOO") && e["value"].as_str() == Some("bar")),
            "{c}: env FOO=bar missing: {env:?}"
        );
    }
}

#[test]
fn external_etcd_has_no_local_etcd_and_points_apiserver_at_it() {
    let s = init(EXTERNAL_ETCD_CONFIG);
    assert!(!manifest_path(&s, "etcd").exists(), "external etcd must not produce etcd.yaml");
    assert!(!s.pki("etcd").exists(), "external etcd must not produce pki/etcd/");
    assert!(!s.pki("apiserver-etcd-client.crt").exists(), "external etcd: no apiserver-etcd-client cert");

    for c in ["kube-apiserver", "kube-controller-manager", "kube-scheduler"] {
        assert_validates(&s, c);
        assert_common_shape(&load(&s, c), c, &extra_args(EXTERNAL_ETCD_CONFIG, c));
    }

    let api = load(&s, "kube-apiserver");
    assert_eq!(flag(&api, "etcd-servers"), "https://10.0.0.50:2379");
    assert_eq!(flag(&api, "etcd-cafile"), "/etc/etcd/pki/ca.crt");
    assert_eq!(flag(&api, "etcd-certfile"), "/etc/etcd/pki/apiserver-etcd-client.crt");
    assert_eq!(flag(&api, "etcd-keyfile"), "/etc/etcd/pki/apiserver-etcd-client.key");

    // Some hostPath volume, mounted at the same path, must cover each etcd file.
    let vols = api["spec"]["volumes"].as_sequence().expect("volumes");
    for file in
        ["/etc/etcd/pki/ca.crt", "/etc/etcd/pki/apiserver-etcd-client.crt", "/etc/etcd/pki/apiserver-etcd-client.key"]
    {
        let covering = vols.iter().find(|v| {
            v["hostPath"]["path"]
                .as_str()
                .map(|p| file.starts_with(&format!("{}/", p.trim_end_matches('/'))) || file == p)
                .unwrap_or(false)
        });
        let v = covering.unwrap_or_else(|| panic!("no hostPath volume covers {file}: {vols:?}"));
        let name = v["name"].as_str().unwrap();
        let m = mount(&api, name);
        assert_eq!(m["mountPath"].as_str(), v["hostPath"]["path"].as_str(), "volume {name} mounted elsewhere");
        assert_eq!(m["readOnly"].as_bool(), Some(true), "etcd cert volume {name} should be read-only");
    }
}
