use super::*;

fn exchange(method: &'static str, path: &str, who: &str, body: Value, status: u16, answer: Value) -> Exchange {
    Exchange { method, path: path.into(), who: who.into(), body, status, answer }
}

#[test]
fn reads_once_changes_accepted_and_who_sent_them() {
    let cm = json!({"kind": "ConfigMap", "metadata": {"name": "cluster-info", "namespace": "kube-public"}});
    let csr = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                     "metadata": {"name": "node-csr-x"}});
    let csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let pods = json!({"kind": "PodList", "items": []});
    let binding = json!({"kind": "ClusterRoleBinding", "metadata": {"name": "b"}});
    let log = [
        exchange("GET", CLUSTER_INFO, "system:anonymous", Value::Null, 200, cm.clone()),
        exchange("GET", CLUSTER_INFO, "system:anonymous", Value::Null, 200, cm),
        exchange("POST", csrs, "bootstrap token abcdef", csr.clone(), 201, csr.clone()),
        exchange("GET", &format!("{csrs}/node-csr-x"), "bootstrap token abcdef", Value::Null, 200, csr.clone()),
        exchange(
            "WATCH",
            &format!("{csrs}?fieldSelector=metadata.name%3Dnode-csr-x"),
            "bootstrap token abcdef",
            Value::Null,
            200,
            csr,
        ),
        exchange(
            "GET",
            "/api/v1/namespaces/kube-system/pods?labelSelector=x",
            "client certificate admin",
            Value::Null,
            200,
            pods,
        ),
        exchange(
            "POST",
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            "client certificate admin",
            binding,
            409,
            Value::Null,
        ),
        exchange("GET", "/livez", "system:anonymous", Value::Null, 200, json!("ok")),
    ];
    let got: Vec<String> = requests(&log)
        .iter()
        .map(|r| format!("{} {} {} {} {} as {}", r.verb, r.kind, r.namespace, r.name, r.path, r.identity))
        .collect();
    assert_eq!(
        got,
        [
            format!("get ConfigMap kube-public cluster-info {CLUSTER_INFO} as anonymous"),
            format!("create CertificateSigningRequest  node-csr-x {csrs} as bootstrap token"),
            format!("watch CertificateSigningRequest  node-csr-x {csrs} as bootstrap token"),
            "list Pod kube-system  /api/v1/namespaces/kube-system/pods?labelSelector=x as admin.conf".to_string(),
        ]
    );
}

#[test]
fn files_are_described_by_the_phase_that_wrote_them() {
    let args = JoinArgs {
        control_plane: None,
        discovery: None,
        node_name: "w".into(),
        hostname: "w".into(),
        cri_socket: String::new(),
        ca_cert_path: String::new(),
        kubelet_extra_args: Vec::new(),
        taints: Vec::new(),
        discovery_timeout: std::time::Duration::ZERO,
        tls_bootstrap_timeout: std::time::Duration::ZERO,
        kubelet_health_timeout: std::time::Duration::ZERO,
        control_plane_health_timeout: std::time::Duration::ZERO,
        timeouts: None,
        ignore_preflight: Vec::new(),
        patches: None,
    };
    let bundle = paths::kubelet_client_bundle("2026-01-02-03-04-05");
    let f = describe_file(&args, "kubelet-start", bundle.as_str(), "0600").unwrap();
    assert_eq!(f.path, "/var/lib/kubelet/pki/kubelet-client-<timestamp>.pem");
    assert!(describe_file(&args, "kubelet-start", paths::KUBELET_CLIENT_KEY_TMP.as_str(), "0600").is_none());
    let f = describe_file(&args, "control-plane-prepare/certs", "/etc/kubernetes/pki/etcd/peer.key", "0600").unwrap();
    assert_eq!(f.content, "a new key for etcd/peer");
    let f = describe_file(&args, "control-plane-prepare/download-certs", "/etc/kubernetes/pki/etcd/ca.key", "0600");
    assert_eq!(f.unwrap().content, "decrypted from the kubeadm-certs Secret's etcd-ca.key entry");
}
