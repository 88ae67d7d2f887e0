//! Preflight against this real machine: a held port, real unix sockets (containerd, a mute
//! socket, none), a non-root run, and the report's shape and exit codes.

use crate::common::*;

use crate::common::needs::{Need, need};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn report(r: &Run) -> serde_json::Value {
    serde_json::from_str(&r.stdout())
        .unwrap_or_else(|e| panic!("report is not JSON ({e}):\n{}\n{}", r.stdout(), r.stderr()))
}

fn row<'a>(rep: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    rep["rows"].as_array().unwrap().iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("no row {name}"))
}

fn worker(extra: &[&str]) -> Run {
    let mut args = vec!["preflight", "--role", "worker", "--output", "json"];
    args.extend_from_slice(extra);
    kubestrap(&args)
}

#[test]
fn a_held_port_fails_its_check() {
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let s = Scratch::new(
        &BASE_CONFIG
            .replace("advertiseAddress: 10.0.0.10", &format!("advertiseAddress: 10.0.0.10\n  bindPort: {port}")),
    );
    let config = s.config();
    let r = kubestrap(&["preflight", "--role", "control-plane", "--config", &config, "--output", "json"]);
    assert_eq!(r.code(), 3, "{}", r.stderr());
    let rep = report(&r);
    let p = row(&rep, &format!("Port-{port}"));
    assert_eq!(p["result"], "error", "{p}");
    assert!(r.stderr().contains(&format!("[ERROR Port-{port}]")), "{}", r.stderr());
    drop(held);
    let r = kubestrap(&["preflight", "--role", "control-plane", "--config", &config, "--output", "json"]);
    assert_eq!(row(&report(&r), &format!("Port-{port}"))["result"], "pass");
}

/// A containerd of our own (killed first, then its state dir removed, when dropped).
struct Containerd {
    _child: ChildGuard,
    _dir: tempfile::TempDir,
    socket: String,
}

fn start_containerd() -> Containerd {
    require_tool("containerd");
    start_containerd_bin("containerd")
}

fn start_containerd_bin(bin: &str) -> Containerd {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let socket = format!("{d}/containerd.sock");
    let cfg = fill(fixture!("containerd/config.toml"), &[("dir", &d), ("socket", &socket)]);
    std::fs::write(dir.path().join("config.toml"), cfg).unwrap();
    let child = ChildGuard(
        Command::new(bin)
            .args(["--config", &format!("{d}/config.toml")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start containerd"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::path::Path::new(&socket).exists() {
        assert!(Instant::now() < deadline, "containerd did not create {socket}");
        std::thread::sleep(Duration::from_millis(100));
    }
    Containerd { _child: child, _dir: dir, socket }
}

#[test]
fn cri_answers_from_real_containerd_and_not_from_a_mute_or_missing_socket() {
    need!(Need::tool("containerd"));
    let ctd = start_containerd();
    let sock = format!("unix://{}", ctd.socket);
    // containerd may take a moment to serve the CRI plugin after creating the socket.
    let deadline = Instant::now() + Duration::from_secs(20);
    let cri = loop {
        let rep = report(&worker(&["--cri-socket", &sock]));
        let cri = row(&rep, "CRI").clone();
        if cri["result"] == "pass" || Instant::now() > deadline {
            break cri;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(cri["result"], "pass", "{cri}");
    assert!(cri["message"].as_str().unwrap().contains("containerd"), "{cri}");
    // Debian's containerd 1.x has no RuntimeConfig: kubeadm 1.37 warns, word for word; a 2.x
    // passes (containerd_2_implements_runtime_config). No other version is expected here.
    let message = cri["message"].as_str().unwrap().to_string();
    let rep = report(&worker(&["--cri-socket", &sock]));
    let v = row(&rep, "ContainerRuntimeVersion");
    if message.contains("containerd 1.") {
        assert_eq!(v["result"], "warning", "{v}");
        assert_eq!(v["message"], kubestrap::preflight::RUNTIME_CONFIG_MISSING, "{v}");
    } else {
        assert!(message.contains("containerd 2."), "an unexpected containerd: {message}");
        assert_eq!(v["result"], "pass", "{v}");
    }

    let dir = tempfile::tempdir().unwrap();
    let mute_path = dir.path().join("mute.sock");
    let mute = UnixListener::bind(&mute_path).unwrap();
    // Accepts and then says nothing, like a wedged runtime, until the probe has given up: an
    // unbounded probe would hang here.
    let (done, wait_done) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let conn = mute.accept();
        let _ = wait_done.recv();
        drop(conn);
    });
    let rep = report(&worker(&["--cri-socket", &format!("unix://{}", mute_path.display())]));
    let cri = row(&rep, "CRI");
    assert_eq!(cri["result"], "error", "{cri}");
    assert!(cri["message"].as_str().unwrap().contains("did not answer"), "{cri}");
    let _ = done.send(());
    let _ = holder.join();

    let rep = report(&worker(&["--cri-socket", "unix:///nonexistent/cri.sock"]));
    assert!(row(&rep, "CRI")["message"].as_str().unwrap().contains("cannot connect"));
    let v = row(&rep, "ContainerRuntimeVersion");
    assert_eq!(v["result"], "error", "{v}");
    assert!(v["message"].as_str().unwrap().starts_with("could not connect to the container runtime: "), "{v}");
}

#[test]
fn containerd_2_implements_runtime_config() {
    need!(Need::real_bin(&crate::common::real_bins::dir().join("containerd")));
    // The containerd Kubernetes v1.37.2 is tested against (scripts/real-k8s); missing, it fails.
    let containerd = crate::common::real_bins::bin("containerd");
    let ctd = start_containerd_bin(&containerd.to_string_lossy());
    let sock = format!("unix://{}", ctd.socket);
    let deadline = Instant::now() + Duration::from_secs(20);
    let v = loop {
        let rep = report(&worker(&["--cri-socket", &sock]));
        let v = row(&rep, "ContainerRuntimeVersion").clone();
        if v["result"] == "pass" || Instant::now() > deadline {
            break v;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(v["result"], "pass", "{v}");
}

#[test]
fn a_port_held_on_another_address_passes_when_bind_address_is_set() {
    // kubeadm 1.37 listens on apiServer's bind-address: a port held on another loopback
    // address is no conflict there (it is one for the wildcard).
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let cfg =
        BASE_CONFIG.replace("advertiseAddress: 10.0.0.10", &format!("advertiseAddress: 10.0.0.10\n  bindPort: {port}"));
    let with_bind =
        format!("{}\napiServer:\n  extraArgs:\n  - name: bind-address\n    value: 127.0.0.2\n", cfg.trim_end());
    for (text, want) in [(cfg.clone(), "error"), (with_bind, "pass")] {
        let s = Scratch::new(&text);
        let config = s.config();
        let r = kubestrap(&["preflight", "--role", "control-plane", "--config", &config, "--output", "json"]);
        let p = row(&report(&r), &format!("Port-{port}")).clone();
        assert_eq!(p["result"], want, "{p}\n{}", r.stderr());
    }
}

#[test]
fn non_root_fails_is_privileged_user() {
    need!(Need::tool("setpriv"), Need::root());
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            &*BIN,
            "preflight",
            "--role",
            "worker",
            "--output",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = row(&rep, "IsPrivilegedUser");
    assert_eq!(p["result"], "error");
    assert!(p["message"].as_str().unwrap().contains("euid 65534"), "{p}");
}

#[test]
fn report_is_complete_and_ignoring_all_exits_zero() {
    need!(Need::root());
    let r = worker(&["--ignore-preflight-errors", "all,NoSuchCheck"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let rep = report(&r);
    let rows = rep["rows"].as_array().unwrap();
    for name in [
        "IsPrivilegedUser",
        "Swap",
        "SystemVerification",
        "Hostname",
        "CRI",
        "KubeletVersion",
        "Service-Kubelet",
        "ClockSanity",
        "DiskSpace--var-lib",
        "Entropy",
        "Port-10250",
        "FileAvailable--etc-kubernetes-kubelet.conf",
        "ContainerRuntimeVersion",
        "FileExisting-losetup",
        "FileExisting-mount",
        "FileExisting-cp",
        "FileContent--proc-sys-net-ipv4-ip_forward",
    ] {
        let r = row(&rep, name);
        assert!(["pass", "warning", "error", "skipped"].contains(&r["result"].as_str().unwrap()), "{r}");
        assert!(r["duration_us"].is_u64());
    }
    assert!(rows.iter().all(|r| r["result"] != "error"), "all errors must be ignored");
    for gone in ["ip", "iptables", "nsenter", "ethtool", "tc", "touch", "ebtables", "socat"] {
        let name = format!("FileExisting-{gone}");
        assert!(rows.iter().all(|r| r["name"] != name.as_str()), "kubeadm 1.33 dropped {name}");
    }
    assert_eq!(rep["unknown_ignores"], serde_json::json!(["nosuchcheck"]));
    assert!(r.stderr().contains("nosuchcheck"), "{}", r.stderr());
    assert_eq!(row(&rep, "IsPrivilegedUser")["result"], "pass", "tests run as root");
}

#[test]
fn bad_role_and_output_are_usage_errors() {
    assert_eq!(kubestrap(&["preflight", "--role", "master"]).code(), 2);
    assert_eq!(kubestrap(&["preflight", "--role", "worker", "--output", "yaml"]).code(), 2);
}

#[test]
fn init_under_a_scratch_root_skips_host_checks() {
    let s = Scratch::new(BASE_CONFIG);
    let r = s.init(&[]).ok();
    assert!(r.stderr().contains("[preflight] Skipped: --root"), "{}", r.stderr());
}
