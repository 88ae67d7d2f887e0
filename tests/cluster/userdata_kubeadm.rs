//! User-data that runs kubeadm (tests/fixtures/user-data/): Cluster API's control-plane and
//! worker bootstrap data booted unchanged but for endpoints (moved to free loopback ports),
//! hand-written `#cloud-config` with `runcmd: kubeadm ...`, and the corpus table: what
//! kubeadm accepts is accepted, what it refuses is refused with the field named. Which lines
//! kubeadm accepts is the real kubeadm v1.37.2's word (tests/common/kubeadm_oracle.rs), given the
//! line as the shell would split it and the files the user-data writes.

use crate::common::*;

use std::path::Path;

use crate::common::needs::need;
use kubestrap::datasource::{Gathered, MetaData};
use kubestrap::userdata::{NodePlan, plan_detailed};

const SENTINEL: &str = "run/cluster-api/bootstrap-success.complete";

pub(crate) fn seed(root: &Path, user_data: &str, hostname: &str) {
    let d = root.join("var/lib/cloud/seed/nocloud");
    write_file(&d.join("user-data"), user_data);
    write_file(&d.join("meta-data"), format!("instance-id: i-1\nlocal-hostname: {hostname}\n"));
    write_file(&root.join("etc/kubestrap/datasource"), "kubestrap.ds=nocloud\n");
}

pub(crate) fn boot(root: &Path, stage: &str) -> Run {
    let root = root.display().to_string();
    kubestrap(&["boot", "--stage", stage, "--root", &root, "--datasource-timeout", "3s"])
}

/// Cluster API's first control plane on loopback ports: the endpoint and the API server's bind
/// port moved to `port`, and the kubelet's healthz (a KubeletConfiguration document added to the
/// kubeadm config file) to `healthz`, so tests run side by side.
pub(crate) fn capi_init(port: u16, healthz: u16) -> String {
    let ud = fixture!("user-data/capi-control-plane-init/user-data");
    let kubelet = format!(
        "        taints: null\n      \n      ---\n      apiVersion: kubelet.config.k8s.io/v1beta1\n      kind: KubeletConfiguration\n      healthzPort: {healthz}\n"
    );
    let out = ud
        .replace("127.0.0.1:6443", &format!("127.0.0.1:{port}"))
        .replace(
            "localAPIEndpoint: {}",
            &format!("localAPIEndpoint: {{advertiseAddress: 127.0.0.1, bindPort: {port}}}"),
        )
        .replace("        taints: null\n      \n", &kubelet)
        // The controller-manager's and scheduler's ports moved too, so tests run side by side.
        .replace(
            "        - name: cloud-provider\n          value: external\n",
            &format!("        - name: cloud-provider\n          value: external\n        - name: secure-port\n          value: \"{port}\"\n"),
        )
        .replace("      scheduler: {}\n", &format!("      scheduler: {{extraArgs: [{{name: secure-port, value: \"{port}\"}}]}}\n"));
    assert_ne!(out, ud);
    out
}

#[test]
fn sentinel_is_written_only_when_the_init_succeeds() {
    let r0 = tempfile::tempdir().unwrap();
    let (port, healthz) = (free_port(), free_port());
    // A CA certificate that is not one: the init's certs phase refuses it.
    let ud = capi_init(port, healthz).replacen(
        "      -----BEGIN CERTIFICATE-----\n      MII",
        "      -----BEGIN CERTIFICATE-----\n      XXX",
        1,
    );
    seed(r0.path(), &ud, "cp-1");
    let r = boot(r0.path(), "pre-kubelet");
    assert_ne!(r.code(), 0, "{}", r.stderr());
    assert!(r.stderr().contains("ca.crt"), "{}", r.stderr());
    assert!(!r0.path().join(SENTINEL).exists());
    assert!(!r.stderr().contains("echo done") && !r.stdout().contains("echo done"));
}

/// Node name the corpus gives every fixture (meta-data's local-hostname).
const HOSTNAME: &str = "node-1";

/// A line's words as `sh` splits them, up to the end of its first simple command (`&&`, `;`,
/// `|`, a redirection or a comment). Backslashes, single and double quotes as sh reads them;
/// None for a line with an expansion (`$`, a backquote): no fixture's kubeadm line has one.
fn shell_words(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                cur.extend(chars.next());
                in_word = true;
            }
            '\'' => {
                in_word = true;
                cur.extend(chars.by_ref().take_while(|&n| n != '\''));
            }
            '"' => {
                in_word = true;
                while let Some(n) = chars.next() {
                    match n {
                        '"' => break,
                        '\\' if matches!(chars.peek(), Some('"' | '\\' | '$' | '`')) => cur.extend(chars.next()),
                        '$' | '`' => return None,
                        _ => cur.push(n),
                    }
                }
            }
            '$' | '`' => return None,
            ';' | '&' | '|' | '<' | '>' => break,
            '#' if !in_word => break,
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Some(words)
}

/// `%XX` decoded, as an Ignition `data:,` URL carries a file.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).expect("ascii");
            out.push(u8::from_str_radix(hex, 16).unwrap_or_else(|e| panic!("%{hex}: {e}")));
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("UTF-8")
}

/// The kubeadm invocation in user-data, read here independently of kubestrap's reader: its words
/// after `[sudo] kubeadm`, as the shell splits them, and the files the user-data writes
/// (path, text). Cloud-config: a runcmd line, write_files; Ignition: a line of /etc/kubeadm.sh
/// (Cluster API's), storage.files from `data:,` URLs. Jinja's `{{ ds.meta_data.local_hostname }}`
/// is rendered as cloud-init would.
fn kubeadm_invocation(ud: &str) -> (Vec<String>, Vec<(String, String)>) {
    let render = |t: &str| t.replace("{{ ds.meta_data.local_hostname }}", HOSTNAME);
    let (scripts, files): (Vec<String>, Vec<(String, String)>) = if ud.starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(ud).expect("Ignition JSON");
        let files: Vec<(String, String)> = v["storage"]["files"]
            .as_array()
            .expect("storage.files")
            .iter()
            .map(|f| {
                let src = f["contents"]["source"].as_str().expect("contents.source");
                let data = src.strip_prefix("data:,").unwrap_or_else(|| panic!("not a plain data: URL: {src}"));
                (f["path"].as_str().expect("path").to_string(), percent_decode(data))
            })
            .collect();
        let script = files.iter().find(|(p, _)| p == "/etc/kubeadm.sh").expect("/etc/kubeadm.sh").1.clone();
        (vec![script], files)
    } else {
        let v: serde_yaml::Value = serde_yaml::from_str(ud).expect("cloud-config YAML");
        let runcmd = v["runcmd"].as_sequence().expect("runcmd");
        let scripts = runcmd.iter().map(|c| c.as_str().expect("a runcmd string").to_string()).collect();
        let files = v["write_files"]
            .as_sequence()
            .map(|fs| {
                fs.iter()
                    .filter(|f| f.get("encoding").is_none())
                    .map(|f| (f["path"].as_str().expect("path").into(), f["content"].as_str().unwrap_or("").into()))
                    .collect()
            })
            .unwrap_or_default();
        (scripts, files)
    };
    let mut found = scripts
        .iter()
        .flat_map(|s| s.lines())
        .filter_map(|l| {
            let w = shell_words(l);
            assert!(
                w.is_some() || !(l.contains("kubeadm init") || l.contains("kubeadm join")),
                "an expansion in {l:?}"
            );
            w
        })
        .filter_map(|w| {
            let w = if w.first().map(String::as_str) == Some("sudo") { &w[1..] } else { &w[..] };
            (w.len() >= 2 && w[0] == "kubeadm" && (w[1] == "init" || w[1] == "join")).then(|| w[1..].to_vec())
        });
    let line = found.next().expect("a kubeadm init|join line");
    assert!(found.next().is_none(), "more than one kubeadm line");
    let line: Vec<String> = line.iter().map(|w| render(w)).collect();
    (line, files.into_iter().map(|(p, t)| (p, render(&t))).collect())
}

/// The arguments the real kubeadm gets: `--config` on the written file (copied into the
/// oracle's directory), the advertise address its namespace's own (it refuses loopback, and the
/// fixtures' endpoints are loopback already).
fn oracle_args(line: &[String], files: &[(String, String)]) -> (Vec<String>, Option<String>) {
    let mut out = Vec::new();
    let mut config = None;
    let mut it = line.iter();
    while let Some(a) = it.next() {
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if a.starts_with("--") => (n, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        match name {
            "--config" | "--apiserver-advertise-address" => {
                let v = inline.or_else(|| it.next().cloned()).unwrap_or_default();
                if name == "--config" {
                    let text = &files.iter().find(|(p, _)| *p == v).unwrap_or_else(|| panic!("{v} is not written")).1;
                    assert!(!text.contains("{{"), "an unrendered template in {v}");
                    config = Some(text.replace(
                        "advertiseAddress: 127.0.0.1",
                        &format!("advertiseAddress: {}", kubeadm_oracle::ADDR),
                    ));
                    out.push("--config={dir}/config.yaml".to_string());
                } else {
                    out.push(format!("{name}={}", kubeadm_oracle::ADDR));
                }
            }
            _ => out.push(a.clone()),
        }
    }
    (out, config)
}

#[test]
fn user_data_kubeadm_lines_are_read_as_the_shell_reads_them() {
    assert_eq!(
        shell_words(r#"sudo kubeadm init --a 1 \ --b "c d" 'e f' && echo x > y"#).unwrap(),
        ["sudo", "kubeadm", "init", "--a", "1", " --b", "c d", "e f"]
    );
    assert_eq!(shell_words("chown $(id -u) x"), None);
    let (line, _) = kubeadm_invocation(
        &std::fs::read_to_string(fixture_path("user-data/homelab-hetzner-docker/user-data")).unwrap(),
    );
    assert_eq!(line[..4], ["init", "--apiserver-advertise-address", "127.0.0.1", " --service-cidr"]);
    let (line, files) =
        kubeadm_invocation(&std::fs::read_to_string(fixture_path("user-data/ignition-capi-worker/user-data")).unwrap());
    assert_eq!(line, ["join", "--config", "/etc/kubeadm.yml", "--v=5"]);
    let (args, config) = oracle_args(&line, &files);
    assert_eq!(args, ["join", "--config={dir}/config.yaml", "--v=5"]);
    assert!(config.unwrap().contains("kind: JoinConfiguration"));
}

/// The corpus: every fixture planned as `kubestrap boot` plans it, with the expected outcome.
#[test]
fn user_data_corpus_accepted_and_refused_as_kubeadm_does() {
    need!(kubeadm_oracle::need());
    let cases: &[(&str, Result<&str, &str>)] = &[
        ("capi-control-plane-init", Ok("init")),
        ("capi-control-plane-join", Ok("join")),
        ("capi-worker", Ok("join")),
        // `kubeadm init` by flags alone: the flags build the documents, as `kubestrap init` does.
        // Cluster API's `format: ignition` (Ignition 2.3.0): the same files and script.
        ("ignition-capi-control-plane", Ok("init")),
        ("ignition-capi-worker", Ok("join")),
        // Cluster API's own expected render: `kubeadm join` with no discovery is no join.
        ("ignition-cabpk-render-test", Err("discovery: is missing")),
        ("homelab-crio-master", Ok("init")),
        ("homelab-crio-worker", Ok("join")),
        ("homelab-oci-flannel", Ok("init")),
        // kubeadm refuses the folded line (" --service-cidr" is an argument); so does kubestrap.
        ("homelab-hetzner-docker", Err("runcmd[7]")),
    ];
    let dir = fixture_path("user-data");
    let mut seen: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| dir.join(n).is_dir())
        .collect();
    seen.sort();
    let mut listed: Vec<String> = cases.iter().map(|(n, _)| n.to_string()).collect();
    listed.sort();
    assert_eq!(seen, listed, "every fixture has an expected outcome");
    // Fixtures where kubestrap's accept/refuse verdict is deliberately not kubeadm's (README's
    // differences tables), with why; each must still differ.
    let differs: &[(&str, &str)] = &[];
    let mut table = Vec::new();
    let mut failures = Vec::new();
    for (name, want) in cases {
        let ud = std::fs::read(dir.join(name).join("user-data")).unwrap();
        // Accepted or refused is the real kubeadm's word on the same line and files. What boot
        // then does with an accepted line (init or join, the script around it, the node name,
        // the flags in the documents) is kubestrap's own and stays checked below.
        let (line, files) = kubeadm_invocation(std::str::from_utf8(&ud).expect("UTF-8 user-data"));
        let (args, config) = oracle_args(&line, &files);
        let config: Vec<(&str, &str)> = config.iter().map(|c| ("config.yaml", c.as_str())).collect();
        let (accepts, why) = kubeadm_oracle::verdict(&args, &config);
        let difference = differs.iter().find(|(n, _)| n == name).map(|(_, r)| *r);
        match (accepts == want.is_ok(), difference) {
            (true, None) | (false, Some(_)) => {}
            (true, Some(reason)) => {
                failures.push(format!("{name}: records a difference ({reason}) but the real kubeadm agrees"))
            }
            (false, None) => failures.push(format!(
                "{name}: expected {want:?}, the real kubeadm v1.37.2 {} `kubeadm {}`: {why}",
                if accepts { "accepts" } else { "refuses" },
                args.join(" ")
            )),
        }
        table.push(format!("{name}: {want:?}; kubeadm: {why}"));
        let origin = std::fs::read_to_string(dir.join(name).join("ORIGIN")).unwrap();
        assert!(origin.contains('@') || origin.contains("commit"), "{name}: ORIGIN names a commit");
        let g = Gathered {
            source: "nocloud".into(),
            user_data: Some(ud),
            meta: MetaData {
                instance_id: Some("i-1".into()),
                local_hostname: Some("node-1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        match (plan_detailed(&g), want) {
            (Ok(p), Ok(kind)) => {
                assert_eq!(if p.plan.is_join() { "join" } else { "init" }, *kind, "{name}");
                let s = p.script.expect("the script around kubeadm");
                assert!(s.kubeadm.contains("kubeadm"), "{name}: {}", s.kubeadm);
                assert!(!s.kubeadm.contains(SECRET), "{name}: {}", s.kubeadm);
                match &p.plan {
                    NodePlan::Join { join } => assert_eq!(join.node_registration.name, "node-1", "{name}"),
                    NodePlan::Init { docs, .. } if name.starts_with("homelab") => {
                        // What the flags said is in the documents kubestrap will build from.
                        let cc = docs.cluster.as_ref().expect("ClusterConfiguration from the flags");
                        assert!(!cc.networking.pod_subnet.is_empty(), "{name}: --pod-network-cidr kept");
                    }
                    NodePlan::Init { .. } => {}
                }
            }
            (Err(e), Err(field)) => {
                let m = e.to_string();
                assert!(m.contains(field), "{name}: {m}");
                assert!(!m.contains(SECRET), "{name}: {m}");
                assert_eq!(kubestrap::error::Error::from(e).kind.exit_code(), 2, "{name}");
            }
            (Ok(_), Err(field)) => panic!("{name}: accepted, expected a refusal naming {field}"),
            (Err(e), Ok(_)) => panic!("{name}: refused: {e}"),
        }
    }
    println!("{}", table.join("\n"));
    assert!(failures.is_empty(), "{} disagreements with the real kubeadm:\n{}", failures.len(), failures.join("\n"));
}
