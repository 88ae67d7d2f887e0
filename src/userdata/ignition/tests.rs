//! Ignition user-data: Cluster API's rendered form (tests/fixtures/user-data/ignition-*), 3.x
//! data URLs, references, units, refusals.

use base64::Engine;
use serde_json::{Value, json};
use sha2::Digest;

use super::super::test_support::*;
use super::*;
use crate::userdata::{BootPlan, NodePlan, Planned, plan_detailed};

const CP: &str = include_str!("../../../tests/fixtures/user-data/ignition-capi-control-plane/user-data");
const WORKER: &str = include_str!("../../../tests/fixtures/user-data/ignition-capi-worker/user-data");

/// A percent-encoded `data:,` URL, as Cluster API's transpiler writes them.
fn pct(s: &str) -> String {
    let enc: String = s
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    format!("data:,{enc}")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

const JOIN_YML: &str = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    \
     apiServerEndpoint: 127.0.0.1:6443\n    token: abcdef.0123456789abcdef\n    unsafeSkipCAVerification: true\n";

fn kubeadm_sh(pre: &str, post: &str) -> String {
    format!(
        "#!/bin/bash\nset -e\n{pre}\nkubeadm join --config /etc/kubeadm.yml\n{}\n{}\n{post}",
        kubeadm_sh::SENTINEL_LINE,
        kubeadm_sh::MOVE_LINE
    )
}

/// A 2.x worker config with this pre block and kubeadm.yml.
fn v2(pre: &str, yml: &str) -> Value {
    json!({"ignition": {"version": "2.3.0"}, "storage": {"files": [
        {"filesystem": "root", "path": "/etc/kubeadm.sh", "mode": 448, "contents": {"source": pct(&kubeadm_sh(pre, ""))}},
        {"filesystem": "root", "path": "/etc/kubeadm.yml", "mode": 384, "contents": {"source": pct(yml)}}]}})
}

fn run(v: &Value) -> Result<Planned, ConfigError> {
    plan_detailed(&gathered(&v.to_string()))
}

fn err(v: &Value) -> String {
    run(v).unwrap_err().to_string()
}

fn file<'a>(p: &'a Planned, path: &str) -> Option<&'a WriteFile> {
    p.script.as_ref().unwrap().files.iter().rev().find(|f| f.path == path)
}

#[test]
fn ignition_cluster_api_control_plane_plans_init_with_its_documents() {
    let p = plan_detailed(&gathered(CP)).unwrap();
    let s = p.script.clone().unwrap();
    let NodePlan::Init { docs, upload_certs, .. } = &p.plan else { panic!("{:?}", p.plan) };
    assert!(!upload_certs);
    assert_eq!(docs.cluster.as_ref().unwrap().cluster_name, "ign-test");
    assert_eq!(docs.init.as_ref().unwrap().bootstrap_tokens[0].token, TOKEN);
    // The CA key is written as given; kubeadm.sh is performed, not written; sudoers of an
    // ignored user is not written.
    let key = file(&p, "/etc/kubernetes/pki/ca.key").unwrap();
    assert_eq!((key.mode, key.owner.as_str()), (0o600, "root:root"));
    assert!(String::from_utf8_lossy(&key.content).starts_with("-----BEGIN RSA PRIVATE KEY-----\n"));
    assert_eq!(file(&p, "/etc/kubeadm.yml").unwrap().mode, 0o600);
    assert!(file(&p, "/etc/kubeadm.sh").is_none() && file(&p, "/etc/sudoers.d/core").is_none());
    // The pre block is one bash -e command with its heredoc kept whole.
    assert_eq!(s.before.len(), 1, "{:?}", s.before);
    let Action::Shell(pre) = &s.before[0].action else { panic!() };
    assert!(
        pre.starts_with("exec bash -e -c '") && pre.contains("cat <<EOF > /etc/modules-load.d/k8s.conf\noverlay\n")
    );
    assert!(pre.contains("modprobe br_netfilter\n'") && !pre.contains("kubeadm"), "{pre}");
    assert_eq!(s.kubeadm, "/etc/kubeadm.sh:10: kubeadm init --config /etc/kubeadm.yml");
    // After: the sentinel (only once kubeadm succeeded), the move, the post block.
    let after: Vec<String> = s.after.iter().map(|c| c.action.to_string()).collect();
    assert_eq!(
        after[..3],
        [
            "mkdir -p /run/cluster-api",
            "echo success > /run/cluster-api/bootstrap-success.complete",
            "mv /etc/kubeadm.yml /tmp/"
        ]
    );
    assert!(after[3].contains("echo '\\''control plane up'\\'' > /var/log/capi-post.log"), "{}", after[3]);
    for want in ["passwd: ignored", "unit kubeadm.service ignored", "carries private keys", "networkd: ignored"] {
        assert!(p.notices.iter().any(|n| n.contains(want)), "{want}: {:?}", p.notices);
    }
    assert!(!p.notices.iter().any(|n| n.contains("0123456789abcdef")), "{:?}", p.notices);
}

#[test]
fn ignition_cluster_api_worker_joins_and_merges_a_unit_given_twice() {
    let p = plan_detailed(&gathered(WORKER)).unwrap();
    let j = join_of(p.clone());
    assert_eq!(j.discovery.bootstrap_token.unwrap().token, TOKEN);
    assert_eq!(j.node_registration.taints.unwrap()[0].key, "node.cluster.x-k8s.io/uninitialized");
    let s = p.script.clone().unwrap();
    assert!(file(&p, "/etc/systemd/system/containerd-tune.service").is_some());
    let dropin = file(&p, "/etc/systemd/system/containerd-tune.service.d/10-after.conf").unwrap();
    assert_eq!(dropin.content, b"[Unit]\nAfter=containerd.service\n");
    assert!(file(&p, "/etc/systemd/system/var-lib-data.mount").is_none());
    assert!(file(&p, "/etc/systemd/system/kubeadm.service.d/10-flatcar.conf").is_none());
    let before: Vec<String> = s.before.iter().map(|c| c.action.to_string()).collect();
    assert_eq!(before[..2], ["systemctl daemon-reload", "systemctl enable --now --no-block containerd-tune.service"]);
    assert_eq!(file(&p, "/etc/motd").unwrap().mode, 0o644);
    for want in ["var-lib-data.mount ignored", "storage.disks: ignored", "verbosity flag ignored"] {
        assert!(p.notices.iter().any(|n| n.contains(want)), "{want}: {:?}", p.notices);
    }
    // No post block: nothing after the move.
    assert_eq!(s.after.len(), 3);
    // Gzip-compressed user-data (EC2 allows it) is the same config.
    let mut g = gathered("");
    g.user_data = Some(gz(WORKER.as_bytes()));
    assert!(plan_detailed(&g).unwrap().plan.is_join());
    // meta-data's local-hostname names the node, as for cloud-config.
    let mut g = gathered(WORKER);
    g.meta.local_hostname = Some("node-1".into());
    assert_eq!(join_of(plan_detailed(&g).unwrap()).node_registration.name, "node-1");
}

#[test]
fn ignition_plan_file_keeps_only_the_post_kubelet_script() {
    let p = plan_detailed(&gathered(CP)).unwrap();
    let text = BootPlan { node: p.plan, script: p.script.clone() }.to_yaml().unwrap();
    assert!(!text.contains("PRIVATE KEY") && !text.contains("modprobe"), "{text}");
    let back = BootPlan::from_yaml(text.as_bytes()).unwrap().script.unwrap();
    assert!(back.files.is_empty() && back.before.is_empty());
    assert_eq!(back.after, p.script.unwrap().after);
}

#[test]
fn ignition_v3_base64_and_gzip_data_urls_and_append() {
    let sh = kubeadm_sh("echo pre", "echo post");
    let v = json!({"ignition": {"version": "3.4.0"}, "storage": {"files": [
        {"path": "/etc/kubeadm.sh", "mode": 448, "contents": {"compression": "gzip", "source": format!("data:;base64,{}", b64(&gz(sh.as_bytes())))}},
        {"path": "/etc/kubeadm.yml", "contents": {"source": format!("data:text/plain;charset=utf-8;base64,{}", b64(JOIN_YML.as_bytes()))}},
        {"path": "/etc/motd", "overwrite": true, "user": {"id": 1000}, "group": {"name": "core"},
         "append": [{"source": "data:,more%0A"}]}]}});
    let p = run(&v).unwrap();
    assert!(join_of(p.clone()).discovery.bootstrap_token.unwrap().unsafe_skip_ca_verification);
    let motd: Vec<&WriteFile> = p.script.as_ref().unwrap().files.iter().filter(|f| f.path == "/etc/motd").collect();
    assert_eq!(motd.len(), 2);
    assert_eq!(
        (motd[0].content.as_slice(), motd[0].append, motd[0].owner.as_str()),
        (b"".as_slice(), false, "1000:core")
    );
    assert_eq!((motd[1].content.as_slice(), motd[1].append), (b"more\n".as_slice(), true));
    // 3.x's append is a list; a bool is 2.x's.
    let mut bad = v.clone();
    bad["storage"]["files"][2]["append"] = json!(true);
    assert!(err(&bad).contains("storage.files[2].append: must be a list"), "{}", err(&bad));
}

#[test]
fn ignition_data_urls_decode_as_rfc_2397() {
    assert_eq!(resource::source("data:,a%20b%0A+c").unwrap(), b"a b\n+c");
    assert_eq!(resource::source("data:text/plain;base64,aGk%3D").unwrap(), b"hi");
    assert!(resource::source("data:,100%").unwrap_err().contains("percent escape"));
    assert!(resource::source("data:;base64,!!").unwrap_err().contains("not base64"));
    assert!(resource::source("data:nocomma").unwrap_err().contains("','"));
    let mut v = v2("", JOIN_YML);
    v["storage"]["files"][1]["contents"]["compression"] = json!("xz");
    assert!(err(&v).contains("storage.files[1].contents.compression: \"xz\""), "{}", err(&v));
    v["storage"]["files"][1]["contents"]["compression"] = json!(null);
    v["storage"]["files"][1]["filesystem"] = json!("oem");
    assert!(err(&v).contains("storage.files[1].filesystem: \"oem\""), "{}", err(&v));
    v["storage"]["files"][1]["filesystem"] = json!("root");
    v["storage"]["files"][1]["append"] = json!([]);
    assert!(err(&v).contains("storage.files[1].append: must be true or false in spec 2.x"), "{}", err(&v));
    v["storage"]["files"][1]["append"] = json!(false);
    v["storage"]["files"][1]["mode"] = json!(-1);
    assert!(err(&v).contains("storage.files[1].mode") && err(&v).contains("decimal"), "{}", err(&v));
}

#[test]
fn ignition_many_small_gzip_files_are_bounded_together() {
    let zeros = format!("data:;base64,{}", b64(&gz(&vec![0u8; 1 << 20])));
    let mut v = v2("", JOIN_YML);
    let files = v["storage"]["files"].as_array_mut().unwrap();
    files.extend(
        (0..40).map(|i| json!({"path": format!("/z{i}"), "contents": {"source": zeros, "compression": "gzip"}})),
    );
    let e = err(&v);
    assert!(e.contains("storage.files[33]: brings the files' contents past 33554432 bytes"), "{e}");
}

#[test]
fn ignition_versions_and_json_that_is_not_ignition() {
    for (version, ok) in [
        ("2.3.0", true),
        ("3.0.0", true),
        ("3.5.0-experimental", true),
        ("1.0.0", false),
        ("4.0.0", false),
        ("3", false),
    ] {
        let mut v = v2("", JOIN_YML);
        v["ignition"]["version"] = json!(version);
        match run(&v) {
            Ok(_) => assert!(ok, "{version}"),
            Err(e) => {
                let e = e.to_string();
                assert!(!ok && e.contains("ignition.version") && e.contains(&format!("{version:?}")), "{version}: {e}");
            }
        }
    }
    let e = plan_detailed(&gathered("{\"storage\": {}}")).unwrap_err().to_string();
    assert!(e.contains("JSON object without ignition.version"), "{e}");
    // A kubeadm document written as JSON is still a kubeadm document.
    let kd = json!({"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "InitConfiguration"});
    assert!(matches!(plan_detailed(&gathered(&kd.to_string())).unwrap().plan, NodePlan::Init { .. }));
    let e = err(&v2("", JOIN_YML).tap(|v| v["storage"]["files"][1]["path"] = json!("/etc/other.yml")));
    assert!(e.contains("/etc/kubeadm.sh:4") && e.contains("no storage.files entry writes that file"), "{e}");
    let e = err(&json!({"ignition": {"version": "3.4.0"}}));
    assert!(e.contains("without Cluster API's /etc/kubeadm.sh"), "{e}");
    let e = err(&v2("", JOIN_YML)
        .tap(|v| v["storage"]["files"][0]["contents"]["source"] = json!(pct("#!/bin/bash\nkubeadm join\n"))));
    assert!(e.contains("storage.files[0] (/etc/kubeadm.sh)") && e.contains("set -e"), "{e}");
}

/// `v` changed in place, for one-line variations.
trait Tap: Sized {
    fn tap(self, f: impl FnOnce(&mut Self)) -> Self;
}

impl Tap for Value {
    fn tap(mut self, f: impl FnOnce(&mut Self)) -> Self {
        f(&mut self);
        self
    }
}

#[test]
fn ignition_remote_sources_are_refused_with_advice() {
    let v =
        v2("", JOIN_YML).tap(|v| v["storage"]["files"][1]["contents"]["source"] = json!("https://example.com/k.yml"));
    let e = err(&v);
    assert!(
        e.contains("storage.files[1].contents.source") && e.contains("remote https://") && e.contains("data: URL"),
        "{e}"
    );
    // CAPA's stub: the whole config in S3.
    let stub = json!({"ignition": {"version": "2.3.0", "config": {"append": [{"source": "s3://bucket/node/abc"}]}}});
    let e = err(&stub);
    assert!(e.contains("ignition.config.append[0].source") && e.contains("storageType: UnencryptedUserData"), "{e}");
    let gs = json!({"ignition": {"version": "3.4.0", "config": {"replace": {"source": "gs://b/o"}}}});
    assert!(err(&gs).contains("ignition.config.replace.source: is a remote gs://"), "{}", err(&gs));
}

#[test]
fn ignition_config_references_merge_replace_and_check_hashes() {
    let child = v2("", JOIN_YML).tap(|v| {
        v["storage"]["files"]
            .as_array_mut()
            .unwrap()
            .push(json!({"filesystem": "root", "path": "/etc/motd", "contents": {"source": "data:,child%0A"}}))
    });
    let child_text = child.to_string();
    let sha512 = format!("sha512-{}", hex(&sha2::Sha512::digest(child_text.as_bytes())));
    let sha256 = format!("sha256-{}", hex(&sha2::Sha256::digest(child_text.as_bytes())));
    let parent = |hash: &str, how: &str| {
        let r =
            json!({"source": format!("data:;base64,{}", b64(child_text.as_bytes())), "verification": {"hash": hash}});
        let refs = if how == "replace" { json!({"replace": r}) } else { json!({how: [r]}) };
        json!({"ignition": {"version": if how == "merge" { "3.3.0" } else { "2.3.0" }, "config": refs},
               "storage": {"files": [{"path": "/etc/motd", "contents": {"source": "data:,parent%0A"}}]}})
    };
    // append/merge: the parent's files, then the referenced config's (the later wins when written).
    for (hash, how) in [(sha512.as_str(), "append"), (sha256.as_str(), "merge")] {
        let p = run(&parent(hash, how)).unwrap();
        let motd: Vec<&[u8]> = p
            .script
            .as_ref()
            .unwrap()
            .files
            .iter()
            .filter(|f| f.path == "/etc/motd")
            .map(|f| f.content.as_slice())
            .collect();
        assert_eq!(motd, [b"parent\n".as_slice(), b"child\n"], "{how}");
    }
    // replace: the parent's own files are not read.
    let p = run(&parent(&sha512, "replace")).unwrap();
    assert_eq!(file(&p, "/etc/motd").unwrap().content, b"child\n");
    let wrong = format!("sha512-{}", "0".repeat(128));
    let e = err(&parent(&wrong, "append"));
    assert!(e.contains("ignition.config.append[0].verification.hash: does not match"), "{e}");
    let e = err(&parent("md5-00", "append"));
    assert!(e.contains("\"md5\" is not a hash"), "{e}");
    // A bounded number of references.
    let many: Vec<Value> =
        (0..20).map(|_| json!({"source": "data:,%7B%22ignition%22%3A%7B%22version%22%3A%222.3.0%22%7D%7D"})).collect();
    let e = err(&json!({"ignition": {"version": "2.3.0", "config": {"append": many}}}));
    assert!(e.contains("ignition.config.append[15]: is one config reference too many"), "{e}");
    // Errors inside a referenced config name the reference.
    let bad_child = child.clone().tap(|v| v["storage"]["files"][1]["mode"] = json!("0644")).to_string();
    let v = json!({"ignition": {"version": "2.3.0", "config": {"append": [{"source": pct(&bad_child)}]}}});
    assert!(err(&v).contains("ignition.config.append[0] > storage.files[1].mode"), "{}", err(&v));
}

#[test]
fn ignition_afterburn_envsubst_is_done_natively() {
    // CAPO's form: the hostname's domain stripped into the variable before envsubst.
    let pre = "export NODE=worker-7.novalocal\nexport NODE=${NODE%.*}\nenvsubst < /etc/kubeadm.yml > /etc/kubeadm.yml.tmp\nmv /etc/kubeadm.yml.tmp /etc/kubeadm.yml\necho ready";
    let yml = format!(
        "{JOIN_YML}nodeRegistration:\n  name: ${{NODE}}\n  kubeletExtraArgs: [{{name: node-labels, value: '$NODE'}}]\n"
    );
    let p = run(&v2(pre, &yml)).unwrap();
    let j = join_of(p.clone());
    assert_eq!(j.node_registration.name, "worker-7");
    assert_eq!(j.node_registration.kubelet_extra_args[0].value, "worker-7");
    let Action::Shell(block) = &p.script.as_ref().unwrap().before[0].action else { panic!() };
    assert!(!block.contains("envsubst") && !block.contains("mv /etc") && block.contains("echo ready"), "{block}");
    assert!(
        p.notices.iter().any(|n| n.contains("envsubst of /etc/kubeadm.yml is done by kubestrap")),
        "{:?}",
        p.notices
    );
    // A variable nobody supplies is refused by name, naming the datasource.
    let idiom = "envsubst </etc/kubeadm.yml >/etc/kubeadm.yml.tmp\nmv -f /etc/kubeadm.yml.tmp /etc/kubeadm.yml";
    let yml = format!("{JOIN_YML}nodeRegistration:\n  name: ${{KUBESTRAP_TEST_UNSET}}\n");
    let e = err(&v2(idiom, &yml));
    assert!(
        e.contains("storage.files[1]") && e.contains("${KUBESTRAP_TEST_UNSET}") && e.contains("nocloud datasource"),
        "{e}"
    );
    // Set by a shell construct kubestrap does not evaluate: refused naming it.
    let e = err(&v2(&format!("export N=$(hostname -s)\n{idiom}"), &yml.replace("KUBESTRAP_TEST_UNSET", "N")));
    assert!(e.contains("${N}") && e.contains("$(hostname -s)"), "{e}");
    // Without the idiom the file is read as written.
    let plain = format!("{JOIN_YML}nodeRegistration:\n  name: literal\n");
    assert_eq!(join_of(run(&v2("echo hi", &plain)).unwrap()).node_registration.name, "literal");
}

#[test]
fn ignition_envsubst_forms() {
    let env = |n: &str| match n {
        "COREOS_OPENSTACK_HOSTNAME" => Ok("cp-0.novalocal".to_string()),
        "A" => Ok("x".to_string()),
        other => Err(format!("{other} is not supplied")),
    };
    let out = envsubst::substitute("n: ${A} $A $$ ${A:-d} $1 cost: 5$", &env).unwrap();
    assert_eq!(out, "n: x x $$ ${A:-d} $1 cost: 5$");
    assert_eq!(envsubst::substitute("${B}", &env).unwrap_err().0, "B");
    let pre = "export H=${COREOS_OPENSTACK_HOSTNAME%.*}\nL=${COREOS_OPENSTACK_HOSTNAME%%.*}\nD=${COREOS_OPENSTACK_HOSTNAME#*.}\nQ=\"$A\"\nenvsubst < /etc/kubeadm.yml > /tmp/k\nmv /tmp/k /etc/kubeadm.yml\n";
    let (kept, assigned) = envsubst::take_idiom(pre, &env).unwrap();
    assert!(!kept.contains("envsubst"), "{kept}");
    let carried = envsubst::carried_assignments("export A=1\nB=\"$A\"\nC=$(hostname)\nD=`x`\necho E=1\n");
    assert_eq!(carried, "export A=1\nB=\"$A\"\n");
    let get = |n: &str| envsubst::lookup(&assigned, &env, n);
    assert_eq!(
        (get("H").unwrap(), get("L").unwrap(), get("D").unwrap(), get("Q").unwrap()),
        ("cp-0".into(), "cp-0".into(), "novalocal".into(), "x".into())
    );
    assert!(envsubst::take_idiom("envsubst < /etc/kubeadm.yml > /tmp/k\n", &env).is_none(), "no move back");
}

#[test]
fn ignition_kubeadm_sh_shape() {
    let parts = kubeadm_sh::split(&kubeadm_sh("\na\n\nb\n", "c\n")).unwrap();
    assert_eq!((parts.pre.as_str(), parts.post.as_str(), parts.moves_config), ("a\n\nb\n", "c\n", true));
    let e = kubeadm_sh::split("set -e\necho x\n").unwrap_err();
    assert!(e.contains("bootstrap-success.complete"), "{e}");
    let e = kubeadm_sh::split(&format!("set -e\necho kubeadm\n{}\n", kubeadm_sh::SENTINEL_LINE)).unwrap_err();
    assert!(e.contains("line 2") && e.contains("kubeadm init|join"), "{e}");
    assert_eq!(kubeadm_sh::quote("it's"), "'it'\\''s'");
    // The Afterburn variables are exported ahead of the block, quoted.
    let env = [("COREOS_EC2_HOSTNAME".to_string(), "ip-10-0-0-1.ec2.internal".to_string())];
    assert_eq!(
        kubeadm_sh::bash_block(&env, "envsubst < /a > /b\n"),
        "exec bash -e -c 'export COREOS_EC2_HOSTNAME='\\''ip-10-0-0-1.ec2.internal'\\''\nenvsubst < /a > /b\n'"
    );
}

/// Cluster API's own expected render (clc_test.go's TestRender), read part by part: its values
/// are not a bootable node, but every part must be understood as CABPK meant it.
#[test]
fn ignition_cabpk_render_test_output_is_read_part_by_part() {
    let cfg: Value =
        serde_json::from_str(include_str!("../../../tests/fixtures/user-data/ignition-cabpk-render-test/user-data"))
            .unwrap();
    let mut notices = Notices::default();
    let layers = references::layers("u", cfg).unwrap();
    let users = ignored_sections("u", &layers, &mut notices);
    assert_eq!(users, ["foo"]);
    let entries = files::files("u", &layers, &users, &mut notices).unwrap();
    let paths: Vec<&str> = entries.iter().map(|e| e.file.path.as_str()).collect();
    // foo's sudoers file goes with the ignored user; ntp.conf is not kubestrap's to manage.
    assert_eq!(paths, ["/etc/testfile.yaml", "/etc/kubeadm.sh", "/etc/kubeadm.yml"]);
    assert_eq!((entries[0].file.content.as_slice(), entries[0].file.mode), (&b"foo\n"[..], 0o600));
    let (_, sh) = whole_file(&entries, KUBEADM_SH).unwrap();
    let parts = kubeadm_sh::split(&sh).unwrap();
    let heredoc = "cat <<EOF > /etc/modules-load.d/containerd.conf\noverlay\nbr_netfilter\nEOF\n";
    assert_eq!(parts.pre, format!("pre-command\nanother-pre-command\n{heredoc}"));
    assert_eq!(parts.argv, ["kubeadm", "join"]);
    assert!(parts.moves_config);
    assert_eq!(parts.post, format!("post-kubeadm-command\nanother-post-kubeamd-command\n{heredoc}"));
    let units = units::merged("u", &layers).unwrap();
    let installed = units::install("u", &units, &mut notices);
    assert!(installed.files.is_empty(), "kubeadm.service, ntpd and the mount unit are not installed");
    let all = notices.join("\n");
    for what in ["passwd", "disks", "filesystems", "ntp", "var-lib-testdir.mount", "kubeadm.service"] {
        assert!(all.contains(what), "no notice about {what}:\n{all}");
    }
}
