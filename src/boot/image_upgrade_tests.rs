use super::*;
use crate::clock::FakeClock;

fn v(s: &str) -> Version {
    Version::parse(s).expect("a version")
}

#[test]
fn the_rules_allow_one_minor_or_patches_up_and_refuse_the_rest() {
    assert_eq!(change(&v("v1.37.2"), &v("v1.37.2")), Change::None);
    assert_eq!(change(&v("v1.36.3"), &v("v1.37.2")), Change::Upgrade);
    assert_eq!(change(&v("v1.37.1"), &v("v1.37.2")), Change::Upgrade);
    assert_eq!(change(&v("v1.37.2-rc.1"), &v("v1.37.2")), Change::Upgrade);
    let refused = |node, image| match change(&v(node), &v(image)) {
        Change::Refused(r) => r,
        other => panic!("{node} -> {image}: {other:?}"),
    };
    assert!(refused("v1.35.0", "v1.37.2").contains("may not skip a minor version (boot an image of v1.36 first)"));
    assert!(refused("v1.37.2", "v1.36.3").contains("not downgraded (boot the image of v1.37.2)"));
    assert!(refused("v1.37.2", "v1.37.1").contains("older than the v1.37.2"));
    assert!(refused("v1.37.2", "v2.0.0").contains("a new major version"));
}

struct Root {
    dir: std::path::PathBuf,
}

impl Root {
    fn new(name: &str) -> Root {
        let dir = std::env::temp_dir().join(format!("kubestrap-image-upgrade-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Root { dir }
    }
    fn put(&self, path: &str, text: &str) {
        let p = self.dir.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    fn has(&self, path: &str) -> bool {
        self.dir.join(path.trim_start_matches('/')).exists()
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn check(root: &Root) -> (Result<()>, Option<ImageUpgrade>) {
    let fs = NodeFs::new(&root.dir);
    let report = Reporter::new(&fs, "pre-kubelet", 2);
    let clock = FakeClock::new();
    let env = Env { clock: &clock, host: &crate::host::LinuxHost, wait: Duration::from_secs(1), patches: None };
    let r = run(&fs, &report, &env);
    (r, report.snapshot().upgrade)
}

const IMAGE_1_37: &str = r#"{"kubernetesVersion": "v1.37.2", "images": ["ignored"]}"#;

#[test]
fn an_image_without_image_json_or_at_the_nodes_version_changes_nothing() {
    let root = Root::new("same");
    let (r, u) = check(&root);
    assert!(r.is_ok() && u.is_none(), "no image.json: {r:?} {u:?}");
    root.put(IMAGE_INFO.as_str(), IMAGE_1_37);
    root.put(DEPLOYED_VERSION.as_str(), "v1.37.2\n");
    let (r, u) = check(&root);
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(u.expect("reported").state, "current");
    assert!(!root.has(KUBELET_HOLD.as_str()));
}

#[test]
fn a_worker_on_an_older_image_is_refused_and_its_kubelet_held_until_a_good_boot() {
    let root = Root::new("downgrade");
    root.put(IMAGE_INFO.as_str(), r#"{"kubernetesVersion": "v1.36.3"}"#);
    root.put(DEPLOYED_VERSION.as_str(), "v1.37.2\n");
    let (r, u) = check(&root);
    let e = r.expect_err("a downgrade");
    assert_eq!(e.kind.exit_code(), 5);
    assert!(e.message.contains("not downgraded"), "{e}");
    let u = u.expect("reported");
    assert_eq!((u.state.as_str(), u.node.as_str(), u.image.as_str()), ("refused", "v1.37.2", "v1.36.3"));
    assert!(root.has(KUBELET_HOLD.as_str()), "the kubelet is held");
    // The image of the node's version again: the hold goes.
    root.put(IMAGE_INFO.as_str(), IMAGE_1_37);
    let (r, _) = check(&root);
    assert!(r.is_ok(), "{r:?}");
    assert!(!root.has(KUBELET_HOLD.as_str()), "the hold outlived a good boot");
}

#[test]
fn a_control_plane_on_the_next_image_starts_its_kubelet_and_one_two_minors_on_is_refused() {
    let root = Root::new("cp");
    root.put(IMAGE_INFO.as_str(), IMAGE_1_37);
    for c in ["kube-apiserver", "kube-controller-manager", "kube-scheduler"] {
        let v = if c == "kube-scheduler" { "v1.36.3" } else { "v1.37.2" };
        let manifest = format!(
            "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: {c}\n    image: registry.k8s.io/{c}:{v}\n"
        );
        root.put(paths::manifest(c).as_str(), &manifest);
    }
    // A rollout cut short: the oldest component is the node's version.
    let (r, u) = check(&root);
    assert!(r.is_ok(), "{r:?}");
    let u = u.expect("reported");
    assert_eq!((u.state.as_str(), u.node.as_str()), ("pending", "v1.36.3"));
    assert!(u.reason.contains("once its kubelet runs"), "{}", u.reason);
    root.put(IMAGE_INFO.as_str(), r#"{"kubernetesVersion": "v1.38.0"}"#);
    let (r, u) = check(&root);
    let e = r.expect_err("two minors on");
    assert_eq!(e.kind.exit_code(), 5);
    assert!(e.message.contains("may not skip a minor"), "{e}");
    assert_eq!(u.expect("reported").state, "refused");
    assert!(!root.has(KUBELET_HOLD.as_str()), "a control plane's kubelet keeps running its old static Pods");
    // The cluster's v1.37.3 rolled here while this v1.37.2 image ran: current, not a downgrade.
    for c in ["kube-apiserver", "kube-controller-manager", "kube-scheduler"] {
        let manifest = format!(
            "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: {c}\n    image: registry.k8s.io/{c}:v1.37.3\n"
        );
        root.put(paths::manifest(c).as_str(), &manifest);
    }
    root.put(IMAGE_INFO.as_str(), IMAGE_1_37);
    let (r, u) = check(&root);
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(u.expect("reported").state, "current");
}

#[test]
fn a_broken_image_json_or_record_is_named() {
    let root = Root::new("broken");
    root.put(IMAGE_INFO.as_str(), r#"{"kubernetesVersion": "1.37"}"#);
    let e = check(&root).0.expect_err("bad version");
    assert_eq!(e.kind.exit_code(), 2);
    assert!(e.message.contains("/usr/share/kubestrap/image.json: kubernetesVersion"), "{e}");
    root.put(IMAGE_INFO.as_str(), IMAGE_1_37);
    root.put(DEPLOYED_VERSION.as_str(), "latest\n");
    let e = check(&root).0.expect_err("bad record");
    assert!(e.message.contains("/var/lib/kubestrap/kubernetes-version") && e.message.contains("remove it"), "{e}");
}

#[test]
fn a_worker_without_a_record_and_no_kubelet_conf_is_not_compared() {
    let root = Root::new("norecord");
    root.put(IMAGE_INFO.as_str(), IMAGE_1_37);
    let (r, u) = check(&root);
    assert!(r.is_ok() && u.is_none(), "{r:?} {u:?}");
    assert!(!root.has(DEPLOYED_VERSION.as_str()));
}

#[test]
fn the_shipped_units_hold_the_kubelet_on_the_same_file_and_take_part_in_boot_assessment() {
    let hold = include_str!("../../units/kubelet.service.d/20-kubestrap-hold.conf");
    assert!(hold.contains(&format!("\nConditionPathExists=!{KUBELET_HOLD}\n")), "{hold}");
    let unit = include_str!("../../units/kubestrap.service");
    assert!(unit.lines().any(|l| l.starts_with("Before=") && l.contains("boot-complete.target")), "{unit}");
    assert!(unit.contains("\nRequiredBy=boot-complete.target"), "{unit}");
}

#[test]
fn kubestrap_status_says_what_the_check_found() {
    let s = crate::status::Status {
        state: "failed".into(),
        upgrade: Some(ImageUpgrade {
            image: "v1.38.0".into(),
            node: "v1.37.2".into(),
            control_plane: "v1.37.2".into(),
            state: "refused".into(),
            reason: "the rule".into(),
        }),
        last_error: "the rule".into(),
        ..Default::default()
    };
    let text = crate::status::describe(&s);
    assert!(
        text.contains("upgrade by image: refused (node v1.37.2, image v1.38.0, control plane v1.37.2)\n"),
        "{text}"
    );
    assert_eq!(text.matches("the rule").count(), 1, "the reason is said once:\n{text}");
}
