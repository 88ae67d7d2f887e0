use super::*;

fn versions(pairs: &[(&str, &str)]) -> Versions {
    let mut m = Versions::new();
    for (v, n) in pairs {
        m.entry(v.to_string()).or_default().push(n.to_string());
    }
    m
}

/// Two v1.36.3 control planes, one worker one patch behind.
fn facts() -> Facts {
    let cps = [("v1.36.3", "cp-1"), ("v1.36.3", "cp-2")];
    Facts {
        api_servers: versions(&cps),
        controller_managers: versions(&cps),
        schedulers: versions(&cps),
        etcd: versions(&[("3.7.0-0", "cp-1"), ("3.7.0-0", "cp-2")]),
        kubelets: versions(&[("v1.36.3", "cp-1"), ("v1.36.3", "cp-2"), ("v1.36.2", "w-1")]),
        dns: "v1.14.6".into(),
        configs: vec![
            ConfigState {
                group: "kubeproxy.config.k8s.io",
                current_version: "v1alpha1".into(),
                preferred_version: "v1alpha1",
                manual_upgrade_required: false,
            },
            ConfigState {
                group: "kubelet.config.k8s.io",
                current_version: String::new(),
                preferred_version: "v1beta1",
                manual_upgrade_required: false,
            },
        ],
    }
}

fn plan(f: &Facts, ups: Vec<AvailableUpgrade>) -> UpgradePlan {
    UpgradePlan {
        kind: "UpgradePlan",
        api_version: "output.kubeadm.k8s.io/v1alpha3",
        available_upgrades: ups,
        config_versions: f.configs.clone(),
    }
}

#[test]
fn the_next_minor_is_listed_as_the_clusters_series_with_every_component() {
    let f = facts();
    let (ups, lines) = compute(&f, "v1.37.2", false, false, true).expect("plan");
    assert_eq!(ups.len(), 1);
    assert_eq!(ups[0].description, "version in the v1.36 series");
    assert!(lines.contains(&"[upgrade/versions] Cluster version: 1.36.3".to_string()), "{lines:?}");
    assert!(lines.contains(&"[upgrade/versions] Latest version in the v1.36 series: v1.37.2".to_string()));
    let names: Vec<&str> = ups[0].components.iter().map(|c| c.name).collect();
    let want = [
        "kubelet",
        "kubelet",
        "kubelet",
        "kube-apiserver",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-controller-manager",
        "kube-scheduler",
        "kube-scheduler",
        "kube-proxy",
        "CoreDNS",
        "kubeadm",
        "etcd",
        "etcd",
    ];
    assert_eq!(names, want);
    // Versions as strings, sorted: v1.36.2 before v1.36.3.
    assert_eq!(ups[0].components[0].node_name, "w-1");
    let text = to_text(&plan(&f, ups));
    let want_text = "Components that must be upgraded manually after you have upgraded the control plane with 'kubeadm upgrade apply':
COMPONENT   NODE      CURRENT   TARGET
kubelet     w-1       v1.36.2   v1.37.2
kubelet     cp-1      v1.36.3   v1.37.2
kubelet     cp-2      v1.36.3   v1.37.2

Upgrade to the latest version in the v1.36 series:

COMPONENT                 NODE      CURRENT   TARGET
kube-apiserver            cp-1      v1.36.3   v1.37.2
kube-apiserver            cp-2      v1.36.3   v1.37.2
kube-controller-manager   cp-1      v1.36.3   v1.37.2
kube-controller-manager   cp-2      v1.36.3   v1.37.2
kube-scheduler            cp-1      v1.36.3   v1.37.2
kube-scheduler            cp-2      v1.36.3   v1.37.2
kube-proxy                          1.36.3    v1.37.2
CoreDNS                             v1.14.6   v1.14.6
etcd                      cp-1      3.7.0-0   3.7.0-0
etcd                      cp-2      3.7.0-0   3.7.0-0

You can now apply the upgrade by executing the following command:

\tkubeadm upgrade apply v1.37.2

_____________________________________________________________________


The table below shows the current state of component configs as understood by this version of kubeadm.
Configs that have a \"yes\" mark in the \"MANUAL UPGRADE REQUIRED\" column require manual config upgrade or
resetting to kubeadm defaults before a successful upgrade can be performed. The version to manually
upgrade to is denoted in the \"PREFERRED VERSION\" column.

API GROUP                 CURRENT VERSION   PREFERRED VERSION   MANUAL UPGRADE REQUIRED
kubeproxy.config.k8s.io   v1alpha1          v1alpha1            no
kubelet.config.k8s.io     -                 v1beta1             no
_____________________________________________________________________

";
    assert_eq!(text, want_text);
}

#[test]
fn nothing_is_listed_at_or_below_the_clusters_version() {
    let f = facts();
    for v in ["v1.36.3", "v1.36.1", "v1.35.0"] {
        let (ups, _) = compute(&f, v, true, true, true).expect("plan");
        assert!(ups.is_empty(), "{v}: {ups:?}");
    }
}

#[test]
fn a_minor_kubestrap_does_not_render_says_to_update_it_and_etcd_can_be_left_out() {
    let f = facts();
    let (ups, _) = compute(&f, "v1.38.0", false, false, false).expect("plan");
    assert!(ups[0].components.iter().all(|c| c.name != "etcd"));
    let text = to_text(&plan(&f, ups));
    assert!(
        text.contains("Note: Before you can perform this upgrade, you have to update kubeadm to v1.38.0.\n"),
        "{text}"
    );
}

#[test]
fn unstable_versions_are_listed_again_with_their_flag_when_allowed() {
    let f = facts();
    let (ups, lines) = compute(&f, "v1.37.0-rc.1", true, true, true).expect("plan");
    let d: Vec<&str> = ups.iter().map(|u| u.description.as_str()).collect();
    assert_eq!(d, ["version in the v1.36 series", "release candidate version", "experimental version"]);
    assert!(lines.contains(&"[upgrade/versions] Latest previous version: v1.37.0-rc.1".to_string()));
    let text = to_text(&plan(&f, ups));
    assert!(text.contains("\tkubeadm upgrade apply v1.37.0-rc.1 --allow-release-candidate-upgrades\n"), "{text}");
    let (ups, _) = compute(&f, "v1.37.0-alpha.1", true, false, true).expect("plan");
    assert_eq!(ups.len(), 2);
    assert!(to_text(&plan(&f, ups)).contains("apply v1.37.0-alpha.1 --allow-experimental-upgrades\n"));
}

#[test]
fn json_and_yaml_are_kubeadms_output_objects() {
    let f = facts();
    let (ups, _) = compute(&f, "v1.37.2", false, false, true).expect("plan");
    let p = plan(&f, ups);
    let json = to_json(&p).expect("json");
    assert!(
        json.starts_with(
            "{\n    \"kind\": \"UpgradePlan\",\n    \"apiVersion\": \"output.kubeadm.k8s.io/v1alpha3\",\n"
        ),
        "{json}"
    );
    assert!(json.contains("\"name\": \"kube-proxy\",\n                    \"currentVersion\": \"1.36.3\",\n                    \"newVersion\": \"v1.37.2\"\n"), "{json}");
    let yaml = to_yaml(&p).expect("yaml");
    assert!(yaml.starts_with("apiVersion: output.kubeadm.k8s.io/v1alpha3\navailableUpgrades:\n- components:\n  - currentVersion: v1.36.2\n    name: kubelet\n"), "{yaml}");
    assert!(yaml.ends_with("kind: UpgradePlan\n"), "{yaml}");
}

#[test]
fn an_unparsable_api_server_tag_is_named() {
    let mut f = facts();
    f.api_servers = versions(&[("latest", "cp-1")]);
    let e = compute(&f, "v1.37.2", false, false, true).expect_err("bad tag");
    assert!(e.to_string().contains("couldn't parse kube-apiserver version latest from nodes [cp-1]"), "{e}");
}

#[test]
fn image_tags_as_kubeadm_reads_them() {
    assert_eq!(crate::images::tag_of("registry.k8s.io/kube-apiserver:v1.37.2"), "v1.37.2");
    assert_eq!(crate::images::tag_of("localhost:5000/etcd:3.7.0-0@sha256:abc"), "3.7.0-0");
    assert_eq!(crate::images::tag_of("localhost:5000/etcd"), "");
}
