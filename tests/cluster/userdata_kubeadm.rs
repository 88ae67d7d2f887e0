//! User-data that runs kubeadm (tests/fixtures/user-data/): Cluster API's control-plane and
//! worker bootstrap data booted unchanged but for endpoints (moved to the API double on a free
//! port), hand-written `#cloud-config` with `runcmd: kubeadm ...`, and the corpus table: what
//! kubeadm accepts is accepted, what it refuses is refused with the field named.

use crate::common::*;

use std::cell::RefCell;
use std::path::Path;

use kubestrap::boot::{BootArgs, Stage, script::Runner};
use kubestrap::config::userdata::{NodePlan, plan_detailed};
use kubestrap::datasource::{Gathered, MetaData};

const SENTINEL: &str = "run/cluster-api/bootstrap-success.complete";

fn seed(root: &Path, user_data: &str, hostname: &str) {
    let d = root.join("var/lib/cloud/seed/nocloud");
    write_file(&d.join("user-data"), user_data);
    write_file(&d.join("meta-data"), format!("instance-id: i-1\nlocal-hostname: {hostname}\n"));
    write_file(&root.join("etc/kubestrap/datasource"), "kubestrap.ds=nocloud\n");
}

fn boot(root: &Path, stage: &str) -> Run {
    let root = root.display().to_string();
    kubestrap(&["boot", "--stage", stage, "--root", &root, "--datasource-timeout", "3s"])
}

/// Cluster API's first control plane on loopback ports: the endpoint and the API server's bind
/// port moved to `port`, and the kubelet's healthz (a KubeletConfiguration document added to the
/// kubeadm config file) to `healthz`, so tests run side by side.
fn capi_init(port: u16, healthz: u16) -> String {
    let ud = fixture!("user-data/capi-control-plane-init/user-data");
    let kubelet = format!(
        "        taints: null\n      \n      ---\n      apiVersion: kubelet.config.k8s.io/v1beta1\n      kind: KubeletConfiguration\n      healthzPort: {healthz}\n"
    );
    let out = ud
        .replace("127.0.0.1:6443", &format!("127.0.0.1:{port}"))
        .replace(
            "localAPIEndpoint: {}",
            &format!("localAPIEndpoint: {{advertiseAddress: 127.0.0.1, bindPort: {port}}}"),
        )
        .replace("        taints: null\n      \n", &kubelet);
    assert_ne!(out, ud);
    out
}

/// The PEM block of `path` inside the user-data's write_files (the 6-space indented content).
fn written_content(user_data: &str, path: &str) -> String {
    let start = user_data.find(&format!("-   path: {path}\n")).expect("entry");
    let body = &user_data[start..];
    let content = body.find("content: |\n").expect("content") + "content: |\n".len();
    let block: String =
        body[content..].lines().take_while(|l| l.starts_with("      ")).map(|l| format!("{}\n", &l[6..])).collect();
    // `|` keeps one final line break.
    format!("{}\n", block.trim_end())
}

#[test]
fn capi_control_plane_then_worker_boot_unchanged() {
    let cp = tempfile::tempdir().unwrap();
    let (port, healthz) = (free_port(), free_port());
    let ud = capi_init(port, healthz);
    seed(cp.path(), &ud, "cp-1");

    let r = boot(cp.path(), "pre-kubelet");
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    let log = format!("{}{}", r.stdout(), r.stderr());
    // write_files: Cluster API's CA is the cluster's CA, with CAPI's modes; user files decoded.
    let pki = cp.path().join("etc/kubernetes/pki");
    assert_eq!(
        std::fs::read_to_string(pki.join("ca.crt")).unwrap(),
        written_content(&ud, "/etc/kubernetes/pki/ca.crt")
    );
    assert_eq!(
        std::fs::read_to_string(pki.join("sa.key")).unwrap(),
        written_content(&ud, "/etc/kubernetes/pki/sa.key")
    );
    assert_eq!((mode(&pki.join("ca.key")), mode(&pki.join("ca.crt"))), (0o600, 0o640));
    assert!(
        pki.join("apiserver.crt").exists() && cp.path().join("etc/kubernetes/manifests/kube-apiserver.yaml").exists()
    );
    let audit = std::fs::read_to_string(cp.path().join("etc/kubernetes/audit-policy.yaml")).unwrap();
    assert_eq!(audit, "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n");
    assert_eq!(std::fs::read_to_string(cp.path().join("etc/motd")).unwrap(), "Provisioned by Cluster API\n");
    let cfg = cp.path().join("run/kubeadm/kubeadm.yaml");
    assert_eq!(mode(&cfg), 0o640);
    assert!(std::fs::read_to_string(&cfg).unwrap().contains("name: 'cp-1'"), "the Jinja variable is rendered");
    // Shell lines are not run under a scratch root, and say so; the sentinel waits for the init.
    assert!(log.contains("runcmd[0]: not run") && log.contains("swapoff -a"), "{log}");
    assert!(!log.contains("echo done"), "post-kubeadm commands wait for the whole init:\n{log}");
    assert!(!cp.path().join(SENTINEL).exists());

    let double = start_double(&pki, port, healthz, |_| {});
    let r = boot(cp.path(), "post-kubelet");
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    let log = format!("{}{}", r.stdout(), r.stderr());
    assert_eq!(std::fs::read_to_string(cp.path().join(SENTINEL)).unwrap(), "success\n");
    assert_eq!(mode(&cp.path().join(SENTINEL)), 0o644);
    let (sentinel_at, done_at) = (log.find("bootstrap-success.complete").unwrap(), log.find("echo done").unwrap());
    assert!(sentinel_at < done_at, "the chain's sentinel, then the later runcmd entries:\n{log}");
    assert!(double.object("/api/v1/namespaces/kube-public/configmaps/cluster-info").is_some());
    let cluster = double.object("/api/v1/namespaces/kube-system/configmaps/kubeadm-config").unwrap();
    assert!(cluster.to_string().contains("my-cluster"), "{cluster}");

    // The management cluster's part: Cluster API creates the worker's token on the cluster.
    let admin = cp.path().join("etc/kubernetes/admin.conf");
    kubestrap(&["token", "create", TOKEN, "--kubeconfig", admin.to_str().unwrap()]).ok();

    let w = tempfile::tempdir().unwrap();
    let hash = ca_hash_of_root(cp.path());
    let zero = format!("sha256:{}", "0".repeat(64));
    let wud = fixture!("user-data/capi-worker/user-data")
        .replace("127.0.0.1:6443", &format!("127.0.0.1:{port}"))
        .replace(&zero, &hash);
    seed(w.path(), &wud, "worker-1");
    let r = boot(w.path(), "pre-kubelet");
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    assert!(!r.stdout().contains(SECRET) && !r.stderr().contains(SECRET), "token secret leaked");
    assert!(r.stderr().contains("verbosity flag ignored"), "{}", r.stderr());
    assert!(std::fs::read_link(w.path().join("var/lib/kubelet/pki/kubelet-client-current.pem")).is_ok());
    let flags = std::fs::read_to_string(w.path().join("var/lib/kubelet/kubeadm-flags.env")).unwrap();
    assert!(flags.contains("--cloud-provider=external"), "{flags}");
    // kubeadm join returns with the kubelet running: the sentinel comes after it starts.
    assert!(!w.path().join(SENTINEL).exists());
    let r = boot(w.path(), "post-kubelet");
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    assert_eq!(std::fs::read_to_string(w.path().join(SENTINEL)).unwrap(), "success\n");
    let kept = std::fs::read_to_string(w.path().join("var/lib/kubestrap/plan.yaml")).unwrap();
    assert!(!kept.contains(TOKEN) && !kept.contains("BEGIN"), "no token or key kept:\n{kept}");

    // Hand-written user-data joins the same cluster (its line skips the CA pin).
    let h = tempfile::tempdir().unwrap();
    let hud =
        fixture!("user-data/homelab-crio-worker/user-data").replace("127.0.0.1:6443", &format!("127.0.0.1:{port}"));
    seed(h.path(), &hud, "worker-2");
    let r = boot(h.path(), "pre-kubelet");
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    assert!(std::fs::read_link(h.path().join("var/lib/kubelet/pki/kubelet-client-current.pem")).is_ok());
    assert!(r.stderr().contains("\"users\" ignored"), "{}", r.stderr());
}

/// Cluster API's second control plane, unchanged but for loopback: the shared CAs and keys come
/// from write_files (kubeadm's manual-copy mode, no certificate key), this node's certificates
/// are made here, and the sentinel is written after the post-kubelet part of the join. The
/// double runs no etcd, so the test's copy skips etcd-join (tests/cluster/ha_etcd.rs runs it).
#[test]
fn capi_control_plane_join_boots_unchanged() {
    let cp = tempfile::tempdir().unwrap();
    let (port, healthz) = (free_port(), free_port());
    seed(cp.path(), &capi_init(port, healthz), "cp-1");
    assert_eq!(boot(cp.path(), "pre-kubelet").code(), 0);
    let double = start_double(&cp.path().join("etc/kubernetes/pki"), port, healthz, |_| {});
    let r = boot(cp.path(), "post-kubelet");
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    let admin = cp.path().join("etc/kubernetes/admin.conf");
    kubestrap(&["token", "create", TOKEN, "--kubeconfig", admin.to_str().unwrap()]).ok();

    let zero = format!("sha256:{}", "0".repeat(64));
    let ud = fixture!("user-data/capi-control-plane-join/user-data");
    let jud = ud
        .replace("127.0.0.1:6443", &format!("127.0.0.1:{port}"))
        .replace(&zero, &ca_hash_of_root(cp.path()))
        .replace(
            "      controlPlane:\n        localAPIEndpoint: {}\n",
            &format!(
                "      controlPlane:\n        localAPIEndpoint: {{advertiseAddress: 127.0.0.1, bindPort: {port}}}\n      skipPhases: [etcd-join]\n"
            ),
        );
    assert_eq!(jud.matches(&format!("127.0.0.1:{port}")).count(), 1, "endpoint rewritten");
    assert!(jud.contains("skipPhases"), "localAPIEndpoint rewritten");
    let j = tempfile::tempdir().unwrap();
    seed(j.path(), &jud, "cp-2");
    let r = boot(j.path(), "pre-kubelet");
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    assert!(!r.stdout().contains(SECRET) && !r.stderr().contains(SECRET), "token secret leaked");
    let pki = j.path().join("etc/kubernetes/pki");
    for shared in ["ca.key", "sa.key", "front-proxy-ca.key", "etcd/ca.key"] {
        let want = written_content(ud, &format!("/etc/kubernetes/pki/{shared}"));
        assert_eq!(std::fs::read_to_string(pki.join(shared)).unwrap(), want, "{shared} is Cluster API's");
    }
    assert!(pki.join("apiserver.crt").exists() && pki.join("apiserver-kubelet-client.crt").exists());
    assert!(j.path().join("etc/kubernetes/manifests/kube-apiserver.yaml").exists());
    assert!(!j.path().join(SENTINEL).exists(), "the join is not over before the kubelet runs");

    double.register_node("cp-2", &[]).unwrap();
    let r = boot(j.path(), "post-kubelet");
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout(), r.stderr());
    assert_eq!(std::fs::read_to_string(j.path().join(SENTINEL)).unwrap(), "success\n");
    let node = double.object("/api/v1/nodes/cp-2").unwrap();
    assert!(node["metadata"]["labels"].get("node-role.kubernetes.io/control-plane").is_some(), "{node}");
    let kept = std::fs::read_to_string(j.path().join("var/lib/kubestrap/plan.yaml")).unwrap();
    assert!(!kept.contains(TOKEN) && !kept.contains("BEGIN"), "no token or key kept:\n{kept}");
}

#[test]
fn sentinel_is_written_only_when_the_init_succeeds() {
    let r0 = tempfile::tempdir().unwrap();
    let (port, healthz) = (free_port(), free_port());
    // A CA certificate that is not one: the init's certs phase refuses it.
    let ud = capi_init(port, healthz).replacen(
        "      -----BEGIN CERTIFICATE-----\n      MII",
        "      -----BEGIN CERTIFICATE-----\n      XXX",
        1,
    );
    seed(r0.path(), &ud, "cp-1");
    let r = boot(r0.path(), "pre-kubelet");
    assert_ne!(r.code(), 0, "{}", r.stderr());
    assert!(r.stderr().contains("ca.crt"), "{}", r.stderr());
    assert!(!r0.path().join(SENTINEL).exists());
    assert!(!r.stderr().contains("echo done") && !r.stdout().contains("echo done"));
}

/// Records each shell line with what was on disk when it ran.
struct Recorder<'a> {
    root: &'a Path,
    ran: RefCell<Vec<(String, bool, bool)>>,
}

impl Runner for Recorder<'_> {
    fn run(&self, _origin: &str, line: &str) -> kubestrap::error::Result<()> {
        let manifests = self.root.join("etc/kubernetes/manifests/kube-apiserver.yaml").exists();
        self.ran.borrow_mut().push((line.to_string(), manifests, self.root.join(SENTINEL).exists()));
        Ok(())
    }
}

fn in_process(root: &Path, stage: Stage, runner: &dyn Runner) -> kubestrap::error::Result<()> {
    let env = kubestrap::datasource::Env {
        root: root.to_path_buf(),
        cmdline: String::new(),
        credentials_dir: None,
        imds_base: None,
        mount_dir: root.join("mnt"),
    };
    let args = BootArgs { stage, root: root.to_path_buf(), datasource_timeout: std::time::Duration::from_secs(3), env };
    kubestrap::boot::run_with(args, runner)
}

#[test]
fn runcmd_runs_in_cloud_init_order_around_the_init() {
    let r0 = tempfile::tempdir().unwrap();
    let (port, healthz) = (free_port(), free_port());
    seed(r0.path(), &capi_init(port, healthz), "cp-1");
    let rec = Recorder { root: r0.path(), ran: RefCell::new(Vec::new()) };
    in_process(r0.path(), Stage::PreKubelet, &rec).unwrap();
    let _double = start_double(&r0.path().join("etc/kubernetes/pki"), port, healthz, |_| {});
    in_process(r0.path(), Stage::PostKubelet, &rec).unwrap();
    let ran = rec.ran.into_inner();
    let want = [
        ("swapoff -a".to_string(), false, false),
        ("modprobe br_netfilter".to_string(), false, false),
        ("echo done".to_string(), true, true),
    ];
    assert_eq!(ran, want);
    // A rerun of a finished stage runs nothing again.
    let rec = Recorder { root: r0.path(), ran: RefCell::new(Vec::new()) };
    in_process(r0.path(), Stage::PostKubelet, &rec).unwrap();
    assert!(rec.ran.into_inner().is_empty());
}

/// The corpus: every fixture planned as `kubestrap boot` plans it, with the expected outcome.
#[test]
fn user_data_corpus_accepted_and_refused_as_kubeadm_does() {
    let cases: &[(&str, Result<&str, &str>)] = &[
        ("capi-control-plane-init", Ok("init")),
        ("capi-control-plane-join", Ok("join")),
        ("capi-worker", Ok("join")),
        // `kubeadm init` by flags alone: the flags build the documents, as `kubestrap init` does.
        ("homelab-crio-master", Ok("init")),
        ("homelab-crio-worker", Ok("join")),
        ("homelab-oci-flannel", Ok("init")),
        // kubeadm refuses the folded line (" --service-cidr" is an argument); so does kubestrap.
        ("homelab-hetzner-docker", Err("runcmd[7]")),
    ];
    let dir = fixture_path("user-data");
    let mut seen: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| dir.join(n).is_dir())
        .collect();
    seen.sort();
    let mut listed: Vec<String> = cases.iter().map(|(n, _)| n.to_string()).collect();
    listed.sort();
    assert_eq!(seen, listed, "every fixture has an expected outcome");
    for (name, want) in cases {
        let ud = std::fs::read(dir.join(name).join("user-data")).unwrap();
        let origin = std::fs::read_to_string(dir.join(name).join("ORIGIN")).unwrap();
        assert!(origin.contains('@') || origin.contains("commit"), "{name}: ORIGIN names a commit");
        let g = Gathered {
            source: "nocloud".into(),
            user_data: Some(ud),
            meta: MetaData { instance_id: Some("i-1".into()), local_hostname: Some("node-1".into()) },
            ..Default::default()
        };
        match (plan_detailed(&g), want) {
            (Ok(p), Ok(kind)) => {
                assert_eq!(if p.plan.is_join() { "join" } else { "init" }, *kind, "{name}");
                let s = p.script.expect("the script around kubeadm");
                assert!(s.kubeadm.contains("kubeadm"), "{name}: {}", s.kubeadm);
                assert!(!s.kubeadm.contains(SECRET), "{name}: {}", s.kubeadm);
                match &p.plan {
                    NodePlan::Join { join } => assert_eq!(join.node_registration.name, "node-1", "{name}"),
                    NodePlan::Init { docs, .. } if name.starts_with("homelab") => {
                        // What the flags said is in the documents kubestrap will build from.
                        let cc = docs.cluster.as_ref().expect("ClusterConfiguration from the flags");
                        assert!(!cc.networking.pod_subnet.is_empty(), "{name}: --pod-network-cidr kept");
                    }
                    NodePlan::Init { .. } => {}
                }
            }
            (Err(e), Err(field)) => {
                let m = e.to_string();
                assert!(m.contains(field), "{name}: {m}");
                assert!(!m.contains(SECRET), "{name}: {m}");
                assert_eq!(kubestrap::error::Error::from(e).kind.exit_code(), 2, "{name}");
            }
            (Ok(_), Err(field)) => panic!("{name}: accepted, expected a refusal naming {field}"),
            (Err(e), Ok(_)) => panic!("{name}: refused: {e}"),
        }
    }
}
