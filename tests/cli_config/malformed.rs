//! A corpus of broken configs (truncated YAML, wrong types, huge values, bad UTF-8, duplicate
//! keys, bad tokens, bad CIDRs, deep nesting): every one exits 2 with a message naming the
//! problem, never panics, and writes nothing.

mod common;
use common::*;

const INIT: &str = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n";
const CLUSTER: &str = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n";

fn doc(init_body: &str, cluster_body: &str) -> String {
    format!(
        "{INIT}nodeRegistration:\n  name: cp-1\nlocalAPIEndpoint:\n  advertiseAddress: 10.0.0.10\n{init_body}---\n{CLUSTER}{cluster_body}"
    )
}

/// (label, bytes, a word the error must contain)
fn corpus() -> Vec<(String, Vec<u8>, &'static str)> {
    let mut c: Vec<(String, Vec<u8>, &'static str)> = Vec::new();
    let mut add = |label: String, bytes: Vec<u8>, why: &'static str| c.push((label, bytes, why));

    // Truncated YAML: cut inside flow collections and quoted strings.
    let flowy = doc(
        "",
        "apiServer:\n  certSANs: [\"a.example.com\", \"10.0.0.1\", \"b.example.com\"]\nnetworking: {podSubnet: \"10.244.0.0/16\", serviceSubnet: \"10.96.0.0/12\"}\n",
    );
    let marks: Vec<usize> =
        flowy.char_indices().filter(|(_, ch)| *ch == '"' || *ch == ',').map(|(i, _)| i + 1).collect();
    for (n, cut) in marks.iter().enumerate().filter(|(n, _)| n % 2 == 0) {
        add(format!("truncated at byte {cut} ({n})"), flowy.as_bytes()[..*cut].to_vec(), "line");
    }
    // Wrong types, field by field.
    for (field, bad) in [
        ("kubernetesVersion", "[1, 2]"),
        ("controlPlaneEndpoint", "{a: b}"),
        ("certificatesDir", "[x]"),
        ("clusterName", "{}"),
        ("imageRepository", "[]"),
        ("encryptionAlgorithm", "{x: 1}"),
        ("networking", "\"10.0.0.0/8\""),
        ("apiServer", "[]"),
        ("etcd", "5"),
        ("featureGates", "[a]"),
        ("dns", "true"),
        ("proxy", "\"off\""),
        ("certificateValidityPeriod", "[1h]"),
        ("controllerManager", "\"x\""),
        ("scheduler", "7"),
    ] {
        add(format!("wrong type {field}"), doc("", &format!("{field}: {bad}\n")).into_bytes(), "invalid type");
    }
    for (field, bad) in [
        ("bootstrapTokens", "{token: x}"),
        ("nodeRegistration", "[]"),
        ("localAPIEndpoint", "\"x\""),
        ("skipPhases", "certs"),
        ("timeouts", "[]"),
        ("dryRun", "[]"),
    ] {
        add(format!("wrong type {field}"), format!("{INIT}{field}: {bad}\n").into_bytes(), "invalid type");
    }
    // Huge values.
    add(
        "huge node name".into(),
        format!("{INIT}nodeRegistration:\n  name: {}\n", "a".repeat(10_000)).into_bytes(),
        "node name",
    );
    add(
        "huge port".into(),
        format!("{INIT}localAPIEndpoint:\n  advertiseAddress: 10.0.0.1\n  bindPort: 100000000000000000000\n")
            .into_bytes(),
        "bindPort",
    );
    add(
        "huge duration".into(),
        doc("", "certificateValidityPeriod: 99999999999999h\n").into_bytes(),
        "certificateValidityPeriod",
    );
    add("huge file".into(), format!("{INIT}# {}\n", "x".repeat(2 << 20)).into_bytes(), "limit");
    add(
        "huge version".into(),
        doc("", "kubernetesVersion: v1.99999999999999999999.0\n").into_bytes(),
        "kubernetesVersion",
    );
    // Bad UTF-8 at several places.
    let good = doc("", "clusterName: kubernetes\n").into_bytes();
    for at in [0usize, 5, 40, 100, good.len() - 3] {
        let mut b = good.clone();
        b.insert(at, 0xff);
        b.insert(at, 0xc3);
        b[at] = 0xc3;
        b[at + 1] = 0x28;
        add(format!("bad utf-8 at {at}"), b, "UTF-8");
    }
    // Duplicate keys, at each level.
    for (label, body) in [
        ("top", "clusterName: a\nclusterName: b\n"),
        ("networking", "networking:\n  podSubnet: 10.244.0.0/16\n  podSubnet: 10.245.0.0/16\n"),
        ("apiServer", "apiServer:\n  certSANs: [a]\n  certSANs: [b]\n"),
        ("etcd.local", "etcd:\n  local:\n    dataDir: /a\n    dataDir: /b\n"),
        ("dns", "dns:\n  disabled: true\n  disabled: false\n"),
    ] {
        add(format!("duplicate key {label}"), doc("", body).into_bytes(), "duplicate");
    }
    add("duplicate kind".into(), format!("{INIT}---\n{INIT}").into_bytes(), "twice");
    // Bad tokens (the value is never echoed).
    for t in [
        "abc",
        "abcdef.0123",
        "ABCDEF.0123456789abcdef",
        "abcdef-0123456789abcdef",
        "abcdef.0123456789abcdef0",
        ".0123456789abcdef",
        "abcdef.",
        "abcdé.0123456789abcdef",
    ] {
        add(format!("bad token {t:?}"), format!("{INIT}bootstrapTokens:\n- token: \"{t}\"\n").into_bytes(), "token");
    }
    // Bad CIDRs and addresses.
    for (field, v) in [
        ("serviceSubnet", "10.96.0.0"),
        ("serviceSubnet", "10.96.0.0/33"),
        ("serviceSubnet", "10.96.0.0/-1"),
        ("serviceSubnet", "300.1.1.1/12"),
        ("serviceSubnet", "10.96.0.0/29"),
        ("serviceSubnet", "10.0.0.0/8"),
        ("serviceSubnet", "fd00::/64"),
        ("serviceSubnet", "10.96.0.0/12,10.97.0.0/16"),
        ("serviceSubnet", "/12"),
        ("podSubnet", "10.244.0.0/30"),
        ("podSubnet", "banana"),
        ("podSubnet", "10.96.0.0/16"),
        ("podSubnet", "::/129"),
        ("dnsDomain", "Cluster_Local"),
        ("dnsDomain", "-bad.local"),
    ] {
        add(
            format!("bad {field} {v}"),
            doc("", &format!("networking:\n  {field}: \"{v}\"\n")).into_bytes(),
            "networking",
        );
    }
    for ip in ["10.0.0.256", "0.0.0.0", "::", "224.0.0.1", "banana", "10.0.0.1/24", "1.2.3"] {
        add(
            format!("bad advertise address {ip}"),
            format!("{INIT}localAPIEndpoint:\n  advertiseAddress: \"{ip}\"\n").into_bytes(),
            "advertiseAddress",
        );
    }
    for ep in ["[fd00::1", "lb.example.com:0", "lb.example.com:http", "bad_host:6443", "a..b:6443"] {
        add(
            format!("bad endpoint {ep}"),
            doc("", &format!("controlPlaneEndpoint: \"{ep}\"\n")).into_bytes(),
            "controlPlaneEndpoint",
        );
    }
    for v in ["stable-1", "latest", "v1", "v1.37", "1.37.0.1", "v2.0.0", "v1.34.9", "v1.38.0"] {
        add(
            format!("bad version {v}"),
            doc("", &format!("kubernetesVersion: \"{v}\"\n")).into_bytes(),
            "kubernetesVersion",
        );
    }
    for d in ["1y", "1d", "-1h", "h", "1.2.3h", "10", "soon"] {
        add(
            format!("bad duration {d}"),
            doc("", &format!("caCertificateValidityPeriod: \"{d}\"\n")).into_bytes(),
            "caCertificateValidityPeriod",
        );
    }
    // Deep nesting.
    for depth in [200usize, 2000, 20000] {
        add(
            format!("nested sequences {depth}"),
            format!("{INIT}dryRun: {}{}\n", "[".repeat(depth), "]".repeat(depth)).into_bytes(),
            "document",
        );
        add(
            format!("nested mappings {depth}"),
            format!("{INIT}nodeRegistration: {}{}\n", "{a: ".repeat(depth), "}".repeat(depth)).into_bytes(),
            "document",
        );
    }
    // Structure.
    for (label, text) in [
        ("empty kind", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: \"\"\n".to_string()),
        ("number kind", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: 5\n".to_string()),
        ("list document", "- apiVersion: kubeadm.k8s.io/v1beta4\n".to_string()),
        ("scalar document", "hello\n".to_string()),
        ("v1beta3", "apiVersion: kubeadm.k8s.io/v1beta3\nkind: InitConfiguration\n".to_string()),
        ("unknown kind", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: NodeConfiguration\n".to_string()),
        (
            "bad kubelet version",
            format!("{INIT}---\napiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n"),
        ),
        ("tab indentation", format!("{INIT}nodeRegistration:\n\tname: x\n")),
        ("anchor loop", format!("{INIT}nodeRegistration: &a\n  name: *a\n")),
        ("unknown field", format!("{INIT}nodeRegistration:\n  nmae: x\n")),
        ("unknown top field", format!("{INIT}metadata:\n  name: x\n")),
        ("both etcds", doc("", "etcd:\n  local: {}\n  external: {endpoints: [\"https://1.2.3.4:2379\"]}\n")),
        ("relative certs dir", doc("", "certificatesDir: pki\n")),
        ("bad taint effect", format!("{INIT}nodeRegistration:\n  taints:\n  - key: a\n    effect: Sometimes\n")),
        ("bad pull policy", format!("{INIT}nodeRegistration:\n  imagePullPolicy: Often\n")),
        ("bad cri socket", format!("{INIT}nodeRegistration:\n  criSocket: tcp://1.2.3.4\n")),
        ("bad extra arg", doc("", "apiServer:\n  extraArgs:\n  - name: \"\"\n")),
        (
            "bad volume path type",
            doc("", "scheduler:\n  extraVolumes:\n  - {name: v, hostPath: /a, mountPath: /b, pathType: Folder}\n"),
        ),
        (
            "bad token group",
            format!("{INIT}bootstrapTokens:\n- token: abcdef.0123456789abcdef\n  groups: [system:nodes]\n"),
        ),
        (
            "ttl and expires",
            format!(
                "{INIT}bootstrapTokens:\n- token: abcdef.0123456789abcdef\n  ttl: 1h\n  expires: \"2030-01-01T00:00:00Z\"\n"
            ),
        ),
    ] {
        add(label.to_string(), text.into_bytes(), "");
    }
    c
}

#[test]
fn every_malformed_config_exits_2_with_a_reason_and_writes_nothing() {
    let corpus = corpus();
    assert!(corpus.len() >= 100, "the corpus has only {} files", corpus.len());
    let mut failures = Vec::new();
    for (label, bytes, why) in &corpus {
        let s = Scratch::new("");
        std::fs::write(s.config(), bytes).unwrap();
        let r = s.init(&[]);
        let err = r.stderr();
        if r.code() != 2 {
            failures.push(format!(
                "{label}: exit {} (want 2):\n{}",
                r.code(),
                err.chars().take(400).collect::<String>()
            ));
        } else if !err.contains("config.yaml") || (!why.is_empty() && !err.contains(why)) {
            failures.push(format!("{label}: message lacks {why:?}:\n{}", err.chars().take(400).collect::<String>()));
        } else if err.contains("panicked") {
            failures.push(format!("{label}: panicked"));
        }
        if !snapshot(&s.root()).is_empty() {
            failures.push(format!("{label}: wrote files"));
        }
        if label.starts_with("bad token") && err.contains("0123456789abcdef") {
            failures.push(format!("{label}: echoed the token secret"));
        }
    }
    println!("{} malformed configs checked", corpus.len());
    assert!(failures.is_empty(), "{} of {} failed:\n{}", failures.len(), corpus.len(), failures.join("\n---\n"));
}
