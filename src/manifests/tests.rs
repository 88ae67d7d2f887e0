//! kubeadm v1.37.2's manifests (phases/controlplane/manifests.go, phases/etcd/local.go,
//! util/staticpod/utils.go), one rule per test.

use super::pod::flag_value;
use super::*;
use crate::config::{HostFacts, parse_documents, resolve_init};

fn cfg_with(version: &str, cluster: &str) -> InitConfig {
    let text = format!(
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nnodeRegistration:\n  name: cp-1\n  \
         imagePullPolicy: Always\nlocalAPIEndpoint:\n  advertiseAddress: 10.0.0.10\n---\n\
         apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: {version}\n{cluster}"
    );
    let docs = parse_documents("test", &text).unwrap();
    resolve_init("test", docs, &HostFacts { hostname: "cp-1".into(), default_address: None }).unwrap()
}

fn cfg(cluster: &str) -> InitConfig {
    cfg_with("v1.37.0", cluster)
}

fn ctr(pod: &Value) -> &Value {
    &pod["spec"]["containers"][0]
}

fn cmd(pod: &Value) -> Vec<String> {
    ctr(pod)["command"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().into()).collect()
}

fn probe_port(pod: &Value) -> &Value {
    &ctr(pod)["ports"][0]["containerPort"]
}

#[test]
fn etcd_never_gets_experimental_flags() {
    // Even a pinned pre-3.6 tag: kubeadm 1.36+ dropped the old names.
    let c = cfg("etcd:\n  local:\n    imageTag: 3.5.21-0\n");
    let etcd = cmd(&etcd(&c, &HostEnv::default()).unwrap());
    assert!(!etcd.iter().any(|f| f.starts_with("--experimental-")), "{etcd:?}");
    assert_eq!(flag_value(&etcd, "feature-gates"), Some("InitialCorruptCheck=true"));
    assert_eq!(flag_value(&etcd, "watch-progress-notify-interval"), Some("5s"));
}

#[test]
fn etcd_and_coredns_tags_follow_kubeadm_1_37_2() {
    for v in ["v1.36.3", "v1.37.2"] {
        assert_eq!(cfg_with(v, "").etcd_image_tag, "3.7.0-0", "{v}");
    }
    assert_eq!(crate::objects::coredns::COREDNS_VERSION, "v1.14.6");
}

#[test]
fn probe_ports_are_kubeadms_constants_not_the_extra_args() {
    let c = cfg("apiServer:\n  extraArgs:\n  - name: secure-port\n    value: \"7443\"\n\
         controllerManager:\n  extraArgs:\n  - name: secure-port\n    value: \"11257\"\n");
    let env = HostEnv::default();
    assert_eq!(*probe_port(&kube_apiserver(&c, &env)), json!(6443));
    assert_eq!(*probe_port(&kube_controller_manager(&c, &env, false)), json!(10257));
    assert_eq!(*probe_port(&kube_scheduler(&c, &env)), json!(10259));
    assert_eq!(*probe_port(&etcd(&c, &env).unwrap()), json!(2381));
}

#[test]
fn apiserver_probe_host_is_the_advertise_address_even_when_overridden() {
    let c = cfg("apiServer:\n  extraArgs:\n  - name: advertise-address\n    value: 10.9.9.9\n");
    let api = kube_apiserver(&c, &HostEnv::default());
    assert_eq!(ctr(&api)["livenessProbe"]["httpGet"]["host"], "10.0.0.10");
    assert_eq!(flag_value(&cmd(&api), "advertise-address"), Some("10.9.9.9"));
}

#[test]
fn last_bind_address_sets_the_probe_host() {
    let c = cfg("scheduler:\n  extraArgs:\n  - name: bind-address\n    value: 0.0.0.0\n  - name: bind-address\n    \
         value: 10.0.0.10\n");
    let s = kube_scheduler(&c, &HostEnv::default());
    assert_eq!(ctr(&s)["readinessProbe"]["httpGet"]["host"], "10.0.0.10");
    // Both values stay on the command line, in the user's order, after the defaults.
    let tail: Vec<String> = cmd(&s).into_iter().rev().take(2).collect();
    assert_eq!(tail, ["--bind-address=10.0.0.10", "--bind-address=0.0.0.0"]);
}

#[test]
fn etcd_probe_follows_the_first_user_metrics_url() {
    let c = cfg("etcd:\n  local:\n    extraArgs:\n    - name: listen-metrics-urls\n      \
         value: https://[::1]:2390/metrics,http://127.0.0.1:2381\n");
    let pod = etcd(&c, &HostEnv::default()).unwrap();
    let get = &ctr(&pod)["livenessProbe"]["httpGet"];
    assert_eq!(get["host"], "::1");
    assert_eq!(get["scheme"], "HTTPS");
    assert_eq!(get["port"], "probe-port");
    assert_eq!(*probe_port(&pod), json!(2390));
    // A wildcard host stays as parsed (kubeadm's etcd probe has no wildcard check).
    let c = cfg("etcd:\n  local:\n    extraArgs:\n    - name: listen-metrics-urls\n      value: http://0.0.0.0\n");
    let pod = etcd(&c, &HostEnv::default()).unwrap();
    assert_eq!(ctr(&pod)["startupProbe"]["httpGet"]["host"], "0.0.0.0");
    assert_eq!(*probe_port(&pod), json!(2381));
}

#[test]
fn etcd_annotation_env_and_mount_order() {
    let c = cfg(
        "etcd:\n  local:\n    extraArgs:\n    - name: advertise-client-urls\n      value: https://etcd.example:2379\n",
    );
    let env = HostEnv { proxy_env: vec![("HTTPS_PROXY".into(), "http://proxy:3128".into())], ca_dirs: vec![] };
    let pod = etcd(&c, &env).unwrap();
    let ann = crate::etcd::ADVERTISE_CLIENT_URLS_ANNOTATION;
    assert_eq!(pod["metadata"]["annotations"][ann], "https://10.0.0.10:2379");
    assert!(ctr(&pod).get("env").is_none(), "etcd gets no proxy variables");
    let mounts: Vec<&str> =
        ctr(&pod)["volumeMounts"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(mounts, ["etcd-data", "etcd-certs"]);
    // The API server follows the override, and keeps the proxy variables.
    let api = kube_apiserver(&c, &env);
    assert_eq!(flag_value(&cmd(&api), "etcd-servers"), Some("https://etcd.example:2379"));
    assert_eq!(ctr(&api)["env"][0]["name"], "HTTPS_PROXY");
}

#[test]
fn image_pull_policy_is_always_if_not_present() {
    let c = cfg("");
    let env = HostEnv::default();
    for pod in [kube_apiserver(&c, &env), kube_scheduler(&c, &env), etcd(&c, &env).unwrap()] {
        assert_eq!(ctr(&pod)["imagePullPolicy"], "IfNotPresent");
    }
}

#[test]
fn external_etcd_cert_dirs_as_kubeadm_mounts_them() {
    let c = cfg("etcd:\n  external:\n    endpoints: [https://10.0.0.50:2379]\n    caFile: /etc/etcd/ca.crt\n    \
         certFile: /etc/etcd/pki/client.crt\n    keyFile: /etc/pki/tls/certs/client.key\n");
    let api = kube_apiserver(&c, &HostEnv::default());
    let etcd_vols: Vec<(&str, &str)> = api["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["name"].as_str().unwrap().starts_with("etcd-certs"))
        .map(|v| (v["name"].as_str().unwrap(), v["hostPath"]["path"].as_str().unwrap()))
        .collect();
    // /etc/etcd covers /etc/etcd/pki; /etc/pki/tls/certs is an optional CA dir, never mounted
    // for etcd even when absent on the host.
    assert_eq!(etcd_vols, [("etcd-certs-0", "/etc/etcd")]);
}

#[test]
fn startup_threshold_rounds_the_timeout_up() {
    let mut c = cfg("");
    c.control_plane_health_timeout = std::time::Duration::from_millis(240_500);
    assert_eq!(startup_threshold(&c), 25);
    c.control_plane_health_timeout = std::time::Duration::from_secs(240);
    assert_eq!(startup_threshold(&c), 24);
}
