//! kubeadm's command-line spellings end to end: `--flag=value` and `--flag value`, init built
//! from flags alone, kubeadm's refusals (mixing with `--config`), usage errors (exit 2, token
//! never echoed) and help (exit 0, stdout).

use crate::common::needs::need;
use crate::common::*;

use serde_json::Value;

/// `init --on-disk-only` into a fresh scratch root with `flags` (no config file).
fn init_by_flags(flags: &[&str]) -> (Scratch, Run) {
    let s = Scratch::new("");
    let root = s.root_str();
    let mut args = vec!["init", "--on-disk-only", "--root", root.as_str()];
    args.extend_from_slice(flags);
    let r = kubestrap(&args);
    (s, r)
}

fn read(s: &Scratch, host: &str) -> String {
    std::fs::read_to_string(s.path(host)).unwrap_or_else(|e| panic!("{host}: {e}"))
}

#[test]
fn init_from_flags_alone_renders_what_the_flags_say() {
    let (s, r) = init_by_flags(&[
        "--apiserver-advertise-address=127.0.0.1",
        "--apiserver-bind-port",
        "7443",
        "--pod-network-cidr=10.244.0.0/16",
        "--service-cidr",
        "10.112.0.0/12",
        "--service-dns-domain=corp.internal",
        "--apiserver-cert-extra-sans=lb.example.com,10.0.0.99",
        "--apiserver-cert-extra-sans",
        "api.example.com",
        "--control-plane-endpoint=lb.example.com:7443",
        "--node-name=cp-flags",
        "--image-repository=registry.example.com/k8s",
        "--kubernetes-version=v1.36.2",
        "--cri-socket=unix:///run/containerd/containerd.sock",
    ]);
    r.ok();
    let apiserver = read(&s, "/etc/kubernetes/manifests/kube-apiserver.yaml");
    for want in [
        "--secure-port=7443",
        "--advertise-address=127.0.0.1",
        "--service-cluster-ip-range=10.112.0.0/12",
        "image: registry.example.com/k8s/kube-apiserver:v1.36.2",
    ] {
        assert!(apiserver.contains(want), "{want} missing:\n{apiserver}");
    }
    let cm = read(&s, "/etc/kubernetes/manifests/kube-controller-manager.yaml");
    assert!(cm.contains("--cluster-cidr=10.244.0.0/16"), "{cm}");
    let admin = read(&s, "/etc/kubernetes/admin.conf");
    assert!(admin.contains("server: https://lb.example.com:7443"), "{admin}");
    // kubeadm 1.33+ (KEP-4471): the kubelet of a control plane talks to its own API server.
    let kubelet_conf = read(&s, "/etc/kubernetes/kubelet.conf");
    assert!(kubelet_conf.contains("server: https://127.0.0.1:7443\n"), "{kubelet_conf}");
    let kubelet = read(&s, "/var/lib/kubelet/config.yaml");
    assert!(kubelet.contains("clusterDomain: corp.internal") && kubelet.contains("10.112.0.10"), "{kubelet}");
    let instance = read(&s, "/var/lib/kubelet/instance-config.yaml");
    assert_eq!(instance, "containerRuntimeEndpoint: \"unix:///run/containerd/containerd.sock\"\n");
    assert!(kubelet.contains("containerRuntimeEndpoint: unix:///run/containerd/containerd.sock"), "{kubelet}");
    let env = read(&s, "/var/lib/kubelet/kubeadm-flags.env");
    assert!(!env.contains("--container-runtime-endpoint") && !env.contains("--pod-infra-container-image"), "{env}");
    // The certificate's SANs as openssl reads them: the last check, so the rest runs without it.
    need!(needs::Need::tool("openssl"));
    let (code, sans, err) =
        sh(&format!("openssl x509 -noout -ext subjectAltName -in '{}'", s.pki("apiserver.crt").display()));
    assert_eq!(code, 0, "{err}");
    for want in ["DNS:lb.example.com", "DNS:api.example.com", "IP Address:10.0.0.99", "DNS:cp-flags"] {
        assert!(sans.contains(want), "{want} missing: {sans}");
    }
}

#[test]
fn equals_and_space_spellings_build_the_same_node() {
    let with_equals = [
        "--apiserver-advertise-address=127.0.0.1",
        "--pod-network-cidr=10.244.0.0/16",
        "--node-name=cp-1",
        "--ignore-preflight-errors=all",
        "--skip-phases=etcd",
    ];
    let (a, r) = init_by_flags(&with_equals);
    r.ok();
    let spaced: Vec<String> = with_equals.iter().flat_map(|f| f.split('=').map(str::to_string)).collect();
    let spaced: Vec<&str> = spaced.iter().map(String::as_str).collect();
    let (b, r) = init_by_flags(&spaced);
    r.ok();
    assert!(!a.path("/etc/kubernetes/manifests/etcd.yaml").exists(), "--skip-phases=etcd was not applied");
    for f in [
        "/etc/kubernetes/manifests/kube-apiserver.yaml",
        "/etc/kubernetes/manifests/kube-controller-manager.yaml",
        "/var/lib/kubelet/config.yaml",
        "/var/lib/kubelet/kubeadm-flags.env",
        "/var/lib/kubelet/instance-config.yaml",
    ] {
        assert_eq!(read(&a, f), read(&b, f), "{f} differs between the two spellings");
    }
}

/// The README's example: `--ignore-preflight-errors=all` (and kubeadm's `--v=5`) next to
/// `--config`, both of which kubeadm allows.
#[test]
fn readme_ignore_preflight_errors_example_runs() {
    let s = Scratch::new(BASE_CONFIG);
    s.init(&["--ignore-preflight-errors=all", "--v=5"]).ok();
    assert!(s.pki("ca.crt").exists());
}

#[test]
fn mixing_config_with_config_bound_flags_is_refused_like_kubeadm() {
    let s = Scratch::new(BASE_CONFIG);
    let r = s.init(&["--pod-network-cidr=10.244.0.0/16", "--token", TOKEN, "--dry-run"]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("can not mix '--config' with arguments [pod-network-cidr token]"), "{}", r.stderr());
    assert!(snapshot(&s.root()).is_empty());
    // kubeadm's allow list: node-name (overrides the file), skip-*, dry-run, ignore-preflight-errors.
    let r = s.init(&["--node-name=other", "--skip-token-print", "--dry-run=true"]).ok();
    let plan: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert!(plan["dryRun"].as_bool().unwrap());
    assert!(r.stderr().contains("svc.cluster.local other]"), "--node-name did not override the file:\n{}", r.stderr());

    let j = tempfile::tempdir().unwrap();
    let cfg = j.path().join("join.yaml");
    std::fs::write(&cfg, fill(fixture!("cluster-e2e/join.yaml"), &[("port", &1), ("hash", &"sha256:00")])).unwrap();
    let r = kubestrap(&["join", "--config", cfg.to_str().unwrap(), "--token", TOKEN, "--cri-socket", "/x"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("can not mix '--config' with arguments [cri-socket token]"), "{}", r.stderr());
}

#[test]
fn usage_errors_exit_2_and_never_echo_a_token() {
    for args in [
        &["join", "127.0.0.1:1", "--tokn=abcdef.0123456789abcdef"][..],
        &["join", "127.0.0.1:1", "--token=abcdef.0123456789abcdeX", "--dry-run"],
        &["join", "127.0.0.1:1", "--token", TOKEN, "--bogus", TOKEN],
        &["init", "--dry-run=maybe"],
        &["init", "--token=abcdef.0123456789abcdeX", "--dry-run", "--apiserver-advertise-address=127.0.0.1"],
        &["init", "--apiserver-bind-port=http"],
        &["init", "extra-word"],
    ] {
        let r = kubestrap(args);
        assert_eq!(r.code(), 2, "{args:?}:\n{}", r.stderr());
        for leak in ["0123456789abcde", "0123456789abcdeX"] {
            assert!(!r.stderr().contains(leak), "{args:?} echoed the token:\n{}", r.stderr());
        }
        assert!(r.stderr().contains("ERROR"), "{args:?}: {}", r.stderr());
    }
    let r = kubestrap(&["join", "127.0.0.1:1", "--tokn=abcdef.0123456789abcdef"]);
    assert!(r.stderr().contains("--tokn"), "the bad flag is named:\n{}", r.stderr());
}

#[test]
fn help_goes_to_stdout_with_exit_0() {
    for args in [&["--help"][..], &["init", "--help"], &["join", "--help"], &["help", "init"]] {
        let r = kubestrap(args).ok();
        assert!(r.stdout().contains("Usage: kubestrap"), "{args:?}: {}", r.stdout());
    }
    let r = kubestrap(&["init", "--help"]);
    for flag in ["--pod-network-cidr", "--control-plane-endpoint", "--token-ttl", "--skip-token-print"] {
        assert!(r.stdout().contains(flag), "{flag} not in init --help");
    }
}

#[test]
fn join_control_plane_flags_are_refused_or_kept_as_kubeadm_warns() {
    let base = ["join", "127.0.0.1:1", "--token", TOKEN, "--discovery-token-unsafe-skip-ca-verification", "--dry-run"];
    let s = Scratch::new("");
    let root = s.root_str();
    // A control-plane join is planned; a certificate key alone gets kubeadm's warning.
    let key = "ab".repeat(32);
    for extra in [&["--control-plane"][..], &["--certificate-key", &key]] {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--root", &root]);
        let r = kubestrap(&args).ok();
        assert_eq!(
            r.stderr().contains("--control-plane is also required"),
            extra[0] == "--certificate-key",
            "{}",
            r.stderr()
        );
    }
    let mut args = base.to_vec();
    args.extend_from_slice(&["--apiserver-advertise-address=10.0.0.5", "--apiserver-bind-port=7443", "--root", &root]);
    let r = kubestrap(&args).ok();
    assert!(r.stderr().contains("--control-plane is also required"), "{}", r.stderr());
}

#[test]
fn token_flags_make_kubeadms_default_token() {
    let s = Scratch::new("");
    let root = s.root_str();
    let r = kubestrap(&[
        "init",
        "--dry-run",
        "--root",
        &root,
        "--apiserver-advertise-address=127.0.0.1",
        "--token",
        TOKEN,
        "--token-ttl=2h",
    ])
    .ok();
    let plan: Value = serde_json::from_str(&r.stdout()).unwrap();
    let secret = plan["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "Secret")
        .unwrap_or_else(|| panic!("no Secret in the plan: {plan}"));
    assert_eq!(secret["name"], "bootstrap-token-abcdef");
    let data = &secret["object"]["data"];
    assert_eq!(data["token-secret"], "<redacted>");
    let b64 = |v: &Value| {
        let (code, out, _) = sh(&format!("printf %s '{}' | base64 -d", v.as_str().unwrap()));
        assert_eq!(code, 0);
        out
    };
    assert_eq!(b64(&data["description"]), "The default bootstrap token generated by 'kubeadm init'.");
    assert!(data["expiration"].is_string(), "--token-ttl=2h gives an expiration: {data}");
    assert_eq!(b64(&data["token-id"]), "abcdef");
}
