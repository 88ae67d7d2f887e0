//! What mark-control-plane (and upload-config) change on this node's Node object (§6).

use serde_json::{Value, json};

use crate::config::InitConfig;
use crate::config::types::Taint;
use crate::constants::{CONTROL_PLANE_LABEL, EXCLUDE_LB_LABEL};

/// The annotation kubeadm puts on the Node when the CRI socket is passed as a kubelet flag
/// (i.e. without the NodeLocalCRISocket feature).
pub const CRI_SOCKET_ANNOTATION: &str = "kubeadm.alpha.kubernetes.io/cri-socket";

/// The taints this control-plane node must carry: `nodeRegistration.taints` when given (`[]`
/// means none), else the default `node-role.kubernetes.io/control-plane:NoSchedule`.
pub(crate) fn control_plane_taints(cfg: &InitConfig) -> Vec<Taint> {
    match &cfg.init.node_registration.taints {
        Some(t) => t.clone(),
        None => vec![Taint {
            key: CONTROL_PLANE_LABEL.into(),
            value: String::new(),
            effect: "NoSchedule".into(),
            time_added: None,
        }],
    }
}

fn taint_json(t: &Taint) -> Value {
    let mut v = json!({"key": t.key, "effect": t.effect});
    if !t.value.is_empty() {
        v["value"] = json!(t.value);
    }
    if let Some(at) = &t.time_added {
        v["timeAdded"] = json!(at);
    }
    v
}

fn labels() -> Value {
    json!({CONTROL_PLANE_LABEL: "", EXCLUDE_LB_LABEL: ""})
}

/// A JSON merge patch (`application/merge-patch+json`) adding the control-plane labels and
/// setting the taints. A merge patch replaces `spec.taints` as a whole, so this drops taints
/// other components put there (e.g. node.kubernetes.io/not-ready); prefer
/// [`control_plane_patch_for_node`] when the current Node is at hand. With no taints to add
/// (`taints: []`), `spec` is left out entirely, so existing taints stay.
pub fn control_plane_patch(cfg: &InitConfig) -> Value {
    let taints: Vec<Value> = control_plane_taints(cfg).iter().map(taint_json).collect();
    patch(taints)
}

/// kubeadm's markcontrolplane behaviour against the Node as it is now: keep every existing
/// taint and append each wanted taint that is not already present (same key and effect, as
/// core/v1 Taint.MatchTaint). The result is a merge patch; `spec` is omitted when nothing
/// needs adding.
pub(crate) fn control_plane_patch_for_node(cfg: &InitConfig, node: &Value) -> Value {
    let existing: Vec<Value> = node["spec"]["taints"].as_array().cloned().unwrap_or_default();
    let mut taints = existing.clone();
    for t in control_plane_taints(cfg) {
        let present = existing
            .iter()
            .any(|e| e["key"].as_str() == Some(t.key.as_str()) && e["effect"].as_str() == Some(t.effect.as_str()));
        if !present {
            taints.push(taint_json(&t));
        }
    }
    if taints.len() == existing.len() {
        return json!({"metadata": {"labels": labels()}});
    }
    patch(taints)
}

fn patch(taints: Vec<Value>) -> Value {
    let mut p = json!({"metadata": {"labels": labels()}});
    if !taints.is_empty() {
        p["spec"] = json!({"taints": taints});
    }
    p
}

/// Merge patch annotating the Node with its CRI socket, as kubeadm's AnnotateCRISocket does.
pub fn cri_socket_annotation_patch(cri_socket: &str) -> Value {
    json!({"metadata": {"annotations": {CRI_SOCKET_ANNOTATION: cri_socket}}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::test_support::cfg_from;

    fn node_cfg(taints: &str) -> InitConfig {
        cfg_from(&format!(
            "apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration:
  name: cp-1
{taints}localAPIEndpoint:
  advertiseAddress: 10.0.0.10
"
        ))
    }

    #[test]
    fn default_taint_when_nil() {
        let p = control_plane_patch(&node_cfg(""));
        assert_eq!(
            p,
            json!({
                "metadata": {"labels": {
                    "node-role.kubernetes.io/control-plane": "",
                    "node.kubernetes.io/exclude-from-external-load-balancers": "",
                }},
                "spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]},
            })
        );
    }

    #[test]
    fn empty_list_means_no_taint() {
        let p = control_plane_patch(&node_cfg("  taints: []\n"));
        assert!(p.get("spec").is_none(), "no taint, and existing taints untouched: {p}");
        assert_eq!(p["metadata"]["labels"]["node-role.kubernetes.io/control-plane"], "");
    }

    #[test]
    fn custom_taints_replace_default() {
        let p =
            control_plane_patch(&node_cfg("  taints:\n  - key: dedicated\n    value: infra\n    effect: NoExecute\n"));
        assert_eq!(p["spec"]["taints"], json!([{"key": "dedicated", "value": "infra", "effect": "NoExecute"}]));
    }

    #[test]
    fn for_node_keeps_existing_and_adds_missing_only() {
        let c = node_cfg("");
        let node = json!({"spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}});
        let p = control_plane_patch_for_node(&c, &node);
        assert_eq!(
            p["spec"]["taints"],
            json!([
                {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
            ])
        );
        let done =
            json!({"spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]}});
        assert!(control_plane_patch_for_node(&c, &done).get("spec").is_none(), "already there: nothing to add");
        assert!(control_plane_patch_for_node(&node_cfg("  taints: []\n"), &node).get("spec").is_none());
    }

    #[test]
    fn cri_annotation() {
        assert_eq!(
            cri_socket_annotation_patch("unix:///var/run/containerd/containerd.sock")["metadata"]["annotations"]["kubeadm.alpha.kubernetes.io/cri-socket"],
            "unix:///var/run/containerd/containerd.sock"
        );
    }
}
