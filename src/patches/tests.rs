use serde_json::json;

use super::read::{Name, documents, parse_name};
use super::*;

fn strategic(target: Target, doc: Value, patch: Value) -> Result<Value, String> {
    strategic::apply(doc, patch, target.schema_root())
}

#[test]
fn the_schema_has_every_root_and_the_pod_merge_keys() {
    let s = schema::schema();
    for t in Target::ALL {
        assert!(!s.fields(t.schema_root()).is_empty(), "{t:?}");
    }
    let c = s.field("api.core.v1.PodSpec", "containers").unwrap();
    assert_eq!((c.strategy, c.merge_key), ("merge", "name"));
    let m = s.field("api.core.v1.Container", "volumeMounts").unwrap();
    assert_eq!((m.strategy, m.merge_key), ("merge", "mountPath"));
    let t = s.field("api.core.v1.PodSpec", "tolerations").unwrap();
    assert_eq!(t.strategy, "", "tolerations are replaced whole");
}

#[test]
fn file_names_as_kubeadm_parses_them() {
    use PatchType::*;
    let p = |n: &str| parse_name(n).unwrap();
    assert_eq!(p("etcd.yaml"), Name::Patch(Target::Etcd, Strategic));
    assert_eq!(p("kube-apiserver+json.yaml"), Name::Patch(Target::KubeApiserver, Json));
    assert_eq!(p("kube-scheduler0+merge.json"), Name::Patch(Target::KubeScheduler, Merge));
    assert_eq!(p("etcd+jsonX.yaml"), Name::Patch(Target::Etcd, Json), "only the start of the type is read");
    assert_eq!(p("etcd.bak.yaml"), Name::Patch(Target::Etcd, Strategic));
    assert_eq!(p("kubeproxydaemonset+strategic.yaml"), Name::Patch(Target::KubeproxyDaemonset, Strategic));
    assert!(matches!(p("etcd.yml"), Name::Ignored(w) if w.contains("extension")));
    assert!(matches!(p("foo.yaml"), Name::Ignored(w) if w.contains("unknown target")));
    assert!(matches!(p(".yaml"), Name::Ignored(_)));
    for bad in ["etcd+.json", "etcd+foo.yaml"] {
        assert!(parse_name(bad).unwrap_err().contains("after '+'"), "{bad}");
    }
}

#[test]
fn documents_split_on_separator_lines_only() {
    let d = documents("a: 1\n---\n--- # c\nb: 2\n---x: 3\n").unwrap();
    assert_eq!(d, vec![json!({"a": 1}), json!({"b": 2, "---x": 3})]);
    assert!(documents("  \n---\n").unwrap().is_empty());
    assert!(documents("a: [").unwrap_err().contains("could not convert patch to JSON"));
}

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kube-apiserver", "namespace": "kube-system"},
      "spec": {"containers": [{"name": "kube-apiserver", "command": ["kube-apiserver", "--a=1"],
        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
        "volumeMounts": [{"mountPath": "/x", "name": "x"}, {"mountPath": "/y", "name": "y"}]}],
        "hostNetwork": true, "volumes": [{"name": "x", "hostPath": {"path": "/x"}}]}, "status": {}})
}

#[test]
fn strategic_merges_lists_by_key_and_replaces_the_rest() {
    let t = Target::KubeApiserver;
    let out = strategic(
        t,
        pod(),
        json!({"spec": {"containers": [{"name": "kube-apiserver",
        "command": ["kube-apiserver"], "env": [{"name": "C", "value": "3"}, {"name": "A", "value": "9"}],
        "volumeMounts": [{"mountPath": "/z", "name": "z"}]}]}}),
    )
    .unwrap();
    let c = &out["spec"]["containers"][0];
    assert_eq!(c["command"], json!(["kube-apiserver"]), "command is replaced whole");
    assert_eq!(
        c["env"],
        json!([{"name": "C", "value": "3"}, {"name": "A", "value": "9"}, {"name": "B", "value": "2"}])
    );
    let mounts: Vec<&str> =
        c["volumeMounts"].as_array().unwrap().iter().map(|m| m["mountPath"].as_str().unwrap()).collect();
    assert_eq!(mounts, ["/z", "/x", "/y"], "new items go first, as apimachinery orders them");
}

#[test]
fn strategic_directives() {
    let t = Target::KubeApiserver;
    let out = strategic(
        t,
        pod(),
        json!({"spec": {"containers": [{"name": "kube-apiserver",
        "env": [{"name": "A", "$patch": "delete"}],
        "$setElementOrder/volumeMounts": [{"mountPath": "/y"}, {"mountPath": "/x"}]}],
        "volumes": [{"$patch": "replace"}, {"name": "v", "emptyDir": {}}], "hostNetwork": null}}),
    )
    .unwrap();
    let c = &out["spec"]["containers"][0];
    assert_eq!(c["env"], json!([{"name": "B", "value": "2"}]));
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/y");
    assert_eq!(out["spec"]["volumes"], json!([{"name": "v", "emptyDir": {}}]));
    assert!(out["spec"].get("hostNetwork").is_none(), "null deletes");
    let e = strategic(
        t,
        pod(),
        json!({"spec": {"containers": [{"name": "kube-apiserver", "env": [{"$patch": "merge"}]}]}}),
    );
    assert!(e.unwrap_err().contains("cannot yet"));
    let e = strategic(t, pod(), json!({"spec": {"containers": [{"image": "x"}]}}));
    assert!(e.unwrap_err().contains("merge key: name"));
}

#[test]
fn reencoding_drops_unknown_and_empty_fields_as_go_does() {
    let p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "etcd", "bogus": 1},
        "spec": {"containers": [{"name": "etcd", "args": [], "stdin": false, "resources": null}],
                 "hostNetwork": true, "priority": 0}});
    let out = decode::reencode(schema::schema().root("pod"), &p).unwrap();
    assert_eq!(out["metadata"], json!({"name": "etcd"}));
    assert_eq!(out["spec"]["containers"][0], json!({"name": "etcd", "resources": {}}));
    assert_eq!(out["spec"]["priority"], 0, "a pointer keeps its zero");
    assert_eq!(out["status"], json!({}));
    let bad = json!({"spec": {"containers": [{"name": 3}]}});
    assert!(decode::reencode(schema::schema().root("pod"), &bad).unwrap_err().contains("spec.containers[0].name"));
}

#[test]
fn a_patch_directory_applies_in_byte_order_and_caches() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("p");
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::write(d.join("kube-apiserver.yaml"), "metadata: {labels: {order: strategic}}\n").unwrap();
    std::fs::write(d.join("kube-apiserver+json.yaml"), "- {op: add, path: /metadata/labels, value: {order: json}}\n")
        .unwrap();
    std::fs::write(d.join("sub/etcd.yaml"), "metadata: {labels: {sub: x}}\n").unwrap();
    std::fs::write(d.join("notes.txt"), "x").unwrap();
    std::fs::write(d.join("kube-scheduler.yaml"), "").unwrap();
    let fs = NodeFs::new(dir.path());
    let p = load(&fs, "/p").unwrap();
    let files: Vec<&str> = p.sets.iter().map(|s| s.file.as_str()).collect();
    assert_eq!(files, ["/p/kube-apiserver+json.yaml", "/p/kube-apiserver.yaml", "/p/sub/etcd.yaml"]);
    let out = p.pod("kube-apiserver", pod(), true).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"order": "strategic"}), "json first, then strategic");
    assert!(Arc::ptr_eq(&p, &load(&fs, "/p").unwrap()), "read once per run");
    assert!(matches!(load(&fs, "/missing"), Err(PatchError::Dir { .. })));
    std::fs::write(d.join("etcd+foo.yaml"), "{}").unwrap();
    let e = load(&NodeFs::new(dir.path().join("..").join(dir.path().file_name().unwrap())), "/p").unwrap_err();
    assert!(e.to_string().contains("etcd+foo.yaml"), "{e}");
}

#[test]
fn json_and_merge_patches_and_their_failures() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("q");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("kube-apiserver+json.yaml"),
        "- {op: add, path: /spec/containers/0/command/-, value: --b=2}\n---\n- {op: test, path: /kind, value: Pod}\n",
    )
    .unwrap();
    std::fs::write(d.join("kube-apiserver+merge.yaml"), "spec: {hostNetwork: null}\n").unwrap();
    std::fs::write(d.join("etcd+json.json"), r#"[{"op": "remove", "path": "/spec/nope"}]"#).unwrap();
    let fs = NodeFs::new(dir.path());
    let p = load(&fs, "/q").unwrap();
    let out = p.pod("kube-apiserver", pod(), true).unwrap();
    assert_eq!(out["spec"]["containers"][0]["command"], json!(["kube-apiserver", "--a=1", "--b=2"]));
    assert!(out["spec"].get("hostNetwork").is_none());
    let e = p.pod("etcd", pod(), true).unwrap_err().to_string();
    assert!(e.contains("/q/etcd+json.json") && e.contains("application/json-patch+json"), "{e}");
    let e = p.object(Target::KubeApiserver, pod(), ("apps/v1", "Deployment"), true);
    assert!(matches!(e, Err(PatchError::Result { .. })));
}

#[test]
fn oversized_and_special_files_and_copy_bombs_fail_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let fs = NodeFs::new(dir.path());
    let at = |name: &str, body: &[u8]| {
        let d = dir.path().join(name.split('/').next().unwrap());
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(dir.path().join(name), body).unwrap();
    };
    // One byte over the cap, in a file that is otherwise a valid patch.
    let mut big = b"metadata: {labels: {a: b}}\n#".to_vec();
    big.resize(read::MAX_FILE_BYTES as usize + 1, b'x');
    at("big/etcd.yaml", &big);
    let e = load(&fs, "/big").unwrap_err().to_string();
    assert!(e.contains("/big/etcd.yaml") && e.contains("larger than 1 MiB"), "{e}");
    big.truncate(read::MAX_FILE_BYTES as usize);
    at("fits/etcd.yaml", &big);
    assert!(load(&fs, "/fits").is_ok());
    // A FIFO named like a patch: refused at once, never waited on.
    std::fs::create_dir_all(dir.path().join("fifo")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        dir.path().join("fifo/etcd.yaml"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let e = load(&fs, "/fifo").unwrap_err().to_string();
    assert!(e.contains("/fifo/etcd.yaml") && e.contains("not a regular file"), "{e}");
    // 30 copies of the document into itself would double it 30 times.
    let ops: Vec<String> =
        (0..30).map(|i| format!(r#"{{"op": "copy", "from": "/spec", "path": "/spec/x{i}"}}"#)).collect();
    at("bomb/etcd+json.json", format!("[{}]", ops.join(",")).as_bytes());
    let p = load(&fs, "/bomb").unwrap();
    let e = p.pod("etcd", pod(), true).unwrap_err().to_string();
    assert!(e.contains("/bomb/etcd+json.json") && e.contains("grows the document past 16 MiB"), "{e}");
    // A collection as a key, as kubeadm refuses it.
    at("key/etcd+json.json", b"[{{{op: add}: 1}: 2}]");
    let e = load(&fs, "/key").unwrap_err().to_string();
    assert!(e.contains("/key/etcd+json.json") && e.contains("invalid map key: a mapping"), "{e}");
}

#[test]
fn value_bytes_stops_at_its_limit() {
    let v = json!({"ab": ["cd", 1, {"e": null}]});
    // Nodes: the object, the list, "cd", 1, the inner object, null (6 × 32) and 2 + 2 + 1 bytes of text.
    assert_eq!(value_bytes(&v, u64::MAX), Some(6 * 32 + 5));
    assert_eq!(value_bytes(&v, 100), None);
}
