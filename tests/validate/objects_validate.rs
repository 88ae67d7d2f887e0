//! Every API object `kubestrap init` creates (src/objects), checked by independent tools:
//! `kubernetes-validate --strict -k 1.37.0` on each object as YAML and as JSON, and `kubectl`
//! reading the kubeconfigs we render. Plus the kubelet config.yaml's kubeadm defaults.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::common::needs::{Need, need};
use crate::common::{BASE_CONFIG, TOKEN, fixture, kubectl, kubernetes_validate, sh};
use kubestrap::config::types::BootstrapToken;
use kubestrap::config::{HostFacts, InitConfig, parse_documents, resolve_init};
use kubestrap::objects::{self, configmaps, coredns, kubelet, node, proxy, rbac, tokens};
use serde_json::{Value, json};

/// BASE_CONFIG's node, with a pod subnet, a custom registry, CoreDNS overrides and passthrough
/// kubelet and kube-proxy documents.
const RICH_CONFIG: &str = fixture!("rich-objects/kubeadm.yaml");

const CA_PEM: &[u8] = fixture!("ca/ca.crt").as_bytes();

fn resolve(text: &str) -> InitConfig {
    let docs = parse_documents("test", text).expect("parse config");
    resolve_init("test", docs, &HostFacts { hostname: "cp-1".into(), default_address: None }).expect("resolve config")
}

fn default_token() -> BootstrapToken {
    BootstrapToken {
        token: TOKEN.into(),
        ttl: Some("24h0m0s".into()),
        usages: vec!["signing".into(), "authentication".into()],
        groups: vec![objects::BOOTSTRAP_GROUP.into()],
        ..Default::default()
    }
}

/// The Node as it would look after the mark-control-plane patch: a minimal Node merged with it.
fn patched_node(cfg: &InitConfig) -> Value {
    let mut n = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": cfg.node_name}});
    let p = node::control_plane_patch(cfg);
    n["metadata"]["labels"] = p["metadata"]["labels"].clone();
    if let Some(spec) = p.get("spec") {
        n["spec"] = spec.clone();
    }
    n
}

/// Every object init sends, in phase order.
fn all_objects(cfg: &InitConfig) -> Vec<Value> {
    let now = time::OffsetDateTime::now_utc();
    let mut out = Vec::new();
    out.push(rbac::cluster_admins_binding());
    out.push(configmaps::kubeadm_config(cfg).unwrap());
    out.push(configmaps::kubelet_config_map(cfg).unwrap());
    out.extend(rbac::upload_config_rbac());
    out.push(patched_node(cfg));
    let tokens_cfg =
        if cfg.init.bootstrap_tokens.is_empty() { vec![default_token()] } else { cfg.init.bootstrap_tokens.clone() };
    for t in &tokens_cfg {
        out.push(tokens::token_secret(t, now).expect("token secret"));
    }
    out.extend(rbac::bootstrap_token_rbac());
    out.push(configmaps::cluster_info(cfg, CA_PEM).0);
    out.extend(rbac::cluster_info_rbac());
    out.extend(coredns::coredns_objects(cfg));
    out.extend(proxy::kube_proxy_objects(cfg).unwrap());
    out
}

fn id(o: &Value) -> String {
    format!(
        "{}_{}_{}",
        o["kind"].as_str().unwrap_or("?"),
        o["metadata"]["namespace"].as_str().unwrap_or("cluster"),
        o["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// Writes each object as YAML and as JSON into `dir`; returns the paths.
fn write_all(dir: &Path, objs: &[Value]) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for o in objs {
        let base = id(o).replace(':', "-");
        let y = dir.join(format!("{base}.yaml"));
        std::fs::write(&y, objects::to_yaml(o).unwrap()).expect("write yaml");
        let j = dir.join(format!("{base}.json"));
        std::fs::write(&j, serde_json::to_string_pretty(o).expect("json")).expect("write json");
        paths.push(y);
        paths.push(j);
    }
    paths
}

/// `kubernetes-validate --strict -k 1.37.0` must exit 0 and report every file as passed.
fn assert_validate(paths: &[PathBuf]) {
    // The objects' own checks run without it.
    need!(Need::tool("kubernetes-validate"));
    let (code, text) = kubernetes_validate(paths);
    assert_eq!(code, 0, "kubernetes-validate rejected objects:\n{text}");
    for p in paths {
        let line = text.lines().find(|l| l.contains(&p.display().to_string()));
        assert!(line.is_some_and(|l| l.contains("passed")), "{} was not reported as passed:\n{text}", p.display());
    }
}

fn check_shape(objs: &[Value]) {
    let mut seen = BTreeSet::new();
    for o in objs {
        assert!(o["apiVersion"].is_string() && o["kind"].is_string(), "no apiVersion/kind: {o}");
        assert!(o["metadata"]["name"].is_string(), "no name: {o}");
        assert!(seen.insert(id(o)), "duplicate object {}", id(o));
    }
}

fn validate_config(text: &str) -> (InitConfig, Vec<Value>) {
    let cfg = resolve(text);
    let objs = all_objects(&cfg);
    check_shape(&objs);
    let dir = tempfile::tempdir().expect("tempdir");
    let paths = write_all(dir.path(), &objs);
    assert_validate(&paths);
    (cfg, objs)
}

fn find<'a>(objs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objs.iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name} among {:?}", objs.iter().map(id).collect::<Vec<_>>()))
}

// ---------------------------------------------------------------------------------------------

#[test]
fn validator_rejects_a_broken_object() {
    need!(Need::tool("kubernetes-validate"));
    // Guards the tests below: strict mode must reject an unknown field and a wrong type, or
    // "passed" would mean nothing.
    let dir = tempfile::tempdir().unwrap();
    let mut ds = proxy::kube_proxy_daemon_set(&resolve(BASE_CONFIG), &[]);
    ds["spec"]["template"]["spec"]["hostNetwrk"] = json!(true);
    let p = dir.path().join("bad.yaml");
    std::fs::write(&p, objects::to_yaml(&ds).unwrap()).unwrap();
    let (code, out) = kubernetes_validate(std::slice::from_ref(&p));
    assert_ne!(code, 0, "a misspelt field passed strict validation:\n{out}");
    let mut svc = coredns::kube_dns_service(&resolve(BASE_CONFIG));
    svc["spec"]["ports"][0]["port"] = json!("fifty-three");
    std::fs::write(&p, serde_json::to_string(&svc).unwrap()).unwrap();
    let (code, _) = kubernetes_validate(std::slice::from_ref(&p));
    assert_ne!(code, 0, "a string port passed validation");
}

#[test]
fn default_config_objects_pass_strict_schema_validation() {
    let (cfg, objs) = validate_config(BASE_CONFIG);
    // 1 + 2 ConfigMaps + 4 upload RBAC + Node + Secret + 6 token RBAC + cluster-info + 2 + 6 + 6.
    assert_eq!(objs.len(), 30, "{:?}", objs.iter().map(id).collect::<Vec<_>>());
    let node = find(&objs, "Node", "cp-1");
    assert_eq!(
        node["spec"]["taints"],
        json!([{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}])
    );
    let svc = find(&objs, "Service", "kube-dns");
    assert_eq!(svc["spec"]["clusterIP"], "10.96.0.10");
    let dep = find(&objs, "Deployment", "coredns");
    assert_eq!(dep["spec"]["template"]["spec"]["containers"][0]["image"], "registry.k8s.io/coredns/coredns:v1.14.6");
    let ds = find(&objs, "DaemonSet", "kube-proxy");
    assert_eq!(ds["spec"]["template"]["spec"]["containers"][0]["image"], "registry.k8s.io/kube-proxy:v1.37.0");
    // Generated component configs are signed; kubeadm-config and cluster-info are not.
    for name in ["kubelet-config", "kube-proxy"] {
        let cm = find(&objs, "ConfigMap", name);
        let ann = &cm["metadata"]["annotations"]["kubeadm.kubernetes.io/component-config.hash"];
        assert_eq!(ann.as_str(), Some(objects::config_map_checksum(cm).as_str()), "{name}");
    }
    for name in ["kubeadm-config", "cluster-info"] {
        assert!(find(&objs, "ConfigMap", name)["metadata"].get("annotations").is_none(), "{name}");
    }
    assert_eq!(cfg.endpoint.url(), "https://10.0.0.10:6443");
}

#[test]
fn rich_config_objects_pass_strict_schema_validation() {
    let (_cfg, objs) = validate_config(RICH_CONFIG);
    let node = find(&objs, "Node", "cp-1");
    assert_eq!(node["spec"]["taints"], json!([{"key": "dedicated", "value": "infra", "effect": "NoExecute"}]));
    assert_eq!(find(&objs, "Service", "kube-dns")["spec"]["clusterIP"], "10.100.0.10");
    let dep = find(&objs, "Deployment", "coredns");
    assert_eq!(dep["spec"]["template"]["spec"]["containers"][0]["image"], "dns.registry.example/coredns:v1.12.1");
    let corefile = find(&objs, "ConfigMap", "coredns")["data"]["Corefile"].as_str().unwrap().to_string();
    assert!(corefile.contains("kubernetes corp.internal in-addr.arpa ip6.arpa"), "{corefile}");
    let ds = find(&objs, "DaemonSet", "kube-proxy");
    assert_eq!(ds["spec"]["template"]["spec"]["containers"][0]["image"], "my.registry.example/k8s/kube-proxy:v1.37.0");

    let cm = find(&objs, "ConfigMap", "kube-proxy");
    let conf: serde_yaml::Value = serde_yaml::from_str(cm["data"]["config.conf"].as_str().unwrap()).unwrap();
    assert_eq!(conf["mode"], "ipvs");
    assert_eq!(conf["ipvs"]["strictARP"], true);
    assert_eq!(conf["clusterCIDR"], "10.244.0.0/16");
    assert_eq!(conf["clientConnection"]["kubeconfig"], "/var/lib/kube-proxy/kubeconfig.conf");
    assert!(cm["data"]["kubeconfig.conf"].as_str().unwrap().contains("server: https://api.example.test:6443"));
    // User-supplied component configs are not signed (kubeadm's IsUserSupplied).
    assert!(cm["metadata"].get("annotations").is_none());
    assert!(find(&objs, "ConfigMap", "kubelet-config")["metadata"].get("annotations").is_none());

    let secret = find(&objs, "Secret", "bootstrap-token-abcdef");
    let info = tokens::parse_token_secret(secret).unwrap();
    assert_eq!(info.description, "workers");
    let left = info.expiration.expect("ttl 2h expires") - time::OffsetDateTime::now_utc();
    assert!(left > time::Duration::minutes(119) && left <= time::Duration::hours(2), "{left}");
}

#[test]
fn disabled_addons_produce_nothing() {
    let cfg = resolve(&format!("{BASE_CONFIG}dns:\n  disabled: true\nproxy:\n  disabled: true\n"));
    let objs = all_objects(&cfg);
    assert!(!objs.iter().any(|o| o["metadata"]["name"] == "coredns" || o["metadata"]["name"] == "kube-proxy"));
    assert_eq!(objs.len(), 18);
}

#[test]
fn kubelet_config_yaml_has_kubeadm_defaults() {
    let cfg = resolve(BASE_CONFIG);
    let text = kubelet::config_yaml(&cfg).unwrap();
    let y: serde_yaml::Value = serde_yaml::from_str(&text).expect("config.yaml is YAML");
    let expect: &[(&[&str], serde_yaml::Value)] = &[
        (&["apiVersion"], "kubelet.config.k8s.io/v1beta1".into()),
        (&["kind"], "KubeletConfiguration".into()),
        (&["staticPodPath"], "/etc/kubernetes/manifests".into()),
        (&["clusterDomain"], "cluster.local".into()),
        (&["authentication", "x509", "clientCAFile"], "/etc/kubernetes/pki/ca.crt".into()),
        (&["authentication", "anonymous", "enabled"], false.into()),
        (&["authentication", "webhook", "enabled"], true.into()),
        (&["authorization", "mode"], "Webhook".into()),
        (&["healthzBindAddress"], "127.0.0.1".into()),
        (&["healthzPort"], 10248.into()),
        (&["rotateCertificates"], true.into()),
        (&["cgroupDriver"], "systemd".into()),
    ];
    for (path, want) in expect {
        let got = path.iter().fold(&y, |v, k| &v[*k]);
        assert_eq!(got, want, "{} in:\n{text}", path.join("."));
    }
    assert_eq!(y["clusterDNS"], serde_yaml::Value::Sequence(vec!["10.96.0.10".into()]));
    // Every top-level key is a KubeletConfiguration v1beta1 field (or TypeMeta).
    let known = [
        "apiVersion",
        "kind",
        "staticPodPath",
        "clusterDNS",
        "clusterDomain",
        "authentication",
        "authorization",
        "healthzBindAddress",
        "healthzPort",
        "rotateCertificates",
        "cgroupDriver",
        // Go's zero values, which kubeadm's marshalled struct carries too.
        "containerRuntimeEndpoint",
        "cpuManagerReconcilePeriod",
        "crashLoopBackOff",
        "evictionPressureTransitionPeriod",
        "fileCheckFrequency",
        "httpCheckFrequency",
        "imageMaximumGCAge",
        "imageMinimumGCAge",
        "logging",
        "memorySwap",
        "nodeStatusReportFrequency",
        "nodeStatusUpdateFrequency",
        "runtimeRequestTimeout",
        "shutdownGracePeriod",
        "shutdownGracePeriodCriticalPods",
        "streamingConnectionIdleTimeout",
        "syncFrequency",
        "volumeStatsAggPeriod",
    ];
    for k in y.as_mapping().unwrap().keys() {
        assert!(known.contains(&k.as_str().unwrap()), "unexpected key {k:?}");
    }
    // The ConfigMap carries the same text the node writes to disk.
    assert_eq!(configmaps::kubelet_config_map(&cfg).unwrap()["data"]["kubelet"], text.as_str());

    // User values stay, unknown fields pass through, rotateCertificates stays forced.
    let rich = resolve(RICH_CONFIG);
    let y: serde_yaml::Value = serde_yaml::from_str(&kubelet::config_yaml(&rich).unwrap()).unwrap();
    assert_eq!(y["cgroupDriver"], "cgroupfs");
    assert_eq!(y["maxPods"], 60);
    assert_eq!(y["evictionHard"]["memory.available"], "200Mi");
    assert_eq!(y["clusterDNS"], serde_yaml::Value::Sequence(vec!["10.100.0.10".into()]));
    assert_eq!(y["clusterDomain"], "corp.internal");
    assert_eq!(y["rotateCertificates"], true);
}

#[test]
fn flags_env_for_rich_config() {
    let cfg = resolve(RICH_CONFIG);
    let nr = &cfg.init.node_registration;
    // The hostname differs from the node name, so kubeadm adds --hostname-override.
    let env = kubelet::kubeadm_flags_env(&cfg.node_name, "ip-10-0-0-5", None, &nr.kubelet_extra_args);
    // No --container-runtime-endpoint (instance-config.yaml has it) and no
    // --pod-infra-container-image (kubelet 1.35 removed it and exits on it).
    assert_eq!(env, "KUBELET_KUBEADM_ARGS=\"--hostname-override=cp-1 --node-labels=tier=infra\"\n");
    // The shell the kubelet's drop-in goes through reads it back as the same words.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("kubeadm-flags.env");
    std::fs::write(&p, &env).unwrap();
    let (code, out, _) = sh(&format!("set -a; . '{}'; printf '%s\\n' $KUBELET_KUBEADM_ARGS", p.display()));
    assert_eq!(code, 0);
    assert_eq!(out.lines().collect::<Vec<_>>(), vec!["--hostname-override=cp-1", "--node-labels=tier=infra"]);
    // instance-config.yaml reads back as the node's endpoint.
    let instance: serde_yaml::Value = serde_yaml::from_str(&kubelet::instance_config_yaml(&nr.cri_socket)).unwrap();
    assert_eq!(instance["containerRuntimeEndpoint"], "unix:///var/run/containerd/containerd.sock");
}

/// kubectl (client-go's loader) reads every kubeconfig we render.
#[test]
fn kubectl_reads_rendered_kubeconfigs() {
    need!(Need::tool("kubectl"));
    let cfg = resolve(RICH_CONFIG);
    let dir = tempfile::tempdir().unwrap();
    let view = |name: &str, text: &str| -> Value {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        let (code, out, err) = kubectl(&["config", "view", "--raw", "-o", "json", "--kubeconfig", p.to_str().unwrap()]);
        assert_eq!(code, 0, "kubectl could not read {name}: {err}\n{text}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl output for {name}: {e}\n{out}"))
    };

    let (_, info) = configmaps::cluster_info(&cfg, CA_PEM);
    let v = view("cluster-info.conf", &info);
    assert_eq!(v["clusters"].as_array().unwrap().len(), 1);
    assert_eq!(v["clusters"][0]["name"], "");
    assert_eq!(v["clusters"][0]["cluster"]["server"], "https://api.example.test:6443");
    let ca = v["clusters"][0]["cluster"]["certificate-authority-data"].as_str().unwrap();
    assert_eq!(kubestrap::kubeconfig::decode_b64(ca).unwrap(), CA_PEM);
    assert!(v["users"].as_array().is_none_or(|u| u.is_empty()));
    assert!(v["contexts"].as_array().is_none_or(|c| c.is_empty()));

    let kc = proxy::in_cluster_kubeconfig(&cfg.endpoint.url());
    let v = view("kube-proxy.conf", &kc);
    assert_eq!(v["current-context"], "default");
    assert_eq!(v["users"][0]["user"]["tokenFile"], "/var/run/secrets/kubernetes.io/serviceaccount/token");
    assert_eq!(
        v["clusters"][0]["cluster"]["certificate-authority"],
        "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
    );

    let boot = kubelet::bootstrap_kubelet_conf("https://api.example.test:6443", CA_PEM, TOKEN);
    let v = view("bootstrap-kubelet.conf", &boot.to_yaml().unwrap());
    assert_eq!(v["current-context"], "tls-bootstrap-token-user@kubernetes");
    assert_eq!(v["users"][0]["name"], "tls-bootstrap-token-user");
    assert_eq!(v["users"][0]["user"]["token"], TOKEN);

    let rot = kubelet::kubelet_conf_for_rotation("https://api.example.test:6443", CA_PEM);
    let v = view("kubelet.conf", &rot.to_yaml().unwrap());
    assert_eq!(v["current-context"], "default-context");
    assert_eq!(v["contexts"][0]["context"]["namespace"], "default");
    assert_eq!(v["users"][0]["user"]["client-certificate"], "/var/lib/kubelet/pki/kubelet-client-current.pem");
    assert_eq!(v["users"][0]["user"]["client-key"], "/var/lib/kubelet/pki/kubelet-client-current.pem");
}
