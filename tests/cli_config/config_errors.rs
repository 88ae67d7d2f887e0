//! Bad configs: each exits 2 with a message naming the document, the field and the problem,
//! and writes nothing.

use crate::common::*;

/// (case, config, substrings the error must contain)
fn cases() -> Vec<(&'static str, String, Vec<&'static str>)> {
    vec![
        (
            "unknown field",
            init_doc("nodeRegistraton:\n  name: x\n"),
            vec!["InitConfiguration", "unknown field `nodeRegistraton`"],
        ),
        (
            "unknown nested field",
            cluster_doc("networking:\n  podSubnett: 10.0.0.0/16\n"),
            vec!["networking.podSubnett", "unknown field"],
        ),
        (
            "duplicate key",
            cluster_doc("networking:\n  dnsDomain: a.b\n  dnsDomain: c.d\n"),
            vec!["ClusterConfiguration", "duplicate field `dnsDomain`", "line"],
        ),
        (
            "duplicate top-level key",
            cluster_doc("kubernetesVersion: v1.37.0\nkubernetesVersion: v1.36.0\n"),
            vec!["duplicate field `kubernetesVersion`"],
        ),
        (
            "wrong type",
            init_doc("localAPIEndpoint:\n  bindPort: abc\n"),
            vec!["localAPIEndpoint.bindPort", "invalid type: string \"abc\""],
        ),
        (
            "wrong type list",
            cluster_doc("networking:\n  serviceSubnet: [a]\n"),
            vec!["networking.serviceSubnet", "invalid type: sequence"],
        ),
        (
            "bad CIDR",
            cluster_doc("networking:\n  serviceSubnet: 10.96.0.0/33\n"),
            vec!["networking.serviceSubnet", "10.96.0.0/33", "prefix"],
        ),
        (
            "bad CIDR address",
            cluster_doc("networking:\n  podSubnet: 10.500.0.0/16\n"),
            vec!["networking.podSubnet", "10.500.0.0"],
        ),
        (
            "bad IP",
            init_doc("localAPIEndpoint:\n  advertiseAddress: 10.0.0.300\n"),
            vec!["localAPIEndpoint.advertiseAddress", "\"10.0.0.300\" is not an IP address"],
        ),
        (
            "bad port",
            init_doc("localAPIEndpoint:\n  advertiseAddress: 10.0.0.1\n  bindPort: 70000\n"),
            vec!["localAPIEndpoint.bindPort", "70000", "1-65535"],
        ),
        (
            "bad duration",
            cluster_doc("certificateValidityPeriod: 1y\n"),
            vec!["certificateValidityPeriod", "\"1y\" is not a duration"],
        ),
        (
            "bad timeout",
            init_doc("localAPIEndpoint:\n  advertiseAddress: 10.0.0.1\ntimeouts:\n  discovery: soon\n"),
            vec!["timeouts.discovery", "\"soon\""],
        ),
        ("bad version label", cluster_doc("kubernetesVersion: stable-0\n"), vec!["kubernetesVersion", "stable-0"]),
        (
            "unsupported version",
            cluster_doc("kubernetesVersion: v1.30.2\n"),
            vec!["kubernetesVersion", "v1.30.2 is not supported", "v1.36"],
        ),
        (
            "bad token format",
            init_doc("bootstrapTokens:\n- token: abcdef.0123456789ABCDEF\n"),
            vec!["bootstrapTokens[0].token", "bad token format"],
        ),
        (
            "bad token usage",
            init_doc("bootstrapTokens:\n- token: abcdef.0123456789abcdef\n  usages: [signing, everything]\n"),
            vec!["bootstrapTokens[0].usages[1]", "everything"],
        ),
        (
            "invalid node name",
            format!("{INIT_HEAD}nodeRegistration:\n  name: CP_1\n"),
            vec!["nodeRegistration.name", "\"cp_1\"", "RFC 1123"],
        ),
        (
            "service subnet too small",
            cluster_doc("networking:\n  serviceSubnet: 10.96.0.0/29\n"),
            vec!["networking.serviceSubnet", "too small", "8 addresses"],
        ),
        (
            "service subnet too large",
            cluster_doc("networking:\n  serviceSubnet: 10.0.0.0/8\n"),
            vec!["networking.serviceSubnet", "too large"],
        ),
        (
            "pod subnet smaller than a node's",
            cluster_doc("networking:\n  podSubnet: 10.244.0.0/25\n"),
            vec!["networking.podSubnet", "smaller than the size of node subnet with mask 24"],
        ),
        ("bad algorithm", cluster_doc("encryptionAlgorithm: DSA-1024\n"), vec!["encryptionAlgorithm", "DSA-1024"]),
        (
            "bad endpoint",
            cluster_doc("controlPlaneEndpoint: \"lb.example.com:99999\"\n"),
            vec!["controlPlaneEndpoint", "99999"],
        ),
        (
            "local and external etcd",
            cluster_doc("etcd:\n  local: {}\n  external:\n    endpoints: [https://1.2.3.4:2379]\n"),
            vec!["etcd", "not both"],
        ),
        (
            "nameless extra arg",
            cluster_doc("scheduler:\n  extraArgs:\n  - value: \"4\"\n"),
            vec!["scheduler.extraArgs[0].name", "argument has no name"],
        ),
        (
            "bad SAN",
            cluster_doc("apiServer:\n  certSANs: [\"lb_1.example.com\"]\n"),
            vec!["apiServer.certSANs[0]", "lb_1.example.com"],
        ),
        (
            "http etcd with TLS files",
            cluster_doc(
                "etcd:\n  external:\n    endpoints: [http://10.0.0.20:2379]\n    caFile: /e/ca.crt\n    certFile: /e/c.crt\n    keyFile: /e/c.key\n",
            ),
            vec!["etcd.external.endpoints[0]", "HTTPS"],
        ),
        (
            "feature gate kubeadm 1.37 removed",
            cluster_doc("featureGates:\n  NodeLocalCRISocket: true\n"),
            vec![
                "ClusterConfiguration",
                "featureGates: Invalid value: {\"NodeLocalCRISocket\":true}: NodeLocalCRISocket is not a valid feature name.",
                "kubeadm 1.37 removed it",
            ],
        ),
        (
            "feature gate kubeadm 1.35 removed",
            cluster_doc("featureGates:\n  RootlessControlPlane: false\n  WaitForAllControlPlaneComponents: true\n"),
            vec!["featureGates", "WaitForAllControlPlaneComponents is not a valid feature name."],
        ),
        (
            "httpEndpoints without a scheme",
            cluster_doc(
                "etcd:\n  external:\n    endpoints: [https://10.0.0.20:2379]\n    httpEndpoints: [\"10.0.0.20:2381\"]\n",
            ),
            vec![
                "etcd.external.httpEndpoints: Invalid value: \"10.0.0.20:2381\": URL parse error: parse \"10.0.0.20:2381\": first path segment in URL cannot contain colon",
            ],
        ),
        (
            "not a unix socket",
            format!("{INIT_HEAD}nodeRegistration:\n  criSocket: npipe:////./pipe/containerd\n"),
            vec!["nodeRegistration.criSocket", "only the URL scheme \"unix\""],
        ),
        ("missing kind", "apiVersion: kubeadm.k8s.io/v1beta4\n".into(), vec!["document 1", "kind", "missing"]),
        ("missing apiVersion", "kind: InitConfiguration\n".into(), vec!["document 1", "apiVersion", "missing"]),
        ("kind twice", format!("{INIT_HEAD}---\n{INIT_HEAD}"), vec!["InitConfiguration (document 2)", "appears twice"]),
        (
            "old api version",
            "apiVersion: kubeadm.k8s.io/v1beta2\nkind: InitConfiguration\n".into(),
            vec!["apiVersion", "v1beta2", "no longer supported", "kubestrap config migrate"],
        ),
        (
            "join configuration only",
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery: {}\n".into(),
            vec!["no InitConfiguration or ClusterConfiguration", "kubestrap join --config"],
        ),
        (
            "unknown kubeadm kind",
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: FooConfiguration\n".into(),
            vec!["kind", "FooConfiguration"],
        ),
        ("not yaml", ": : :\n".into(), vec!["document 1", "line 1"]),
        ("not a mapping", "- a\n- b\n".into(), vec!["document 1", "not a mapping"]),
        (
            "duplicate in passthrough",
            format!(
                "{INIT_HEAD}---\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\na: 1\na: 2\n"
            ),
            vec!["KubeletConfiguration", "duplicate"],
        ),
    ]
}

#[test]
fn bad_configs_exit_2_name_the_problem_and_write_nothing() {
    let mut failures = Vec::new();
    for (name, config, wants) in cases() {
        let s = Scratch::new(&config);
        let r = s.init(&[]);
        let err = r.stderr();
        if r.code() != 2 {
            failures.push(format!("{name}: exit {} (want 2)\n{err}", r.code()));
            continue;
        }
        for w in &wants {
            if !err.contains(w) {
                failures.push(format!("{name}: error lacks {w:?}:\n{err}"));
            }
        }
        if !err.contains("config.yaml") {
            failures.push(format!("{name}: error does not name the file:\n{err}"));
        }
        let written = snapshot(&s.root());
        if !written.is_empty() {
            failures.push(format!("{name}: wrote {} files", written.len()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n---\n"));
}

#[test]
fn token_secret_is_never_echoed_in_errors() {
    let s = Scratch::new(&init_doc("bootstrapTokens:\n- token: abcdef.SECRETSECRETSECR\n"));
    let r = s.init(&[]);
    assert_eq!(r.code(), 2);
    assert!(!r.stderr().contains("SECRETSECRETSECR") && !r.stdout().contains("SECRETSECRETSECR"), "{}", r.stderr());
}

#[test]
fn non_utf8_config_is_rejected() {
    let s = Scratch::new("");
    std::fs::write(s.config(), b"apiVersion: kubeadm.k8s.io/v1beta4\nkind: \xff\xfe\n").unwrap();
    let r = s.init(&[]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("not UTF-8"), "{}", r.stderr());
}

#[test]
fn missing_config_file_is_a_usage_error() {
    let r = kubestrap(&["init", "--config", "/nonexistent/kubestrap.yaml", "--root", "/tmp", "--dry-run"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("/nonexistent/kubestrap.yaml"), "{}", r.stderr());
}

#[test]
fn unknown_phase_and_skip_names_are_usage_errors() {
    let s = Scratch::new(BASE_CONFIG);
    let r = s.phase("certz");
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("certz"));
    let r = s.init(&["--skip-phases", "etcd,kubeconfg"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("kubeconfg"), "{}", r.stderr());
    assert!(snapshot(&s.root()).is_empty());
}

#[test]
fn unknown_groups_are_ignored_with_a_warning() {
    let s = Scratch::new(&format!("{BASE_CONFIG}---\napiVersion: example.com/v1\nkind: Thing\nspec: 1\n"));
    let r = s.init(&["--dry-run"]).ok();
    assert!(
        r.stderr().contains("ignored configuration document") && r.stderr().contains("example.com/v1"),
        "{}",
        r.stderr()
    );
}
