//! `reset`'s remove-etcd-member against a real etcd: called by the three-member test in
//! `etcd_join` once its cluster has formed, so the formation is not paid twice. The node's etcd
//! manifest is written with the URLs the test runs etcd on (free ports); reset computes the
//! other members' client URLs on 2379 as kubeadm does, and the connector maps those to the
//! test's ports before using the real client (`RealEtcd`); the member list's URLs come next.

use std::io::Cursor;
use std::path::Path;
use std::sync::Mutex;

use kubestrap::etcd::EtcdError;
use kubestrap::fsutil::NodeFs;
use kubestrap::reset::{self, EtcdConnect, EtcdMembers, RealEtcd, ResetArgs, ResetEnv};

/// A member of the test cluster: name, peer URL, client URL (free ports), address.
pub struct Running<'a> {
    pub name: &'a str,
    pub ip: &'a str,
    pub peer_url: String,
    pub client_url: String,
}

struct TestPorts<'a> {
    members: &'a [Running<'a>],
    asked: Mutex<Vec<Vec<String>>>,
}

impl EtcdConnect for TestPorts<'_> {
    fn connect(&self, fs: &NodeFs, certs_dir: &str, endpoints: &[String]) -> Result<Box<dyn EtcdMembers>, EtcdError> {
        self.asked.lock().unwrap().push(endpoints.to_vec());
        let mapped: Vec<String> = endpoints
            .iter()
            .map(|e| {
                let m = self.members.iter().find(|m| *e == format!("https://{}:2379", m.ip) || *e == m.client_url);
                m.map_or_else(|| e.clone(), |m| m.client_url.clone())
            })
            .collect();
        RealEtcd.connect(fs, certs_dir, &mapped)
    }
}

/// The stacked etcd manifest of `me`, with the URLs the test runs it on.
fn manifest(me: &Running<'_>, all: &[Running<'_>]) -> String {
    let cluster: Vec<String> = all.iter().map(|m| format!("{}={}", m.name, m.peer_url)).collect();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd\n  namespace: kube-system\nspec:\n  containers:\n  - command:\n    - etcd\n    - --advertise-client-urls={}\n    - --data-dir=/var/lib/etcd\n    - --initial-advertise-peer-urls={}\n    - --initial-cluster={}\n    - --initial-cluster-state=existing\n    - --name={}\n    name: etcd\n  volumes:\n  - hostPath:\n      path: /var/lib/etcd\n      type: DirectoryOrCreate\n    name: etcd-data\n",
        me.client_url,
        me.peer_url,
        cluster.join(","),
        me.name
    )
}

/// `kubestrap reset phase remove-etcd-member --force` on `root`, the node of `all[index]`:
/// asks the others first, removes this member, empties the data dir under the root.
pub fn remove_member(root: &Path, all: &[Running<'_>], index: usize) {
    let me = &all[index];
    std::fs::write(root.join("etc/kubernetes/manifests/etcd.yaml"), manifest(me, all)).unwrap();
    let args = ResetArgs {
        root: root.into(),
        force: true,
        dry_run: false,
        skip_phases: vec![],
        cri_socket: None,
        cert_dir: "/etc/kubernetes/pki".into(),
        cleanup_tmp_dir: false,
        kubeconfig: None,
        only: Some("remove-etcd-member".into()),
    };
    let ports = TestPorts { members: all, asked: Mutex::new(Vec::new()) };
    let mut out = Vec::new();
    let mut input = Cursor::new(Vec::new());
    let host = kubestrap::host::LinuxHost;
    let clock = crate::common::etcd::RecordingClock::default();
    let mut env = ResetEnv { host: &host, live: false, etcd: &ports, clock: &clock, input: &mut input, out: &mut out };
    reset::run(&args, &mut env).unwrap();
    let out = String::from_utf8(out).unwrap();
    let others: Vec<String> =
        all.iter().filter(|m| m.name != me.name).map(|m| format!("https://{}:2379", m.ip)).collect();
    let mut want = others;
    want.push(me.client_url.clone());
    // Then, as kubeadm's client syncs with the member list, the URLs the members advertise: the
    // others in the member list's order (etcd sorts by member ID, which is random), this one last.
    let mut synced: Vec<String> = all.iter().filter(|m| m.name != me.name).map(|m| m.client_url.clone()).collect();
    synced.sort();
    synced.push(me.client_url.clone());
    let mut asked = ports.asked.lock().unwrap().clone();
    if let Some(second) = asked.get_mut(1) {
        let others = second.len().saturating_sub(1);
        second[..others].sort();
    }
    assert_eq!(
        asked,
        vec![want, synced],
        "the other members first, on 2379, then this one; then the members' advertised client URLs"
    );
    assert!(out.contains(&format!("[reset] Removed etcd member {}", me.name)), "{out}");
    assert!(out.contains("[reset] Deleted contents of the etcd data directory: /var/lib/etcd"), "{out}");
    let left = std::fs::read_dir(root.join("var/lib/etcd")).unwrap().count();
    assert_eq!(left, 0, "the data dir is emptied");
}
