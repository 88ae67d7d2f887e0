//! The joining member's etcd manifest: kubeadm's flags for cp-2 joining cp-1
//! (ha-capi-facts §A3).

use super::pod::flag_value;
use super::*;
use crate::config::{HostFacts, parse_documents, resolve_init};

fn cp2(extra: &str) -> InitConfig {
    let text = format!(
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nnodeRegistration:\n  name: cp-2\n\
         localAPIEndpoint:\n  advertiseAddress: 10.0.0.12\n---\napiVersion: kubeadm.k8s.io/v1beta4\n\
         kind: ClusterConfiguration\nkubernetesVersion: v1.37.0\n{extra}"
    );
    let docs = parse_documents("test", &text).unwrap();
    resolve_init("test", docs, &HostFacts { hostname: "cp-2".into(), default_address: None }).unwrap()
}

fn command(pod: &Value) -> Vec<String> {
    pod["spec"]["containers"][0]["command"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().into()).collect()
}

#[test]
fn a_joining_member_lists_the_cluster_and_joins_it() {
    let list = "cp-1=https://10.0.0.11:2380,cp-2=https://10.0.0.12:2380";
    let join = command(&etcd_join(&cp2(""), &HostEnv::default(), list).unwrap());
    assert_eq!(flag_value(&join, "initial-cluster"), Some(list));
    assert_eq!(flag_value(&join, "initial-cluster-state"), Some("existing"));
    assert_eq!(flag_value(&join, "name"), Some("cp-2"));
    assert_eq!(flag_value(&join, "initial-advertise-peer-urls"), Some("https://10.0.0.12:2380"));
    // Every other flag is init's, and flags stay sorted by name.
    let init = command(&etcd(&cp2(""), &HostEnv::default()).unwrap());
    assert_eq!(flag_value(&init, "initial-cluster"), Some("cp-2=https://10.0.0.12:2380"));
    assert_eq!(flag_value(&init, "initial-cluster-state"), None);
    let others =
        |c: &[String]| -> Vec<String> { c.iter().filter(|f| !f.starts_with("--initial-cluster")).cloned().collect() };
    assert_eq!(others(&join), others(&init));
    // Sorted by flag name, as kubeadm sorts: initial-cluster before initial-cluster-state.
    let i = join.iter().position(|f| f.starts_with("--initial-cluster=")).unwrap();
    assert_eq!(join[i + 1], "--initial-cluster-state=existing");
    let names: Vec<&str> = join[1..].iter().map(|f| f[2..].split('=').next().unwrap()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, names);
}

#[test]
fn extra_args_still_win_when_joining() {
    let extra = "etcd:\n  local:\n    extraArgs:\n    - name: initial-cluster-state\n      value: new\n";
    let join = command(&etcd_join(&cp2(extra), &HostEnv::default(), "cp-2=https://10.0.0.12:2380").unwrap());
    assert_eq!(flag_value(&join, "initial-cluster-state"), Some("new"));
    assert_eq!(join.iter().filter(|f| f.starts_with("--initial-cluster-state=")).count(), 1);
}
