//! Kubeconfig files read back by the real `kubectl` (reference: kubeadm-facts.md section 7,
//! "Client certificates inside kubeconfig files").

use crate::common::needs::{Need, need};
use crate::common::{BASE_CONFIG, Scratch, fixture, kubectl, mode, sh};

const LOCAL_URL: &str = "https://10.0.0.10:6443";

/// (file, user = CN, organization, uses controlPlaneEndpoint?)
const FILES: [(&str, &str, Option<&str>, bool); 5] = [
    ("admin.conf", "kubernetes-admin", Some("kubeadm:cluster-admins"), true),
    ("super-admin.conf", "kubernetes-super-admin", Some("system:masters"), true),
    // kubeadm 1.33+ (KEP-4471): a control plane's kubelet talks to its own API server.
    ("kubelet.conf", "system:node:cp-1", Some("system:nodes"), false),
    ("controller-manager.conf", "system:kube-controller-manager", None, false),
    ("scheduler.conf", "system:kube-scheduler", None, false),
];

fn view(file: &str, extra: &[&str]) -> String {
    let mut args = vec!["config", "view", "--kubeconfig", file];
    args.extend_from_slice(extra);
    let (code, out, err) = kubectl(&args);
    assert_eq!(code, 0, "kubectl {args:?} failed:\n{out}\n{err}");
    out
}

fn b64decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s.trim()).expect("valid base64")
}

fn check_all(config: &str, cpe_url: Option<&str>) {
    need!(Need::tool("kubectl"));
    let s = Scratch::new(config);
    s.init(&[]).ok();
    let ca = std::fs::read(s.pki("ca.crt")).expect("read ca.crt");

    for (name, user, org, uses_cpe) in FILES {
        let path = s.path(&format!("/etc/kubernetes/{name}"));
        let file = path.display().to_string();
        let mode = mode(&path);
        assert_eq!(mode, 0o600, "{name}: mode {mode:o}");

        let json: serde_json::Value = serde_json::from_str(&view(&file, &["-o", "json"])).expect("kubectl json");
        let context = format!("{user}@kubernetes");
        assert_eq!(json["current-context"].as_str(), Some(context.as_str()), "{name}: current-context");

        let clusters = json["clusters"].as_array().expect("clusters");
        assert_eq!(clusters.len(), 1, "{name}: one cluster");
        assert_eq!(clusters[0]["name"].as_str(), Some("kubernetes"), "{name}: cluster name");
        let want_server = if uses_cpe { cpe_url.unwrap_or(LOCAL_URL) } else { LOCAL_URL };
        assert_eq!(clusters[0]["cluster"]["server"].as_str(), Some(want_server), "{name}: server");

        let users = json["users"].as_array().expect("users");
        assert_eq!(users.len(), 1, "{name}: one user");
        assert_eq!(users[0]["name"].as_str(), Some(user), "{name}: user name");

        let contexts = json["contexts"].as_array().expect("contexts");
        let ctx = contexts
            .iter()
            .find(|c| c["name"].as_str() == Some(context.as_str()))
            .unwrap_or_else(|| panic!("{name}: no context {context}: {contexts:?}"));
        assert_eq!(ctx["context"]["cluster"].as_str(), Some("kubernetes"), "{name}: context cluster");
        assert_eq!(ctx["context"]["user"].as_str(), Some(user), "{name}: context user");

        // The embedded CA is byte-for-byte the cluster CA (through kubectl's raw view and base64 -d).
        let (code, out, err) = sh(&format!(
            "set -o pipefail; KUBECONFIG= kubectl config view --raw --kubeconfig '{file}' --minify \
             -o jsonpath='{{.clusters[0].cluster.certificate-authority-data}}' | base64 -d"
        ));
        assert_eq!(code, 0, "{name}: extracting certificate-authority-data failed: {err}");
        assert_eq!(out.as_bytes(), ca.as_slice(), "{name}: certificate-authority-data differs from ca.crt");

        // The client certificate names the same user (CN) and group (O) as the reference table.
        let raw: serde_json::Value =
            serde_json::from_str(&view(&file, &["--raw", "-o", "json"])).expect("kubectl raw json");
        let cert_pem = b64decode(raw["users"][0]["user"]["client-certificate-data"].as_str().expect("client cert"));
        let key_pem = b64decode(raw["users"][0]["user"]["client-key-data"].as_str().expect("client key"));
        assert!(String::from_utf8_lossy(&key_pem).contains("PRIVATE KEY"), "{name}: client key is not PEM");
        let (_, pem) = x509_parser::pem::parse_x509_pem(&cert_pem).expect("client cert PEM");
        let cert = pem.parse_x509().expect("client cert DER");
        let cn: Vec<&str> = cert.subject().iter_common_name().map(|a| a.as_str().unwrap()).collect();
        assert_eq!(cn, vec![user], "{name}: client cert CN");
        let o: Vec<&str> = cert.subject().iter_organization().map(|a| a.as_str().unwrap()).collect();
        assert_eq!(o, org.into_iter().collect::<Vec<_>>(), "{name}: client cert O");
    }
}

#[test]
fn kubeconfigs_without_control_plane_endpoint_use_local_endpoint() {
    check_all(BASE_CONFIG, None);
}

#[test]
fn kubeconfigs_with_control_plane_endpoint() {
    check_all(fixture!("control-plane-endpoint/kubeadm.yaml"), Some("https://api.example.test:6443"));
}
