//! reset against a node root laid out as init and join leave it, with the fake machine
//! (`preflight::tests::Fake`) and a fake etcd cluster.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use super::*;
use crate::etcd::{EtcdError, Member};
use crate::preflight::tests::Fake;

const ME: &str = "https://10.0.0.10:2380";
const OTHER: &str = "https://10.0.0.11:2380";

/// A stacked etcd member's manifest, as the etcd phase writes it (the fields reset reads).
fn etcd_manifest(data_dir: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd\n  namespace: kube-system\nspec:\n  containers:\n  - command:\n    - etcd\n    - --advertise-client-urls=https://10.0.0.10:2379\n    - --data-dir={data_dir}\n    - --initial-advertise-peer-urls={ME}\n    - --initial-cluster=cp-2={OTHER},cp-1={ME}\n    - --name=cp-1\n    name: etcd\n  volumes:\n  - hostPath:\n      path: {data_dir}\n      type: DirectoryOrCreate\n    name: etcd-data\n"
    )
}

fn put(root: &Path, host: &str, data: &str) {
    let p = root.join(host.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, data).unwrap();
}

fn has(root: &Path, host: &str) -> bool {
    root.join(host.trim_start_matches('/')).exists()
}

/// What init (and a first boot) leave on a control plane, and what reset must keep.
fn control_plane(root: &Path) {
    for f in ["ca.crt", "ca.key", "apiserver.crt", "etcd/ca.crt", "sa.key"] {
        put(root, &format!("/etc/kubernetes/pki/{f}"), "x");
    }
    for k in ["admin", "super-admin", "kubelet", "controller-manager", "scheduler"] {
        put(root, &format!("/etc/kubernetes/{k}.conf"), "x");
    }
    for m in ["kube-apiserver", "kube-controller-manager", "kube-scheduler"] {
        put(root, &format!("/etc/kubernetes/manifests/{m}.yaml"), "x");
    }
    put(root, "/etc/kubernetes/manifests/etcd.yaml", &etcd_manifest("/var/lib/etcd"));
    put(root, "/var/lib/etcd/member/snap/db", "x");
    put(root, "/var/lib/kubelet/config.yaml", "x");
    put(root, "/var/lib/kubelet/pki/kubelet-client-current.pem", "x");
    put(root, "/var/lib/kubestrap/done-pre-kubelet", "");
    put(root, "/var/lib/kubestrap/plan.yaml", "x");
    put(root, "/run/kubestrap/status.json", "{}");
    put(root, "/run/cluster-api/bootstrap-failure.json", "{}");
    put(root, "/etc/kubernetes/tmp/kubeadm-backup-etcd/x", "x");
    put(root, "/etc/cni/net.d/10-flannel.conflist", "x");
    put(root, "/etc/kubernetes/kubestrap-keep.txt", "not kubeadm's");
}

/// The fake cluster: its members and every call made.
#[derive(Default)]
struct Cluster {
    members: RefCell<Vec<Member>>,
    calls: RefCell<Vec<String>>,
    /// MemberRemove is refused for good (etcd auth says no).
    refuse: bool,
}

struct FakeEtcd(Rc<Cluster>);
struct Conn(Rc<Cluster>);

impl EtcdConnect for FakeEtcd {
    fn connect(&self, _: &NodeFs, certs_dir: &str, endpoints: &[String]) -> Result<Box<dyn EtcdMembers>, EtcdError> {
        self.0.calls.borrow_mut().push(format!("connect {certs_dir} {}", endpoints.join(",")));
        Ok(Box::new(Conn(self.0.clone())))
    }
}

impl EtcdMembers for Conn {
    fn member_list(&self) -> Result<Vec<Member>, EtcdError> {
        self.0.calls.borrow_mut().push("list".into());
        Ok(self.0.members.borrow().clone())
    }
    fn member_remove(&self, id: u64) -> Result<Vec<Member>, EtcdError> {
        self.0.calls.borrow_mut().push(format!("remove {id:x}"));
        if self.0.refuse {
            return Err(EtcdError::Rejected {
                endpoint: "https://10.0.0.11:2379".into(),
                call: "MemberRemove",
                http: 403,
                code: 7,
                message: "etcdserver: permission denied".into(),
            });
        }
        self.0.members.borrow_mut().retain(|m| m.id != id);
        Ok(self.0.members.borrow().clone())
    }
}

fn member(id: u64, name: &str, peer: &str) -> Member {
    Member { id, name: name.into(), peer_urls: vec![peer.into()], client_urls: vec![], is_learner: false }
}

fn args(root: &Path) -> ResetArgs {
    ResetArgs {
        root: root.into(),
        force: true,
        dry_run: false,
        skip_phases: vec![],
        cri_socket: None,
        cert_dir: paths::DEFAULT_CERTS_DIR.into(),
        cleanup_tmp_dir: false,
        kubeconfig: None,
        only: None,
    }
}

use crate::paths;

/// Runs reset with the fake machine (as if the root were this machine's) and `stdin`.
fn reset(a: &ResetArgs, host: &Fake, cluster: &Rc<Cluster>, stdin: &str) -> (Result<()>, String) {
    let mut input = stdin.as_bytes();
    let mut out = Vec::new();
    let etcd = FakeEtcd(cluster.clone());
    let clock = crate::clock::FakeClock::new();
    let r = run(a, &mut ResetEnv { host, live: true, etcd: &etcd, clock: &clock, input: &mut input, out: &mut out });
    (r, String::from_utf8(out).unwrap())
}

/// remove-etcd-member alone on a control plane whose etcd manifest is `manifest`, against
/// `members` advertising their client URLs (peer port 2380 → 2379): the calls made.
fn remove_member_calls(manifest: &str, members: Vec<Member>) -> Vec<String> {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    control_plane(root);
    put(root, "/etc/kubernetes/manifests/etcd.yaml", manifest);
    let cluster = Rc::new(Cluster::default());
    *cluster.members.borrow_mut() = members;
    for m in cluster.members.borrow_mut().iter_mut() {
        m.client_urls = vec![m.peer_urls[0].replace(":2380", ":2379")];
    }
    let mut a = args(root);
    a.only = Some("remove-etcd-member".into());
    reset(&a, &Fake::good(), &cluster, "").0.unwrap();
    cluster.calls.take()
}

/// The first control plane after a second joined: its manifest names only itself.
#[test]
fn the_first_control_plane_removes_itself_through_the_other_member() {
    let manifest = etcd_manifest("/var/lib/etcd").replace(&format!("cp-2={OTHER},"), "");
    let calls = remove_member_calls(&manifest, vec![member(0xa1, "cp-1", ME), member(0xb2, "cp-2", OTHER)]);
    assert_eq!(
        calls,
        [
            "connect /etc/kubernetes/pki https://10.0.0.10:2379",
            "list",
            "connect /etc/kubernetes/pki https://10.0.0.11:2379,https://10.0.0.10:2379",
            "list",
            "remove a1"
        ]
    );
}

/// A control plane whose manifest's other members were replaced (a rolling upgrade): the
/// removal goes through the members the list names, not the manifest's gone ones, so a member
/// that stops as it removes itself leaves someone to ask.
#[test]
fn a_member_whose_peers_were_replaced_removes_itself_through_the_current_members() {
    let members = vec![member(0xa1, "cp-1", ME), member(0xc3, "cp-4", "https://10.0.0.13:2380")];
    let calls = remove_member_calls(&etcd_manifest("/var/lib/etcd"), members);
    assert_eq!(
        calls,
        [
            "connect /etc/kubernetes/pki https://10.0.0.11:2379,https://10.0.0.10:2379",
            "list",
            "connect /etc/kubernetes/pki https://10.0.0.13:2379,https://10.0.0.10:2379",
            "list",
            "remove a1"
        ]
    );
}

fn two_members() -> Rc<Cluster> {
    let c = Cluster::default();
    *c.members.borrow_mut() = vec![member(0xa1, "cp-1", ME), member(0xb2, "cp-2", OTHER)];
    Rc::new(c)
}

#[test]
fn force_reset_of_a_control_plane_removes_what_kubeadm_removes_and_keeps_the_rest() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    control_plane(root);
    let host = Fake::good();
    *host.sandboxes.lock().unwrap() = vec!["pod-a".into(), "pod-b".into()];
    let cluster = two_members();
    let (r, out) = reset(&args(root), &host, &cluster, "");
    r.unwrap();

    // remove-etcd-member: through the other member's client URL, then this one's; by peer URL.
    assert_eq!(
        *cluster.calls.borrow(),
        vec![
            "connect /etc/kubernetes/pki https://10.0.0.11:2379,https://10.0.0.10:2379".to_string(),
            "list".into(),
            "remove a1".into()
        ]
    );
    assert_eq!(cluster.members.borrow().len(), 1, "the other member stays a voter");
    assert!(has(root, "/var/lib/etcd") && !has(root, "/var/lib/etcd/member"), "etcd data emptied");
    // cleanup-node: the kubelet stopped, the pods removed through the CRI.
    assert_eq!(*host.stopped.lock().unwrap(), vec!["kubelet".to_string()]);
    assert!(host.sandboxes.lock().unwrap().is_empty());
    for gone in [
        "/etc/kubernetes/manifests/etcd.yaml",
        "/etc/kubernetes/manifests/kube-apiserver.yaml",
        "/etc/kubernetes/pki/ca.key",
        "/etc/kubernetes/pki/etcd",
        "/etc/kubernetes/admin.conf",
        "/etc/kubernetes/super-admin.conf",
        "/etc/kubernetes/kubelet.conf",
        "/etc/kubernetes/controller-manager.conf",
        "/etc/kubernetes/scheduler.conf",
        "/var/lib/kubelet/config.yaml",
        "/var/lib/kubelet/pki",
        "/var/lib/kubestrap/done-pre-kubelet",
        "/var/lib/kubestrap/plan.yaml",
        "/run/kubestrap/status.json",
        "/run/cluster-api/bootstrap-failure.json",
    ] {
        assert!(!has(root, gone), "{gone} must be gone");
    }
    for kept in [
        "/etc/kubernetes/manifests",
        "/etc/kubernetes/pki",
        "/var/lib/kubelet",
        "/etc/cni/net.d/10-flannel.conflist",
        "/etc/kubernetes/tmp/kubeadm-backup-etcd/x",
        "/etc/kubernetes/kubestrap-keep.txt",
    ] {
        assert!(has(root, kept), "{kept} must be kept");
    }
    assert!(
        out.contains(
            "[reset] Deleting contents of directories: [/etc/kubernetes/manifests /var/lib/kubelet /etc/kubernetes/pki]"
        ),
        "{out}"
    );
    assert!(out.contains("[reset] Deleted contents of the etcd data directory: /var/lib/etcd"), "{out}");
    assert!(out.contains("does not perform cleanup of CNI plugin configuration"), "{out}");
    assert!(out.contains("/etc/cni/net.d") && out.contains("first boot"), "{out}");

    // --cleanup-tmp-dir empties /etc/kubernetes/tmp too.
    let mut a = args(root);
    a.cleanup_tmp_dir = true;
    reset(&a, &host, &cluster, "").0.unwrap();
    assert!(has(root, "/etc/kubernetes/tmp") && !has(root, "/etc/kubernetes/tmp/kubeadm-backup-etcd"));
}

#[test]
fn dry_run_changes_nothing_and_asks_nobody() {
    let d = tempfile::tempdir().unwrap();
    control_plane(d.path());
    let before = snapshot(d.path());
    let host = Fake::good();
    *host.sandboxes.lock().unwrap() = vec!["pod-a".into()];
    let cluster = two_members();
    let mut a = args(d.path());
    a.force = false;
    a.dry_run = true;
    let (r, out) = reset(&a, &host, &cluster, "");
    r.unwrap();
    assert_eq!(snapshot(d.path()), before);
    assert!(cluster.calls.borrow().is_empty() && host.stopped.lock().unwrap().is_empty());
    assert_eq!(host.sandboxes.lock().unwrap().len(), 1);
    for line in [
        "[reset] Would remove the etcd member on this node from the etcd cluster",
        "[reset] Would delete contents of the etcd data directory: /var/lib/etcd",
        "[reset] Would stop the kubelet service",
        "[reset] Would remove Kubernetes-managed containers",
        "[reset] Would delete files: [/etc/kubernetes/admin.conf",
    ] {
        assert!(out.contains(line), "{line} not in {out}");
    }
    assert!(!out.contains("Are you sure"), "a dry run asks nothing");
}

#[test]
fn without_force_it_asks_and_a_no_changes_nothing() {
    let d = tempfile::tempdir().unwrap();
    control_plane(d.path());
    let before = snapshot(d.path());
    let host = Fake::good();
    let cluster = two_members();
    let mut a = args(d.path());
    a.force = false;
    let (r, out) = reset(&a, &host, &cluster, "n\n");
    let e = r.unwrap_err();
    assert_eq!(e.kind.exit_code(), 1);
    assert!(e.message.contains("didn't answer (Y|y)"), "{}", e.message);
    assert!(out.starts_with("[reset] Are you sure you want to proceed? [y/N]: "), "{out}");
    assert_eq!(snapshot(d.path()), before);
    assert!(cluster.calls.borrow().is_empty());
    reset(&a, &host, &cluster, "y\n").0.unwrap();
    assert!(!has(d.path(), "/etc/kubernetes/admin.conf"));
}

#[test]
fn skipped_phases_are_honoured_and_unknown_ones_refused() {
    let d = tempfile::tempdir().unwrap();
    control_plane(d.path());
    let host = Fake::good();
    let cluster = two_members();
    let mut a = args(d.path());
    a.skip_phases = vec!["cleanup-node".into()];
    reset(&a, &host, &cluster, "").0.unwrap();
    assert!(has(d.path(), "/etc/kubernetes/admin.conf") && has(d.path(), "/var/lib/kubestrap/plan.yaml"));
    assert!(host.stopped.lock().unwrap().is_empty());
    assert!(cluster.calls.borrow().iter().any(|c| c == "remove a1"));

    let cluster = two_members();
    a.skip_phases = vec!["remove-etcd-member".into()];
    reset(&a, &host, &cluster, "").0.unwrap();
    assert!(cluster.calls.borrow().is_empty(), "no etcd call when its phase is skipped");
    assert!(!has(d.path(), "/etc/kubernetes/admin.conf"));

    a.skip_phases = vec!["cleanup".into()];
    let e = reset(&a, &host, &cluster, "").0.unwrap_err();
    assert_eq!(e.kind.exit_code(), 2);
    assert!(e.message.contains("preflight, remove-etcd-member, cleanup-node"), "{}", e.message);
}

#[test]
fn a_worker_has_no_member_to_remove_and_the_last_member_is_kept() {
    let d = tempfile::tempdir().unwrap();
    put(d.path(), "/etc/kubernetes/kubelet.conf", "x");
    put(d.path(), "/var/lib/kubelet/config.yaml", "x");
    let host = Fake::good();
    let cluster = two_members();
    let (r, out) = reset(&args(d.path()), &host, &cluster, "");
    r.unwrap();
    assert!(cluster.calls.borrow().is_empty(), "a worker asks etcd nothing");
    assert!(out.contains("No etcd manifest found"), "{out}");
    assert!(!has(d.path(), "/etc/kubernetes/kubelet.conf"));

    // The only member of its cluster: listed, never removed (kubeadm skips it too).
    let d = tempfile::tempdir().unwrap();
    control_plane(d.path());
    let alone = Rc::new(Cluster::default());
    *alone.members.borrow_mut() = vec![member(0xa1, "cp-1", ME)];
    let mut a = args(d.path());
    a.only = Some("remove-etcd-member".into());
    reset(&a, &host, &alone, "").0.unwrap();
    assert_eq!(alone.calls.borrow().len(), 2, "{:?}", alone.calls.borrow());
    assert!(!has(d.path(), "/var/lib/etcd/member"), "its data is emptied all the same");
    assert!(has(d.path(), "/etc/kubernetes/admin.conf"), "only the phase asked for ran");
}

#[test]
fn the_local_member_is_read_from_the_manifest() {
    let d = tempfile::tempdir().unwrap();
    put(d.path(), "/etc/kubernetes/manifests/etcd.yaml", &etcd_manifest("/data/etcd"));
    let l = etcd_member::local_etcd(&NodeFs::new(d.path())).unwrap().unwrap();
    assert_eq!((l.name.as_str(), l.peer_url.as_str(), l.data_dir.as_str()), ("cp-1", ME, "/data/etcd"));
    put(d.path(), "/etc/kubernetes/manifests/etcd.yaml", "kind: Pod\nspec: {}\n");
    assert!(etcd_member::local_etcd(&NodeFs::new(d.path())).unwrap_err().contains("invalid etcd pod manifest"));
}

#[test]
fn a_refused_removal_is_a_warning_and_the_data_dir_is_emptied_anyway() {
    let d = tempfile::tempdir().unwrap();
    control_plane(d.path());
    let c = Cluster { refuse: true, ..Default::default() };
    *c.members.borrow_mut() = vec![member(0xa1, "cp-1", ME), member(0xb2, "cp-2", OTHER)];
    let cluster = Rc::new(c);
    let (r, out) = reset(&args(d.path()), &Fake::good(), &cluster, "");
    r.unwrap();
    assert_eq!(cluster.calls.borrow().iter().filter(|c| c.starts_with("remove")).count(), 1, "not retried");
    assert!(!out.contains("Removed etcd member"), "{out}");
    assert!(!has(d.path(), "/var/lib/etcd/member"), "emptied all the same, as kubeadm");
}

#[test]
fn a_mount_point_is_never_descended_into_nor_unmounted() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    control_plane(root);
    let vol = "/var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~nfs/data";
    put(root, &format!("{vol}/precious"), "user data");
    put(root, "/var/lib/kubelet/pods/uid-1/etc-hosts", "x");
    let mut host = Fake::good();
    let real = root.join(vol.trim_start_matches('/'));
    let line = format!("123 45 0:52 / {} rw,relatime shared:1 - nfs srv:/x rw\n", real.display());
    host.files.insert("/proc/self/mountinfo".into(), line);
    reset(&args(root), &host, &two_members(), "").0.unwrap();
    assert_eq!(std::fs::read_to_string(real.join("precious")).unwrap(), "user data");
    assert!(!has(root, "/var/lib/kubelet/pods/uid-1/etc-hosts"), "the rest of the pod dir is removed");
    assert!(!has(root, "/var/lib/kubelet/config.yaml"));
    assert_eq!(cleanup::tests_unescape("a\\040b\\134c"), "a b\\c");
}

/// Every file and directory under `dir` with its bytes.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let name = p.strip_prefix(dir).unwrap().display().to_string();
            if p.is_dir() {
                out.push((name, Vec::new()));
                stack.push(p);
            } else {
                out.push((name, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}
