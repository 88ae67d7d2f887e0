//! Each check against a plain-field fake machine.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use crate::config::values::{Cidr, Version};
use crate::cri::CriError;
use crate::host::HostError;

/// A machine made of fields: every probe answer is set by the test.
pub(crate) struct Fake {
    euid: u32,
    cpus: usize,
    mem: u64,
    kernel: String,
    pub(crate) files: BTreeMap<PathBuf, String>,
    cgroup2: bool,
    busy_ports: Vec<u16>,
    path_cmds: Vec<&'static str>,
    cri: Result<String, &'static str>,
    /// RuntimeConfig: implemented, Unimplemented (false), or an error.
    runtime_config: Result<bool, &'static str>,
    /// Every (address, port) a Port check asked to listen on.
    listened: std::sync::Mutex<Vec<(Option<String>, u16)>>,
    kubelet: Option<String>,
    resolves: Option<bool>,
    env: BTreeMap<&'static str, &'static str>,
    firewalld: bool,
    free: u64,
    entropy: bool,
    now: time::OffsetDateTime,
    /// Images the runtime holds; pulls add to it when `registry` is reachable.
    images: std::sync::Mutex<Vec<String>>,
    registry: bool,
    /// Pod sandboxes the runtime holds; removals take them out.
    pub(crate) sandboxes: std::sync::Mutex<Vec<String>>,
    /// Units stopped, in order.
    pub(crate) stopped: std::sync::Mutex<Vec<String>>,
}

impl Fake {
    /// A healthy control-plane machine.
    pub(crate) fn good() -> Fake {
        let mut files = BTreeMap::new();
        files.insert(PathBuf::from("/proc/swaps"), "Filename Type Size Used Priority\n".into());
        files.insert(
            PathBuf::from("/sys/fs/cgroup/cgroup.controllers"),
            "cpuset cpu io memory hugetlb pids rdma misc\n".into(),
        );
        files.insert(PathBuf::from("/proc/sys/net/ipv4/ip_forward"), "1\n".into());
        files.insert(PathBuf::from("/lib/systemd/system/kubelet.service"), String::new());
        files.insert(PathBuf::from("/etc/systemd/system/multi-user.target.wants/kubelet.service"), String::new());
        Fake {
            euid: 0,
            cpus: 2,
            mem: 4 << 30,
            kernel: "6.1.0-26-amd64".into(),
            files,
            cgroup2: true,
            busy_ports: vec![],
            path_cmds: vec!["losetup", "mount", "cp", "kubelet"],
            cri: Ok("containerd 1.7.24".into()),
            runtime_config: Ok(true),
            listened: Default::default(),
            kubelet: Some("Kubernetes v1.37.0".into()),
            resolves: Some(true),
            env: BTreeMap::new(),
            firewalld: false,
            free: 50 << 30,
            entropy: true,
            now: time::OffsetDateTime::now_utc(),
            images: std::sync::Mutex::new(IMAGES.iter().map(|i| i.to_string()).collect()),
            registry: true,
            sandboxes: Default::default(),
            stopped: Default::default(),
        }
    }
}

impl Host for Fake {
    fn euid(&self) -> u32 {
        self.euid
    }
    fn num_cpus(&self) -> usize {
        self.cpus
    }
    fn total_memory(&self) -> u64 {
        self.mem
    }
    fn kernel_release(&self) -> String {
        self.kernel.clone()
    }
    fn hostname(&self) -> String {
        "cp-1".into()
    }
    fn read_file(&self, path: &Path) -> Option<String> {
        self.files.get(path).cloned()
    }
    fn exists(&self, path: &Path) -> bool {
        self.files.keys().any(|f| f.starts_with(path))
    }
    fn list_dir(&self, path: &Path) -> Option<Vec<String>> {
        let v: Vec<String> = self
            .files
            .keys()
            .filter_map(|f| f.strip_prefix(path).ok())
            .filter_map(|rest| rest.components().next().map(|c| c.as_os_str().to_string_lossy().into_owned()))
            .collect();
        (!v.is_empty()).then_some(v)
    }
    fn is_cgroup2(&self, _: &Path) -> bool {
        self.cgroup2
    }
    fn can_listen(&self, address: Option<&str>, port: u16) -> Result<(), HostError> {
        self.listened.lock().unwrap().push((address.map(str::to_string), port));
        if self.busy_ports.contains(&port) {
            Err(HostError::PortUnavailable { port, errno: nix::errno::Errno::EADDRINUSE })
        } else {
            Ok(())
        }
    }
    fn find_in_path(&self, name: &str) -> Option<PathBuf> {
        self.path_cmds.contains(&name).then(|| PathBuf::from("/usr/bin").join(name))
    }
    fn cri_version(&self, socket: &Path, _: Duration) -> Result<String, CriError> {
        self.cri.clone().map_err(|why| CriError::Refused { socket: socket.to_path_buf(), why: why.into() })
    }
    fn cri_runtime_config(&self, socket: &Path, _: Duration) -> Result<bool, CriError> {
        self.runtime_config.map_err(|why| CriError::Refused { socket: socket.to_path_buf(), why: why.into() })
    }
    fn cri_image_present(&self, socket: &Path, image: &str, _: Duration) -> Result<bool, CriError> {
        self.cri.as_ref().map_err(|why| CriError::Refused { socket: socket.to_path_buf(), why: why.to_string() })?;
        Ok(self.images.lock().unwrap().iter().any(|i| i == image))
    }
    fn cri_pull_image(&self, socket: &Path, image: &str, _: Duration) -> Result<(), CriError> {
        if !self.registry {
            let why = format!("PullImage {image}: gRPC status 2: dial tcp: connection refused");
            return Err(CriError::Refused { socket: socket.to_path_buf(), why });
        }
        self.images.lock().unwrap().push(image.to_string());
        Ok(())
    }
    fn cri_pod_sandboxes(&self, socket: &Path, _: Duration) -> Result<Vec<String>, CriError> {
        self.cri.as_ref().map_err(|why| CriError::Refused { socket: socket.to_path_buf(), why: why.to_string() })?;
        Ok(self.sandboxes.lock().unwrap().clone())
    }
    fn cri_remove_pod_sandbox(&self, _: &Path, id: &str, _: Duration) -> Result<(), CriError> {
        self.sandboxes.lock().unwrap().retain(|s| s != id);
        Ok(())
    }
    fn stop_service(&self, unit: &str) -> Result<(), HostError> {
        self.stopped.lock().unwrap().push(unit.to_string());
        Ok(())
    }
    fn kubelet_version(&self, kubelet: &Path) -> Result<String, HostError> {
        self.kubelet.clone().ok_or_else(|| HostError::Exec {
            program: kubelet.to_path_buf(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })
    }
    fn resolves(&self, _: &str, _: Duration) -> Option<bool> {
        self.resolves
    }
    fn env(&self, name: &str) -> Option<String> {
        self.env.get(name).map(|s| s.to_string())
    }
    fn process_running(&self, comm: &str) -> bool {
        comm == "firewalld" && self.firewalld
    }
    fn free_space(&self, _: &Path) -> Option<u64> {
        Some(self.free)
    }
    fn entropy_ready(&self) -> bool {
        self.entropy
    }
    fn now(&self) -> time::OffsetDateTime {
        self.now
    }
    fn own_mtime(&self) -> Option<time::OffsetDateTime> {
        Some(time::macros::datetime!(2026-01-01 0:00 UTC))
    }
}

fn input(role: Role) -> Input {
    Input {
        role,
        root: PathBuf::from("/"),
        node_name: "cp-1".into(),
        cri_socket: DEFAULT_CRI.into(),
        kubernetes_version: Version::parse("v1.37.0").unwrap(),
        bind_port: 6443,
        advertise_address: Some("10.0.0.10".parse::<IpAddr>().unwrap()),
        service_subnets: vec![Cidr::parse("10.96.0.0/12").unwrap()],
        pod_subnets: vec![],
        etcd_data_dir: Some("/var/lib/etcd".into()),
        discovery_host: None,
        ca_cert_path: "/etc/kubernetes/pki/ca.crt".into(),
        certs_dir: "/etc/kubernetes/pki".into(),
        resuming: false,
        bind: BindAddresses::default(),
        images: IMAGES.iter().map(|i| i.to_string()).collect(),
        image_pull_policy: String::new(),
        kubelet: None,
    }
}

const IMAGES: [&str; 2] = ["registry.k8s.io/kube-apiserver:v1.37.2", "registry.k8s.io/pause:3.10.2"];

const DEFAULT_CRI: &str = "unix:///var/run/containerd/containerd.sock";

fn row<'a>(r: &'a Report, name: &str) -> &'a Row {
    r.rows
        .iter()
        .find(|x| x.name == name)
        .unwrap_or_else(|| panic!("no check {name}: {:?}", r.rows.iter().map(|x| &x.name).collect::<Vec<_>>()))
}

fn outcome(h: &Fake, role: Role, name: &str) -> Outcome {
    row(&run(h, &input(role), &[]), name).result
}

#[test]
fn a_good_machine_passes_everything() {
    let r = run(&Fake::good(), &input(Role::ControlPlane), &[]);
    let bad: Vec<_> = r.rows.iter().filter(|x| !matches!(x.result, Outcome::Pass)).collect();
    assert!(bad.is_empty(), "{bad:#?}");
    for name in
        ["Port-6443", "Port-10259", "Port-10257", "Port-10250", "Port-2379", "Port-2380", "DirAvailable--var-lib-etcd"]
    {
        row(&r, name);
    }
    row(&r, "FileAvailable--etc-kubernetes-manifests-kube-apiserver.yaml");
    row(&r, "FileContent--proc-sys-net-ipv4-ip_forward");
}

#[test]
fn control_plane_join_gets_the_join_and_the_control_plane_checks() {
    let i = Input::control_plane_join(
        Path::new("/"),
        "cp-2".into(),
        "unix:///run/containerd/containerd.sock".into(),
        Some("10.0.0.10".into()),
        6443,
    );
    let mut h = Fake::good();
    h.busy_ports = vec![2380];
    let r = run(&h, &i, &[]);
    assert_eq!(r.role, "control-plane-join");
    for present in [
        "NumCPU",
        "Mem",
        "Port-6443",
        "Port-10259",
        "Port-2379",
        "FileAvailable--etc-kubernetes-manifests-etcd.yaml",
        "FileAvailable--etc-kubernetes-kubelet.conf",
        "FileAvailable--etc-kubernetes-bootstrap-kubelet.conf",
        "DirAvailable--var-lib-etcd",
    ] {
        row(&r, present);
    }
    // The shared CAs may already be on disk (kubeadm's manual-copy mode).
    assert!(r.rows.iter().all(|x| x.name != "FileAvailable--etc-kubernetes-pki-ca.crt"));
    assert_eq!(row(&r, "Port-2380").result, Outcome::Error, "the etcd peer port is held");
}

#[test]
fn worker_gets_its_own_set() {
    let r = run(&Fake::good(), &input(Role::Worker), &[]);
    row(&r, "FileAvailable--etc-kubernetes-kubelet.conf");
    row(&r, "FileAvailable--etc-kubernetes-bootstrap-kubelet.conf");
    row(&r, "FileAvailable--etc-kubernetes-pki-ca.crt");
    row(&r, "Port-10250");
    for absent in ["NumCPU", "Mem", "Port-6443", "Port-2379", "Firewalld", "DirAvailable--var-lib-etcd"] {
        assert!(r.rows.iter().all(|x| x.name != absent), "{absent} ran on a worker");
    }
}

#[test]
fn privileges_cpu_memory() {
    let mut h = Fake::good();
    h.euid = 1000;
    h.cpus = 1;
    h.mem = 1 << 30;
    let r = run(&h, &input(Role::ControlPlane), &[]);
    assert_eq!(row(&r, "IsPrivilegedUser").result, Outcome::Error);
    assert_eq!(row(&r, "NumCPU").result, Outcome::Error);
    assert!(row(&r, "Mem").message.contains("1024 MB"));
}

#[test]
fn swap_on_and_off() {
    let mut h = Fake::good();
    assert_eq!(outcome(&h, Role::Worker, "Swap"), Outcome::Pass);
    h.files.insert("/proc/swaps".into(), "Filename Type Size Used Priority\n/swapfile file 1048572 0 -2\n".into());
    assert_eq!(outcome(&h, Role::Worker, "Swap"), Outcome::Warning);
}

#[test]
fn cgroup_v1_old_kernel_and_missing_controllers() {
    let mut h = Fake::good();
    h.cgroup2 = false;
    let r = run(&h, &input(Role::Worker), &[]);
    assert_eq!(row(&r, "SystemVerification").result, Outcome::Error);
    assert!(row(&r, "SystemVerification").message.contains("cgroup v1"));
    // kubeadm 1.34+: an unsupported kernel only warns, with system-validators' text.
    let mut h = Fake::good();
    h.kernel = "4.14.0-old".into();
    let r = run(&h, &input(Role::Worker), &[]);
    assert_eq!(row(&r, "SystemVerification").result, Outcome::Warning);
    assert!(
        row(&r, "SystemVerification").message.starts_with("kernel release 4.14.0-old is unsupported. Supported LTS")
    );
    let mut h = Fake::good();
    h.files.insert("/sys/fs/cgroup/cgroup.controllers".into(), "cpu io memory\n".into());
    let m = row(&run(&h, &input(Role::Worker), &[]), "SystemVerification").message.clone();
    assert!(m.contains("cpuset") && m.contains("pids"), "{m}");
    let mut h = Fake::good();
    h.files.insert("/boot/config-6.1.0-26-amd64".into(), "CONFIG_NAMESPACES=y\n".into());
    assert!(row(&run(&h, &input(Role::Worker), &[]), "SystemVerification").message.contains("CONFIG_NET_NS"));
}

#[test]
fn ip_forward_zero_and_one() {
    let mut h = Fake::good();
    h.files.insert("/proc/sys/net/ipv4/ip_forward".into(), "0\n".into());
    let r = run(&h, &input(Role::ControlPlane), &[]);
    assert_eq!(row(&r, "FileContent--proc-sys-net-ipv4-ip_forward").result, Outcome::Error);
    // An IPv6 service range adds the IPv6 forwarding check.
    let mut i = input(Role::ControlPlane);
    i.service_subnets.push(Cidr::parse("fd00::/108").unwrap());
    let r = run(&Fake::good(), &i, &[]);
    assert_eq!(row(&r, "FileContent--proc-sys-net-ipv6-conf-default-forwarding").result, Outcome::Error);
}

#[test]
fn missing_commands_are_kubeadm_133s_errors() {
    let mut h = Fake::good();
    h.path_cmds.retain(|c| *c != "losetup" && *c != "cp");
    let r = run(&h, &input(Role::Worker), &[]);
    assert_eq!(row(&r, "FileExisting-losetup").result, Outcome::Error);
    assert_eq!(row(&r, "FileExisting-losetup").message, "losetup not found in system path");
    assert_eq!(row(&r, "FileExisting-cp").result, Outcome::Error);
    assert_eq!(row(&r, "FileExisting-mount").result, Outcome::Pass);
    let execs: Vec<&str> = r.rows.iter().filter_map(|x| x.name.strip_prefix("FileExisting-")).collect();
    assert_eq!(execs, ["losetup", "mount", "cp"], "no ip, iptables, ethtool, tc, touch, nsenter, ebtables, socat");
    assert!(r.rows.iter().all(|x| x.name != "FileExisting-conntrack"), "conntrack is only checked before 1.32");
}

#[test]
fn non_empty_etcd_dir_and_existing_manifests() {
    let mut h = Fake::good();
    h.files.insert("/var/lib/etcd/member/snap/db".into(), String::new());
    h.files.insert("/etc/kubernetes/manifests/etcd.yaml".into(), String::new());
    let r = run(&h, &input(Role::ControlPlane), &[]);
    assert_eq!(row(&r, "DirAvailable--var-lib-etcd").result, Outcome::Error);
    assert_eq!(row(&r, "FileAvailable--etc-kubernetes-manifests-etcd.yaml").result, Outcome::Error);
    assert_eq!(row(&r, "FileAvailable--etc-kubernetes-manifests-kube-apiserver.yaml").result, Outcome::Pass);
}

#[test]
fn bad_hostname_and_unresolvable_hostname_warn() {
    let mut i = input(Role::Worker);
    i.node_name = "Bad_Name".into();
    assert_eq!(row(&run(&Fake::good(), &i, &[]), "Hostname").result, Outcome::Warning);
    let mut h = Fake::good();
    h.resolves = Some(false);
    assert!(row(&run(&h, &input(Role::Worker), &[]), "Hostname").message.contains("lookup failed"));
    // A resolver that does not answer in time is a warning too, said as such.
    h.resolves = None;
    let r = row(&run(&h, &input(Role::Worker), &[]), "Hostname").clone();
    assert_eq!(r.result, Outcome::Warning);
    assert!(r.message.contains("did not answer within 2s"), "{}", r.message);
}

#[test]
fn the_real_hosts_lookup_answers_for_localhost() {
    use crate::host::{Host, LinuxHost};
    // /etc/hosts only: no query leaves the machine.
    assert_eq!(LinuxHost.resolves("localhost", Duration::from_secs(5)), Some(true));
}

#[test]
fn busy_port_cri_down_kubelet_skew() {
    let mut h = Fake::good();
    h.busy_ports = vec![6443];
    h.cri = Err("cannot connect");
    h.kubelet = Some("Kubernetes v1.33.1".into());
    let r = run(&h, &input(Role::ControlPlane), &[]);
    assert_eq!(row(&r, "Port-6443").result, Outcome::Error);
    assert_eq!(row(&r, "CRI").result, Outcome::Error);
    let low = "Kubelet version \"1.33.1\" is lower than kubeadm can support. Please upgrade kubelet";
    assert_eq!(row(&r, "KubeletVersion").message, low);
    // The minimum is kubeadm's own, not three minors below the cluster's: a v1.33 kubelet is
    // refused on a v1.36 cluster too, a v1.34 one accepted on a v1.37 cluster.
    let mut older = input(Role::ControlPlane);
    older.kubernetes_version = crate::config::values::Version::parse("v1.36.3").unwrap();
    assert_eq!(row(&run(&h, &older, &[]), "KubeletVersion").message, low);
    h.kubelet = Some("Kubernetes v1.34.0".into());
    assert_eq!(row(&run(&h, &input(Role::ControlPlane), &[]), "KubeletVersion").result, Outcome::Pass);
    h.kubelet = Some("Kubernetes v1.38.0".into());
    let high = row(&run(&h, &input(Role::ControlPlane), &[]), "KubeletVersion").message.clone();
    assert!(high.ends_with("Kubelet version: \"1.38.0\" Control plane version: \"1.37.0\""), "{high}");
    h.path_cmds.retain(|c| *c != "kubelet");
    assert!(row(&run(&h, &input(Role::ControlPlane), &[]), "KubeletVersion").message.contains("not found"));
}

/// A worker's kubelet against the cluster's version (join, after discovery): only that check
/// runs; an ignore of another check's name is still known; the ignore turns the error into a
/// warning.
#[test]
fn run_only_runs_the_named_check() {
    let mut h = Fake::good();
    h.kubelet = Some("Kubernetes v1.37.2".into());
    let mut w = input(Role::Worker);
    w.kubernetes_version = crate::config::values::Version::parse("v1.36.3").unwrap();
    let r = super::run_only(&h, &w, &["Swap".into()], &["KubeletVersion"]);
    assert_eq!(r.rows.len(), 1, "{:?}", r.rows);
    assert_eq!(r.rows[0].result, Outcome::Error);
    assert!(
        r.rows[0].message.ends_with("Kubelet version: \"1.37.2\" Control plane version: \"1.36.3\""),
        "{:?}",
        r.rows[0]
    );
    assert!(r.unknown_ignores.is_empty(), "{:?}", r.unknown_ignores);
    let r = super::run_only(&h, &w, &["kubeletversion".into()], &["KubeletVersion"]);
    assert_eq!((r.rows[0].result, r.rows[0].ignored), (Outcome::Warning, true));
    w.kubernetes_version = crate::config::values::Version::parse("v1.37.0").unwrap();
    assert_eq!(super::run_only(&h, &w, &[], &["KubeletVersion"]).rows[0].result, Outcome::Pass);
}

#[test]
fn proxies_and_no_proxy_cidrs() {
    let mut h = Fake::good();
    h.env.insert("HTTPS_PROXY", "http://proxy:3128");
    let r = run(&h, &input(Role::ControlPlane), &[]);
    assert_eq!(row(&r, "HTTPProxy").result, Outcome::Warning);
    assert_eq!(row(&r, "HTTPProxyCIDR").result, Outcome::Warning);
    h.env.insert("no_proxy", "10.0.0.0/8,.svc");
    let r = run(&h, &input(Role::ControlPlane), &[]);
    assert_eq!(row(&r, "HTTPProxy").result, Outcome::Pass);
    assert_eq!(row(&r, "HTTPProxyCIDR").result, Outcome::Pass);
}

#[test]
fn firewalld_service_clock_disk_entropy() {
    let mut h = Fake::good();
    h.firewalld = true;
    h.files.retain(|p, _| !p.to_string_lossy().contains("kubelet.service"));
    h.free = 2 << 30;
    h.entropy = false;
    h.now = time::macros::datetime!(2020-01-01 0:00 UTC);
    let r = run(&h, &input(Role::ControlPlane), &[]);
    assert_eq!(row(&r, "Firewalld").result, Outcome::Warning);
    assert_eq!(row(&r, "Service-Kubelet").result, Outcome::Warning);
    assert_eq!(row(&r, "DiskSpace--var-lib").result, Outcome::Warning);
    assert_eq!(row(&r, "Entropy").result, Outcome::Error);
    assert!(row(&r, "ClockSanity").message.contains("image was built"));
    h.free = 100 << 20;
    assert_eq!(row(&run(&h, &input(Role::ControlPlane), &[]), "DiskSpace--var-lib").result, Outcome::Error);
}

#[test]
fn kubelet_unit_enabled() {
    let mut h = Fake::good();
    h.files.retain(|p, _| !p.to_string_lossy().contains("kubelet.service"));
    assert!(row(&run(&h, &input(Role::Worker), &[]), "Service-Kubelet").message.contains("does not exist"));
    h.files.insert("/lib/systemd/system/kubelet.service".into(), String::new());
    assert!(row(&run(&h, &input(Role::Worker), &[]), "Service-Kubelet").message.contains("not enabled"));
    h.files.insert("/etc/systemd/system/multi-user.target.wants/kubelet.service".into(), String::new());
    assert_eq!(outcome(&h, Role::Worker, "Service-Kubelet"), Outcome::Pass);
}

#[test]
fn ignoring_turns_errors_into_warnings_case_insensitively() {
    let mut h = Fake::good();
    h.euid = 1000;
    h.cpus = 1;
    let r = run(&h, &input(Role::ControlPlane), &["numcpu".into(), "NoSuchCheck".into()]);
    assert_eq!(row(&r, "NumCPU").result, Outcome::Warning);
    assert!(row(&r, "NumCPU").ignored);
    assert_eq!(row(&r, "IsPrivilegedUser").result, Outcome::Error);
    assert_eq!(r.unknown_ignores, ["nosuchcheck"]);
    assert!(r.lines().iter().any(|l| l.contains("nosuchcheck")));
    let r = run(&h, &input(Role::ControlPlane), &["all".into()]);
    assert!(r.errors().is_empty());
    assert!(r.unknown_ignores.is_empty());
}

#[test]
fn report_lines_use_kubeadm_format() {
    let mut h = Fake::good();
    h.busy_ports = vec![10250];
    let r = run(&h, &input(Role::Worker), &[]);
    let lines = r.lines();
    assert!(lines.iter().any(|l| l.starts_with("[ERROR Port-10250]: ")), "{lines:?}");
}

#[test]
fn a_resumed_run_accepts_its_own_files() {
    let mut h = Fake::good();
    h.files.insert("/var/lib/etcd/member/snap/db".into(), String::new());
    h.files.insert("/etc/kubernetes/manifests/etcd.yaml".into(), String::new());
    let mut i = input(Role::ControlPlane);
    i.resuming = true;
    let r = run(&h, &i, &[]);
    assert_eq!(row(&r, "DirAvailable--var-lib-etcd").result, Outcome::Pass);
    assert!(row(&r, "FileAvailable--etc-kubernetes-manifests-etcd.yaml").message.contains("resumed"));
}

/// The first check (IsPrivilegedUser) holds until `kubelet --version` has been asked, which only
/// a later check does: sequential probing would reach that only after the first had given up.
struct Overlapping {
    inner: Fake,
    kubelet_asked: std::sync::Mutex<bool>,
    asked: std::sync::Condvar,
    first_saw_kubelet: std::sync::atomic::AtomicBool,
}

impl Host for Overlapping {
    fn euid(&self) -> u32 {
        let guard = self.kubelet_asked.lock().unwrap();
        let (guard, _) = self.asked.wait_timeout_while(guard, Duration::from_secs(30), |asked| !*asked).unwrap();
        self.first_saw_kubelet.store(*guard, std::sync::atomic::Ordering::SeqCst);
        self.inner.euid()
    }
    fn kubelet_version(&self, kubelet: &Path) -> Result<String, HostError> {
        *self.kubelet_asked.lock().unwrap() = true;
        self.asked.notify_all();
        self.inner.kubelet_version(kubelet)
    }
    fn num_cpus(&self) -> usize {
        self.inner.num_cpus()
    }
    fn cri_pod_sandboxes(&self, socket: &Path, t: Duration) -> Result<Vec<String>, CriError> {
        self.inner.cri_pod_sandboxes(socket, t)
    }
    fn cri_remove_pod_sandbox(&self, socket: &Path, id: &str, t: Duration) -> Result<(), CriError> {
        self.inner.cri_remove_pod_sandbox(socket, id, t)
    }
    fn stop_service(&self, unit: &str) -> Result<(), HostError> {
        self.inner.stop_service(unit)
    }
    fn total_memory(&self) -> u64 {
        self.inner.total_memory()
    }
    fn kernel_release(&self) -> String {
        self.inner.kernel_release()
    }
    fn hostname(&self) -> String {
        self.inner.hostname()
    }
    fn read_file(&self, path: &Path) -> Option<String> {
        self.inner.read_file(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn list_dir(&self, path: &Path) -> Option<Vec<String>> {
        self.inner.list_dir(path)
    }
    fn is_cgroup2(&self, path: &Path) -> bool {
        self.inner.is_cgroup2(path)
    }
    fn can_listen(&self, address: Option<&str>, port: u16) -> Result<(), HostError> {
        self.inner.can_listen(address, port)
    }
    fn find_in_path(&self, name: &str) -> Option<PathBuf> {
        self.inner.find_in_path(name)
    }
    fn cri_version(&self, socket: &Path, timeout: Duration) -> Result<String, CriError> {
        self.inner.cri_version(socket, timeout)
    }
    fn cri_runtime_config(&self, socket: &Path, timeout: Duration) -> Result<bool, CriError> {
        self.inner.cri_runtime_config(socket, timeout)
    }
    fn cri_image_present(&self, socket: &Path, image: &str, timeout: Duration) -> Result<bool, CriError> {
        self.inner.cri_image_present(socket, image, timeout)
    }
    fn cri_pull_image(&self, socket: &Path, image: &str, timeout: Duration) -> Result<(), CriError> {
        self.inner.cri_pull_image(socket, image, timeout)
    }
    fn resolves(&self, name: &str, within: Duration) -> Option<bool> {
        self.inner.resolves(name, within)
    }
    fn env(&self, name: &str) -> Option<String> {
        self.inner.env(name)
    }
    fn process_running(&self, comm: &str) -> bool {
        self.inner.process_running(comm)
    }
    fn free_space(&self, path: &Path) -> Option<u64> {
        self.inner.free_space(path)
    }
    fn entropy_ready(&self) -> bool {
        self.inner.entropy_ready()
    }
    fn now(&self) -> time::OffsetDateTime {
        self.inner.now()
    }
    fn own_mtime(&self) -> Option<time::OffsetDateTime> {
        self.inner.own_mtime()
    }
}

#[test]
fn probes_overlap_and_the_report_keeps_the_table_order() {
    let h = Overlapping {
        inner: Fake::good(),
        kubelet_asked: std::sync::Mutex::new(false),
        asked: std::sync::Condvar::new(),
        first_saw_kubelet: std::sync::atomic::AtomicBool::new(false),
    };
    let i = input(Role::ControlPlane);
    let names = names(&i);
    assert_eq!(names.first().map(String::as_str), Some("IsPrivilegedUser"));
    let kubelet_at = names.iter().position(|n| n == "KubeletVersion").expect("a KubeletVersion check");
    assert!(kubelet_at > 0);
    let r = run(&h, &i, &[]);
    assert!(h.first_saw_kubelet.load(std::sync::atomic::Ordering::SeqCst), "the probes ran one after another");
    assert_eq!(r.rows.iter().map(|x| x.name.clone()).collect::<Vec<_>>(), names);
    assert!(r.rows.iter().all(|x| x.result == Outcome::Pass), "{:#?}", r.rows);
}

mod v137;

fn image_input(policy: &str) -> Input {
    let mut i = input(Role::ControlPlane);
    i.image_pull_policy = policy.into();
    i
}

#[test]
fn image_pull_passes_on_preloaded_images_without_pulling() {
    let mut h = Fake::good();
    h.registry = false;
    *h.images.lock().unwrap() = image_input("").images.clone();
    let r = run(&h, &image_input(""), &[]);
    assert_eq!(row(&r, "ImagePull").result, Outcome::Pass, "{:?}", row(&r, "ImagePull"));
    assert!(row(&r, "ImagePull").message.contains("2 images present, 0 pulled"), "{:?}", row(&r, "ImagePull"));
}

#[test]
fn image_pull_pulls_what_is_missing_when_the_registry_answers() {
    let h = Fake::good();
    h.images.lock().unwrap().clear();
    h.images.lock().unwrap().push("registry.k8s.io/pause:3.10.2".into());
    let r = run(&h, &image_input("IfNotPresent"), &[]);
    assert!(row(&r, "ImagePull").message.contains("1 images present, 1 pulled"), "{:?}", row(&r, "ImagePull"));
    assert_eq!(h.images.lock().unwrap().len(), 2);
}

#[test]
fn image_pull_names_every_image_neither_preloaded_nor_pullable() {
    let mut h = Fake::good();
    h.registry = false;
    h.images.lock().unwrap().clear();
    h.images.lock().unwrap().push("registry.k8s.io/pause:3.10.2".into());
    let r = run(&h, &image_input(""), &[]);
    let failed = row(&r, "ImagePull");
    assert_eq!(failed.result, Outcome::Error, "{failed:?}");
    assert!(
        failed.message.starts_with(
            "images neither preloaded nor pullable: registry.k8s.io/kube-apiserver:v1.37.2 (first pull error:"
        ),
        "{failed:?}"
    );
    assert!(!failed.message.contains("pause"), "present images are not named: {failed:?}");
    // Ignorable under kubeadm's name.
    let r = run(&h, &image_input(""), &["ImagePull".into()]);
    assert_ne!(row(&r, "ImagePull").result, Outcome::Error);
}

#[test]
fn image_pull_policy_never_and_always_as_kubeadm() {
    let mut h = Fake::good();
    h.registry = false;
    assert_eq!(row(&run(&h, &image_input("Never"), &[]), "ImagePull").result, Outcome::Skipped);
    // Always pulls even what is present.
    *h.images.lock().unwrap() = image_input("").images.clone();
    assert_eq!(row(&run(&h, &image_input("Always"), &[]), "ImagePull").result, Outcome::Error);
    assert_eq!(row(&run(&h, &image_input("Sometimes"), &[]), "ImagePull").result, Outcome::Error);
}
