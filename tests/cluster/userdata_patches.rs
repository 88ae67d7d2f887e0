//! kubeadm's patches as Cluster API ships them (reference kubeadm-upgrade-patches.md §1.8): the
//! patch files in the bootstrap data's files (cloud-init `write_files`, Ignition
//! `storage.files`), their directory in the kubeadm config's `patches.directory`. `kubestrap
//! boot` writes the files, then runs kubeadm's phases, which read them: a control plane's
//! pre-kubelet stage on a scratch root (no cluster needed), which writes etcd's and the API
//! server's manifests (the controller-manager's and scheduler's wait for the API server's
//! answer in the post-kubelet stage: init::in_order; the whole boot with a patch on the real
//! components is tests/real/boot.rs). A worker's join, which reads the cluster's
//! KubeletConfiguration, is tests/real/capi_patches.rs.

use crate::common::*;
use crate::userdata_kubeadm::{boot, capi_init, seed};

use std::path::Path;

use serde_yaml::Value;

/// azimuth-cloud/capi-helm-charts' patch (tests/fixtures/patches/real-azimuth/): a host
/// directory mounted into the API server.
const APISERVER_PATCH_NAME: &str = "/etc/kubernetes/patches/kube-apiserver0+strategic.yaml";
const APISERVER_PATCH: &str = fixture!("patches/real-azimuth/kube-apiserver0+strategic.yaml");

/// A cloud-init `write_files` entry as Cluster API renders one of `spec.files`.
fn write_files_entry(path: &str, content: &str) -> String {
    let body: String = content.lines().map(|l| format!("      {l}\n")).collect();
    format!("-   path: {path}\n    owner: root:root\n    permissions: '0644'\n    content: |\n{body}")
}

fn read_yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap()
}

fn yaml(s: &str) -> Value {
    serde_yaml::from_str(s).unwrap()
}

/// The named item of a list of maps.
fn named<'v>(list: &'v Value, key: &str, name: &str) -> Option<&'v Value> {
    list.as_sequence()?.iter().find(|v| v[key].as_str() == Some(name))
}

/// The API server's manifest carries the patch's volume and mount beside kubeadm's own, and
/// only the API server's: the patch names that target alone.
fn assert_apiserver_patched(root: &Path, r: &Run) {
    let manifests = root.join("etc/kubernetes/manifests");
    let pod = read_yaml(&manifests.join("kube-apiserver.yaml"));
    let volumes = &pod["spec"]["volumes"];
    assert_eq!(
        named(volumes, "name", "kube-webhooks"),
        Some(&yaml("{hostPath: {path: /etc/kubernetes/webhooks, type: DirectoryOrCreate}, name: kube-webhooks}")),
        "{volumes:?}"
    );
    assert!(named(volumes, "name", "k8s-certs").is_some(), "the volumes are merged by name, not replaced: {volumes:?}");
    let container = named(&pod["spec"]["containers"], "name", "kube-apiserver").expect("the kube-apiserver container");
    let mounts = &container["volumeMounts"];
    assert_eq!(
        named(mounts, "mountPath", "/etc/kubernetes/webhooks"),
        Some(&yaml("{mountPath: /etc/kubernetes/webhooks, name: kube-webhooks, readOnly: true}")),
        "{mounts:?}"
    );
    assert!(named(mounts, "name", "k8s-certs").is_some(), "mounts are merged by mountPath: {mounts:?}");
    assert!(container["command"][0] == "kube-apiserver", "the container is kubeadm's, patched: {container:?}");
    let text = std::fs::read_to_string(manifests.join("etcd.yaml")).unwrap();
    assert!(!text.contains("kube-webhooks"), "etcd.yaml:\n{text}");
    for later in ["kube-controller-manager.yaml", "kube-scheduler.yaml"] {
        assert!(!manifests.join(later).exists(), "{later} waits for the API server's answer");
    }
    let patch = root.join(APISERVER_PATCH_NAME.trim_start_matches('/'));
    assert_eq!(std::fs::read_to_string(&patch).unwrap(), APISERVER_PATCH);
    let log = format!("{}{}", r.stdout(), r.stderr());
    for line in [
        "[patches] Reading patches from path \"/etc/kubernetes/patches\"",
        "[patches] Found the following patch files: [kube-apiserver0+strategic.yaml]",
        "[patches] Applied patch of type \"application/strategic-merge-patch+json\" to target \"kube-apiserver\"",
    ] {
        assert!(log.contains(line), "no {line:?} in:\n{log}");
    }
}

/// Cluster API's first control plane (cloud-init): the patch file among the bootstrap data's
/// write_files, `patches.directory` in its InitConfiguration (after nodeRegistration, as CABPK
/// sorts the keys).
#[test]
fn capi_cloud_init_write_files_patch_the_api_server_manifest() {
    let r0 = tempfile::tempdir().unwrap();
    let (port, healthz) = (free_port(), free_port());
    let ud = capi_init(port, healthz);
    let with_file = ud.replacen(
        "-   path: /run/kubeadm/kubeadm.yaml\n",
        &format!("{}-   path: /run/kubeadm/kubeadm.yaml\n", write_files_entry(APISERVER_PATCH_NAME, APISERVER_PATCH)),
        1,
    );
    let ud = with_file.replacen(
        "        taints: null\n      \n      ---\n",
        "        taints: null\n      patches:\n        directory: /etc/kubernetes/patches\n      \n      ---\n",
        1,
    );
    assert!(ud.contains("kube-apiserver0+strategic.yaml") && ud.contains("directory: /etc/kubernetes/patches"));
    seed(r0.path(), &ud, "cp-1");
    let r = boot(r0.path(), "pre-kubelet");
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    assert_apiserver_patched(r0.path(), &r);
}

/// RFC 2397 `data:,` with everything but unreserved characters percent-encoded, as Cluster
/// API's Ignition output writes file contents.
fn data_url(text: &str) -> String {
    let mut out = String::from("data:,");
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Cluster API's `format: ignition` control plane: the patch file in `storage.files`, the
/// kubeadm config (/etc/kubeadm.yml) naming its directory.
#[test]
fn capi_ignition_storage_files_patch_the_api_server_manifest() {
    let r0 = tempfile::tempdir().unwrap();
    let (port, healthz) = (free_port(), free_port());
    let mut ign: serde_json::Value =
        serde_json::from_str(fixture!("user-data/ignition-capi-control-plane/user-data")).unwrap();
    let kubeadm_yml = format!(
        "---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nclusterName: ign-test\n\
         controlPlaneEndpoint: 127.0.0.1:{port}\nkubernetesVersion: v1.36.2\nnetworking:\n  podSubnet: 192.168.0.0/16\n\
         ---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nbootstrapTokens:\n- token: {TOKEN}\n\
         localAPIEndpoint: {{advertiseAddress: 127.0.0.1, bindPort: {port}}}\nnodeRegistration:\n  kubeletExtraArgs:\n\
         \x20 - name: cloud-provider\n    value: external\npatches:\n  directory: /etc/kubernetes/patches\n\
         ---\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nhealthzPort: {healthz}\n"
    );
    let files = ign["storage"]["files"].as_array_mut().unwrap();
    let config = files.iter_mut().find(|f| f["path"] == "/etc/kubeadm.yml").expect("/etc/kubeadm.yml");
    config["contents"]["source"] = data_url(&kubeadm_yml).into();
    files.insert(
        1,
        serde_json::json!({"filesystem": "root", "path": APISERVER_PATCH_NAME, "mode": 420,
                           "contents": {"source": data_url(APISERVER_PATCH), "verification": {}}}),
    );
    seed(r0.path(), &ign.to_string(), "cp-1");
    let r = boot(r0.path(), "pre-kubelet");
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    assert_apiserver_patched(r0.path(), &r);
    assert_eq!(mode(&r0.path().join(APISERVER_PATCH_NAME.trim_start_matches('/'))), 0o644);
}
