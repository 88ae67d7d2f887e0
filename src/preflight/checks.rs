//! The check table: kubeadm's checks (names, conditions, thresholds from the reference §10) and
//! ours. Each entry names the roles it applies to and what to do when it fails.

use std::path::{Path, PathBuf};

use super::system::system_verification;
use super::{BOTH, CONTROL_PLANE, Check, Input, JOINING, Probe, Role, Severity, WORKER, path_name, proxy};
use crate::constants::*;
use crate::host::Host;

/// kubeadm's thresholds.
const MIN_CPUS: usize = 2;
const MIN_MEMORY_MIB: u64 = 1700;
/// Free space under /var/lib below which a node soon evicts pods / cannot pull images.
const MIN_FREE_BYTES: u64 = 1 << 30;
const LOW_FREE_BYTES: u64 = 4 << 30;

/// kubeadm 1.33+'s executables (checks_linux.go addExecChecks), all mandatory: losetup and mount
/// for the kubelet's volumes, cp for copying etcd directories.
const REQUIRED_COMMANDS: &[&str] = &["losetup", "mount", "cp"];

/// A host path under the node root.
fn under(input: &Input, host_path: &str) -> PathBuf {
    input.root.join(host_path.trim_start_matches('/'))
}

fn check<'a>(
    name: impl Into<String>,
    severity: Severity,
    roles: &'static [Role],
    hint: &'static str,
    probe: impl Fn(&dyn Host) -> Probe + Send + Sync + 'a,
) -> Check<'a> {
    Check { name: name.into(), severity, roles, hint, probe: Box::new(probe) }
}

pub fn table(input: &Input) -> Vec<Check<'_>> {
    use Severity::{Error, Warning};
    let mut t = vec![
        check("IsPrivilegedUser", Error, BOTH, "run kubestrap as root", |h| match h.euid() {
            0 => Probe::Pass("running as root".into()),
            uid => Probe::Fail(format!("user is not running as root (euid {uid})")),
        }),
        check("NumCPU", Error, CONTROL_PLANE, "give the machine at least 2 CPUs", |h| {
            let n = h.num_cpus();
            if n >= MIN_CPUS {
                Probe::Pass(format!("{n} CPUs"))
            } else {
                Probe::Fail(format!("the number of available CPUs {n} is less than the required {MIN_CPUS}"))
            }
        }),
        check("Mem", Error, CONTROL_PLANE, "give the machine at least 1700 MiB of RAM", |h| {
            let mib = h.total_memory() / (1024 * 1024);
            if mib >= MIN_MEMORY_MIB {
                Probe::Pass(format!("{mib} MiB"))
            } else {
                Probe::Fail(format!("the system RAM ({mib} MB) is less than the minimum {MIN_MEMORY_MIB} MB"))
            }
        }),
        check("Swap", Warning, BOTH, "disable swap (swapoff -a) or configure the kubelet's swap behaviour", |h| {
            match h.read_file(Path::new("/proc/swaps")) {
                Some(s) if s.lines().filter(|l| !l.trim().is_empty()).count() > 1 => {
                    Probe::Fail("swap is supported for cgroup v2 only; the NodeSwap feature must be configured in the kubelet, or swap turned off".into())
                }
                Some(_) => Probe::Pass("no swap".into()),
                None => Probe::Skip("/proc/swaps is not readable".into()),
            }
        }),
        check(
            "SystemVerification",
            Error,
            BOTH,
            "use a supported kernel (5.4, 5.10, 5.15 or 6.x) with cgroup v2 and the cpu, cpuset, memory and pids controllers",
            |h| system_verification(h),
        ),
        check("Hostname", Warning, BOTH, "set nodeRegistration.name or fix /etc/hosts / DNS", move |h| {
            let n = &input.node_name;
            if !crate::config::values::is_dns1123_subdomain(n) {
                Probe::Fail(format!("hostname {n:?} is not a valid node name (RFC 1123 subdomain)"))
            } else {
                let within = crate::timeouts::HOSTNAME_LOOKUP;
                match h.resolves(n, within) {
                    Some(true) => Probe::Pass(format!("{n} resolves")),
                    Some(false) => Probe::Fail(format!("hostname {n:?} could not be reached: lookup failed")),
                    None => Probe::Fail(format!(
                        "hostname {n:?} could not be reached: the lookup did not answer within {}s",
                        within.as_secs()
                    )),
                }
            }
        }),
        check(
            "CRI",
            Error,
            BOTH,
            "start the container runtime (systemctl start containerd) or set nodeRegistration.criSocket",
            move |h| {
                let path = input.cri_socket.trim_start_matches("unix://");
                match h.cri_version(Path::new(path), crate::timeouts::CRI_PROBE) {
                    Ok(v) => Probe::Pass(format!("{path}: {v}")),
                    Err(e) => Probe::Fail(format!("container runtime is not running: {e}")),
                }
            },
        ),
        check(
            "ContainerRuntimeVersion",
            Error,
            BOTH,
            "update the container runtime to one with the CRI RuntimeConfig call (containerd 2.0+, CRI-O 1.28+)",
            move |h| runtime_config(h, input),
        ),
        check(
            "ImagePull",
            Error,
            CONTROL_PLANE,
            "preload the images (archives in /usr/share/kubestrap/images; `kubestrap config images list` names them) or make their registry reachable",
            move |h| image_pull(h, input),
        ),
        check(
            "KubeletVersion",
            Error,
            BOTH,
            "install a kubelet no more than 3 minors older than, and not newer than, the control plane",
            move |h| kubelet_version(h, input),
        ),
        check(
            "Service-Kubelet",
            Warning,
            BOTH,
            "enable the kubelet unit: systemctl enable kubelet.service",
            move |h| kubelet_service(h, input),
        ),
        check(
            "ClockSanity",
            Error,
            BOTH,
            "fix the clock (NTP, RTC) before certificates are made or checked",
            move |h| clock(h, input),
        ),
        check(
            path_name("DiskSpace", "/var/lib"),
            Error,
            BOTH,
            "free space under /var/lib (images, etcd and logs live there)",
            move |h| {
                let p = under(input, "/var/lib");
                match h.free_space(&p) {
                    Some(b) if b < MIN_FREE_BYTES => {
                        Probe::Fail(format!("only {} MiB free under /var/lib; at least 1024 MiB is needed", b >> 20))
                    }
                    Some(b) if b < LOW_FREE_BYTES => {
                        Probe::Warn(format!("only {} MiB free under /var/lib; image pulls may evict pods", b >> 20))
                    }
                    Some(b) => Probe::Pass(format!("{} MiB free", b >> 20)),
                    None => Probe::Skip(format!("{} is not readable", p.display())),
                }
            },
        ),
        check("Entropy", Error, BOTH, "wait for the kernel's random pool (or add virtio-rng to the VM)", |h| {
            if h.entropy_ready() {
                Probe::Pass("random pool initialised".into())
            } else {
                Probe::Fail(
                    "the kernel's random pool is not initialised yet; keys made now would block or be weak".into(),
                )
            }
        }),
        check(
            "Firewalld",
            Warning,
            CONTROL_PLANE,
            "open the API server and kubelet ports in firewalld, or stop it",
            move |h| {
                if h.process_running("firewalld") {
                    Probe::Fail(format!(
                        "firewalld is active, please ensure ports [{} {KUBELET_PORT}] are open or your cluster may not function correctly",
                        input.bind_port
                    ))
                } else {
                    Probe::Pass("firewalld is not running".into())
                }
            },
        ),
    ];
    t.extend(ports(input));
    t.extend(files(input));
    t.extend(commands(input));
    t.extend(proxies(input));
    t.extend(forwarding(input));
    t
}

/// kubeadm 1.37 binds each port where its component will listen (checks.go InitNodeChecks): a
/// `bind-address` extra arg for the API server, scheduler and controller-manager, the advertise
/// address for etcd; else (and always for the kubelet) all addresses.
fn ports(input: &Input) -> Vec<Check<'_>> {
    let b = &input.bind;
    let mut list: Vec<(u16, &'static [Role], Option<&str>)> = vec![
        (input.bind_port, CONTROL_PLANE, b.api_server.as_deref()),
        (SCHEDULER_PORT, CONTROL_PLANE, b.scheduler.as_deref()),
        (KCM_PORT, CONTROL_PLANE, b.controller_manager.as_deref()),
        (KUBELET_PORT, BOTH, None),
    ];
    if input.etcd_data_dir.is_some() {
        let etcd = b.etcd.as_deref();
        list.extend([(ETCD_CLIENT_PORT, CONTROL_PLANE, etcd), (ETCD_PEER_PORT, CONTROL_PLANE, etcd)]);
    }
    list.into_iter()
        .map(|(port, roles, address)| {
            check(
                format!("Port-{port}"),
                Severity::Error,
                roles,
                "stop what listens on the port (ss -ltnp) or change the port",
                move |h| match h.can_listen(address, port) {
                    Ok(()) => Probe::Pass(match address {
                        Some(a) => format!("port {port} is free on {a}"),
                        None => format!("port {port} is free"),
                    }),
                    Err(e) => Probe::Fail(e.to_string()),
                },
            )
        })
        .collect()
}

fn files(input: &Input) -> Vec<Check<'_>> {
    let mut v = Vec::new();
    let mut file = |host_path: String, roles: &'static [Role]| {
        v.push(check(
            path_name("FileAvailable", &host_path),
            Severity::Error,
            roles,
            "remove it (kubeadm reset) if it is left from an old node",
            move |h| {
                if h.exists(&under(input, &host_path)) {
                    if input.resuming {
                        return Probe::Pass(format!(
                            "{host_path} exists from the interrupted kubestrap run being resumed"
                        ));
                    }
                    Probe::Fail(format!("{host_path} already exists"))
                } else {
                    Probe::Pass(format!("{host_path} is free"))
                }
            },
        ));
    };
    for m in ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"] {
        file(format!("{MANIFESTS_DIR}/{m}.yaml"), CONTROL_PLANE);
    }
    file(format!("{KUBERNETES_DIR}/{KUBELET_CONF}"), JOINING);
    file(format!("{KUBERNETES_DIR}/bootstrap-kubelet.conf"), JOINING);
    // A joining control plane may hold the shared CAs already (kubeadm's manual-copy mode).
    file(input.ca_cert_path.clone(), WORKER);
    if let Some(dir) = &input.etcd_data_dir {
        v.push(check(
            path_name("DirAvailable", dir),
            Severity::Error,
            CONTROL_PLANE,
            "empty or remove the etcd data dir if it is left from an old cluster",
            move |h| match h.list_dir(&under(input, dir)) {
                Some(entries) if !entries.is_empty() && !input.resuming => Probe::Fail(format!("{dir} is not empty")),
                _ => Probe::Pass(format!("{dir} is empty or absent")),
            },
        ));
    }
    v
}

fn commands(input: &Input) -> Vec<Check<'_>> {
    let mut names: Vec<&'static str> = Vec::new();
    // kube-proxy needs conntrack on PATH only before 1.32; kubeadm join passes no version.
    if input.role == Role::ControlPlane && input.kubernetes_version.minor < 32 {
        names.push("conntrack");
    }
    names.extend(REQUIRED_COMMANDS);
    names
        .into_iter()
        .map(|cmd| {
            check(
                format!("FileExisting-{cmd}"),
                Severity::Error,
                BOTH,
                "install it in the image (losetup and mount: util-linux; cp: coreutils; conntrack: conntrack)",
                move |h| match h.find_in_path(cmd) {
                    Some(p) => Probe::Pass(p.display().to_string()),
                    None => Probe::Fail(format!("{cmd} not found in system path")),
                },
            )
        })
        .collect()
}

fn proxies(input: &Input) -> Vec<Check<'_>> {
    let mut v = Vec::new();
    let target = match input.role {
        Role::ControlPlane => input.advertise_address.map(|a| a.to_string()),
        Role::Worker | Role::ControlPlaneJoin => input.discovery_host.clone(),
    };
    if let Some(target) = target {
        v.push(check("HTTPProxy", Severity::Warning, BOTH, "add the address to NO_PROXY", move |h| match proxy::proxy_for(h, &target) {
            Some(p) => Probe::Fail(format!("Connection to \"https://{target}\" uses proxy \"{p}\". If that is not intended, adjust your proxy settings")),
            None => Probe::Pass(format!("https://{target} is reached directly")),
        }));
    }
    for c in input.service_subnets.iter().chain(&input.pod_subnets) {
        let c = *c;
        v.push(check("HTTPProxyCIDR", Severity::Warning, CONTROL_PLANE, "add the CIDR to NO_PROXY", move |h| {
            let first = c.nth(1).map(|a| a.to_string()).unwrap_or_default();
            match proxy::proxy_for(h, &first) {
                Some(p) => Probe::Fail(format!("connection to {c:?} uses proxy \"{p}\". This may lead to malfunctional cluster setup. Make sure that Pod and Services IP ranges specified correctly as exceptions in proxy configuration", c = c.to_string())),
                None => Probe::Pass(format!("{c} is reached directly")),
            }
        }));
    }
    v
}

fn forwarding(input: &Input) -> Vec<Check<'_>> {
    let mut addrs: Vec<bool> =
        input.service_subnets.iter().chain(&input.pod_subnets).map(|c| c.addr.is_ipv6()).collect();
    if let Some(a) = input.advertise_address {
        addrs.push(a.is_ipv6());
    }
    if let Some(h) = input.discovery_host.as_deref().and_then(|h| h.parse::<std::net::IpAddr>().ok()) {
        addrs.push(h.is_ipv6());
    }
    if addrs.is_empty() {
        addrs.push(false);
    }
    let mut v = Vec::new();
    for (ipv6, path) in [(false, "/proc/sys/net/ipv4/ip_forward"), (true, "/proc/sys/net/ipv6/conf/default/forwarding")]
    {
        if !addrs.contains(&ipv6) {
            continue;
        }
        v.push(check(
            path_name("FileContent", path),
            Severity::Error,
            BOTH,
            "enable forwarding: sysctl -w net.ipv4.ip_forward=1 (and persist it in /etc/sysctl.d)",
            move |h| match h.read_file(Path::new(path)) {
                Some(c) if c.starts_with('1') => Probe::Pass(format!("{path} is 1")),
                Some(c) => Probe::Fail(format!("{path} contents are not set to 1 (found {:?})", c.trim())),
                None => Probe::Fail(format!("{path} does not exist")),
            },
        ));
    }
    v
}

/// kubeadm 1.37's ContainerRuntimeVersion (checks.go): a runtime that answers RuntimeConfig with
/// gRPC Unimplemented is a warning (the kubelet's cgroupDriver fallback ends in 1.38); any
/// other failure is an error.
fn runtime_config(h: &dyn Host, input: &Input) -> Probe {
    let path = input.cri_socket.trim_start_matches("unix://");
    match h.cri_runtime_config(Path::new(path), crate::timeouts::CRI_PROBE) {
        Ok(true) => Probe::Pass(format!("{path} implements RuntimeConfig")),
        Ok(false) => Probe::Warn(RUNTIME_CONFIG_MISSING.into()),
        Err(e @ crate::cri::CriError::Connect { .. }) => {
            Probe::Fail(format!("could not connect to the container runtime: {e}"))
        }
        Err(e) => Probe::Fail(format!("could not check if the runtime config is available: {e}")),
    }
}

/// kubeadm's warning text, word for word.
pub const RUNTIME_CONFIG_MISSING: &str = "You must update your container runtime to a version that supports the CRI method RuntimeConfig. Falling back to using cgroupDriver from kubelet config will be removed in 1.38. For more information, see https://git.k8s.io/enhancements/keps/sig-node/4033-group-driver-detection-over-cri";

fn kubelet_version(h: &dyn Host, input: &Input) -> Probe {
    let Some(bin) = input.kubelet.clone().or_else(|| h.find_in_path("kubelet")) else {
        return Probe::Fail("couldn't get kubelet version: kubelet not found in system path".into());
    };
    let out = match h.kubelet_version(&bin) {
        Ok(o) => o,
        Err(e) => return Probe::Fail(format!("couldn't get kubelet version: {e}")),
    };
    let Some(v) = out.split_whitespace().find_map(|w| crate::config::values::Version::parse(w).ok()) else {
        return Probe::Fail(format!("couldn't parse kubelet version from {out:?}"));
    };
    // kubeadm's KubeletVersionCheck: the minimum is kubeadm's own (MinimumKubeletVersion, three
    // minors below its own: v1.34.0 for 1.37), whatever the cluster's version; only the minor is
    // compared with the control plane's.
    // Versions as Go's version.String() gives them: no "v".
    let cp = &input.kubernetes_version;
    let (kv, cv) = (v.to_string(), cp.to_string());
    let (kv, cv) = (kv.trim_start_matches('v'), cv.trim_start_matches('v'));
    if (v.major, v.minor) < (1, MIN_KUBELET_MINOR) {
        Probe::Fail(format!("Kubelet version \"{kv}\" is lower than kubeadm can support. Please upgrade kubelet"))
    } else if v.major > cp.major || v.minor > cp.minor {
        Probe::Fail(format!(
            "the kubelet version is higher than the control plane version. This is not a supported version skew and \
             may lead to a malfunctional cluster. Kubelet version: \"{kv}\" Control plane version: \"{cv}\""
        ))
    } else {
        Probe::Pass(format!("kubelet {v}"))
    }
}

fn kubelet_service(h: &dyn Host, input: &Input) -> Probe {
    let units = ["/etc/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"];
    if !units.iter().any(|d| h.exists(&under(input, &format!("{d}/kubelet.service")))) {
        return Probe::Fail("kubelet service does not exist".into());
    }
    let etc = under(input, "/etc/systemd/system");
    let enabled = h
        .list_dir(&etc)
        .unwrap_or_default()
        .iter()
        .filter(|d| d.ends_with(".wants"))
        .any(|d| h.exists(&etc.join(d).join("kubelet.service")));
    if enabled {
        Probe::Pass("kubelet.service is enabled".into())
    } else {
        Probe::Fail("kubelet service is not enabled, please run 'systemctl enable kubelet.service'".into())
    }
}

fn clock(h: &dyn Host, input: &Input) -> Probe {
    let now = h.now();
    if let Some(built) = h.own_mtime()
        && now < built
    {
        return Probe::Fail(format!("the clock says {} but this image was built at {}", rfc3339(now), rfc3339(built)));
    }
    let ca = under(input, &format!("{}/ca.crt", input.certs_dir));
    if let Some(pem) = h.read_file(&ca)
        && let Ok(c) = crate::pki::check::CertFile::parse(pem.as_bytes())
        && let Ok(x) = c.x509()
    {
        let v = x.validity();
        let (nb, na) = (v.not_before.to_datetime(), v.not_after.to_datetime());
        if now < nb || now > na {
            return Probe::Fail(format!(
                "the clock says {} but the cluster CA is valid from {} to {}",
                rfc3339(now),
                rfc3339(nb),
                rfc3339(na)
            ));
        }
    }
    Probe::Pass(format!("now is {}", rfc3339(now)))
}

fn rfc3339(t: time::OffsetDateTime) -> String {
    crate::pki::check::rfc3339(t)
}

/// kubeadm's ImagePull (RunPullImagesCheck, serial): each image the runtime lacks is pulled now,
/// so that a node with neither the image preloaded nor its registry reachable fails here, before
/// the kubelet starts, naming the images.
fn image_pull(h: &dyn Host, input: &Input) -> Probe {
    if input.images.is_empty() {
        return Probe::Skip("the cluster's configuration (and so its images) is not known yet".into());
    }
    let policy = if input.image_pull_policy.is_empty() { "IfNotPresent" } else { input.image_pull_policy.as_str() };
    match policy {
        "Never" => return Probe::Skip("imagePullPolicy is Never: images are not pulled".into()),
        "Always" | "IfNotPresent" => {}
        other => return Probe::Fail(format!("unsupported pull policy {other:?}")),
    }
    let socket = Path::new(input.cri_socket.trim_start_matches("unix://"));
    let (mut present, mut pulled, mut missing, mut first_error) = (0, 0, Vec::new(), None);
    for image in &input.images {
        match h.cri_image_present(socket, image, crate::timeouts::CRI_PROBE) {
            Ok(true) if policy == "IfNotPresent" => {
                present += 1;
                continue;
            }
            Ok(_) => {}
            Err(e) => return Probe::Fail(format!("could not connect to the container runtime: {e}")),
        }
        log::info!("[preflight] Pulling {image}");
        match h.cri_pull_image(socket, image, crate::timeouts::IMAGE_PULL) {
            Ok(()) => pulled += 1,
            Err(e) => {
                first_error.get_or_insert(e.to_string());
                missing.push(image.as_str());
            }
        }
    }
    match first_error {
        None => Probe::Pass(format!("{present} images present, {pulled} pulled")),
        Some(e) => Probe::Fail(format!(
            "images neither preloaded nor pullable: {} (first pull error: {e})",
            missing.join(", ")
        )),
    }
}
