//! A corpus of broken configs (truncated YAML, wrong types, huge values, bad UTF-8, duplicate
//! keys, bad tokens, bad CIDRs, deep nesting): every one exits 2 with a message naming the
//! problem, never panics, and writes nothing.

use crate::common::*;

/// (label, bytes, a word the error must contain)
fn corpus() -> Vec<(String, Vec<u8>, &'static str)> {
    let mut c: Vec<(String, Vec<u8>, &'static str)> = Vec::new();
    let mut add = |label: String, bytes: Vec<u8>, why: &'static str| c.push((label, bytes, why));

    // Truncated YAML: cut inside flow collections and quoted strings.
    let flowy = fixture!("malformed/flow-collections.yaml");
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
        add(format!("wrong type {field}"), cluster_doc(&format!("{field}: {bad}\n")).into_bytes(), "invalid type");
    }
    for (field, bad) in [
        ("bootstrapTokens", "{token: x}"),
        ("nodeRegistration", "[]"),
        ("localAPIEndpoint", "\"x\""),
        ("skipPhases", "certs"),
        ("timeouts", "[]"),
        ("dryRun", "[]"),
    ] {
        add(format!("wrong type {field}"), format!("{INIT_HEAD}{field}: {bad}\n").into_bytes(), "invalid type");
    }
    // Huge values.
    add(
        "huge node name".into(),
        format!("{INIT_HEAD}nodeRegistration:\n  name: {}\n", "a".repeat(10_000)).into_bytes(),
        "node name",
    );
    add(
        "huge port".into(),
        format!("{INIT_HEAD}localAPIEndpoint:\n  advertiseAddress: 10.0.0.1\n  bindPort: 100000000000000000000\n")
            .into_bytes(),
        "bindPort",
    );
    add(
        "huge duration".into(),
        cluster_doc("certificateValidityPeriod: 99999999999999h\n").into_bytes(),
        "certificateValidityPeriod",
    );
    add("huge file".into(), format!("{INIT_HEAD}# {}\n", "x".repeat(2 << 20)).into_bytes(), "limit");
    add(
        "huge version".into(),
        cluster_doc("kubernetesVersion: v1.99999999999999999999.0\n").into_bytes(),
        "kubernetesVersion",
    );
    // Bad UTF-8 at several places.
    let good = cluster_doc("clusterName: kubernetes\n").into_bytes();
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
        add(format!("duplicate key {label}"), cluster_doc(body).into_bytes(), "duplicate");
    }
    add("duplicate kind".into(), format!("{INIT_HEAD}---\n{INIT_HEAD}").into_bytes(), "twice");
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
        add(
            format!("bad token {t:?}"),
            format!("{INIT_HEAD}bootstrapTokens:\n- token: \"{t}\"\n").into_bytes(),
            "token",
        );
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
        ("podSubnet", "10.244.0.0/25"),
        ("podSubnet", "10.0.0.0/7"),
        ("podSubnet", "::/129"),
        ("dnsDomain", "Cluster_Local"),
        ("dnsDomain", "-bad.local"),
    ] {
        add(
            format!("bad {field} {v}"),
            cluster_doc(&format!("networking:\n  {field}: \"{v}\"\n")).into_bytes(),
            "networking",
        );
    }
    for ip in ["10.0.0.256", "banana", "10.0.0.1/24", "1.2.3"] {
        add(
            format!("bad advertise address {ip}"),
            format!("{INIT_HEAD}localAPIEndpoint:\n  advertiseAddress: \"{ip}\"\n").into_bytes(),
            "advertiseAddress",
        );
    }
    for ep in ["[fd00::1", "lb.example.com:0", "lb.example.com:http", "bad_host:6443", "a..b:6443"] {
        add(
            format!("bad endpoint {ep}"),
            cluster_doc(&format!("controlPlaneEndpoint: \"{ep}\"\n")).into_bytes(),
            "controlPlaneEndpoint",
        );
    }
    for v in ["stable-0", "latest-1.x", "v1", "v1.37", "1.37.0.1", "v2.0.0", "v1.34.9", "v1.38.0"] {
        add(
            format!("bad version {v}"),
            cluster_doc(&format!("kubernetesVersion: \"{v}\"\n")).into_bytes(),
            "kubernetesVersion",
        );
    }
    for d in ["1y", "1d", "-1h", "h", "1.2.3h", "10", "soon"] {
        add(
            format!("bad duration {d}"),
            cluster_doc(&format!("caCertificateValidityPeriod: \"{d}\"\n")).into_bytes(),
            "caCertificateValidityPeriod",
        );
    }
    // Deep nesting.
    for depth in [200usize, 2000, 20000] {
        add(
            format!("nested sequences {depth}"),
            format!("{INIT_HEAD}dryRun: {}{}\n", "[".repeat(depth), "]".repeat(depth)).into_bytes(),
            "document",
        );
        add(
            format!("nested mappings {depth}"),
            format!("{INIT_HEAD}nodeRegistration: {}{}\n", "{a: ".repeat(depth), "}".repeat(depth)).into_bytes(),
            "document",
        );
    }
    // Structure: whole documents, one file each (the label is the file name).
    let dir = fixture_path("malformed/structure");
    let mut files: Vec<_> = std::fs::read_dir(&dir).expect("malformed/structure").map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 20, "{} holds only {} files", dir.display(), files.len());
    for f in files {
        let label = f.file_stem().unwrap().to_string_lossy().replace('-', " ");
        add(label, std::fs::read(&f).unwrap(), "");
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
