//! A kubelet stand-in: the plain-HTTP healthz endpoint kubeadm polls
//! (127.0.0.1:10248 by default) and Node registration.

use crate::http;
use crate::resources::NODES;
use crate::server::Shared;
use crate::status::ApiError;
use crate::store::{Store, now_rfc3339};
use serde_json::{Map, Value, json};
use std::io::BufReader;
use std::net::TcpListener;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

pub fn run_healthz(shared: Arc<Shared>, listener: TcpListener) {
    for conn in listener.incoming() {
        if shared.is_stopping() {
            return;
        }
        let Ok(tcp) = conn else { continue };
        thread::spawn(move || {
            let _ = tcp.set_read_timeout(Some(Duration::from_secs(30)));
            let Ok(write_half) = tcp.try_clone() else { return };
            let mut reader = BufReader::new(tcp);
            let mut writer = write_half;
            while let Ok(Some(req)) = http::read_request(&mut reader) {
                let (code, body) = match (req.method.as_str(), req.path.as_str()) {
                    ("GET", "/healthz") => (200, "ok"),
                    _ => (404, "404 page not found\n"),
                };
                let keep = req.keep_alive();
                if http::write_response(&mut writer, code, "text/plain; charset=utf-8", body.as_bytes(), keep).is_err()
                    || !keep
                {
                    return;
                }
            }
        });
    }
}

/// Creates (or marks Ready) the Node a kubelet would register: labels as
/// given, condition Ready=True.
pub fn register_node(store: &mut Store, name: &str, labels: &[(&str, &str)]) -> Result<Value, ApiError> {
    let now = now_rfc3339();
    let mut label_map: Map<String, Value> = [
        ("kubernetes.io/hostname", name),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", "amd64"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), Value::from(*v)))
    .collect();
    for (k, v) in labels {
        label_map.insert(k.to_string(), Value::from(*v));
    }
    let status = json!({
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        }],
        "nodeInfo": {"kubeletVersion": crate::api::GIT_VERSION, "operatingSystem": "linux", "architecture": "amd64"},
    });
    match store.try_get(&NODES, "", name).cloned() {
        Some(mut node) => {
            for (k, v) in label_map {
                node["metadata"]["labels"][k] = v;
            }
            node["status"] = status;
            store.replace(&NODES, "", name, node)
        }
        None => store.create(
            &NODES,
            "",
            json!({"metadata": {"name": name, "labels": label_map}, "spec": {}, "status": status}),
        ),
    }
}
