//! Joins beside the plain one, all against one real control plane: the token commands, join as
//! phases (each alone, in order) up to a Ready Node, a join killed while its CSR waits that
//! resumes with the same CSR, file discovery, and the refusal of a name a Ready Node has.

use super::cluster::*;
use crate::common::*;

fn joined(root: &std::path::Path) -> bool {
    std::fs::read_link(at(root, "/var/lib/kubelet/pki/kubelet-client-current.pem")).is_ok()
}

fn assert_no_credentials(root: &std::path::Path) {
    for p in ["/etc/kubernetes/bootstrap-kubelet.conf", "/etc/kubernetes/kubelet.conf", "/var/lib/kubelet/pki"] {
        assert!(!at(root, p).exists(), "{p} left behind");
    }
}

#[test]
fn token_commands_phases_resume_and_discovery_file() {
    let mut c = Cluster::init("24h");
    let (ep, hash) = (format!("{CP_ADDR}:{}", c.port), c.ca_hash());

    // token create / list / delete through cp-1's admin.conf, read back with the real kubectl.
    let root = c.scratch.root_str();
    let created =
        run_in(&c.netns, &["token", "create", "--root", &root, "--description", "for workers", "--ttl", "2h"]);
    assert_eq!(created.code(), 0, "{}", created.stderr());
    let tok = created.stdout().trim().to_string();
    let id = &tok[..6];
    let listed = run_in(&c.netns, &["token", "list", "--root", &root]).ok().stdout();
    assert!(listed.contains(id) && listed.contains("for workers") && listed.contains("abcdef"), "{listed}");
    assert!(!listed.contains(&tok[7..]), "list must never show a secret:\n{listed}");
    assert!(listed.contains("authentication,signing"), "{listed}");
    let secret = c.get(&["-n", "kube-system", "secret", &format!("bootstrap-token-{id}")]);
    assert_eq!(secret["type"], "bootstrap.kubernetes.io/token");
    run_in(&c.netns, &["token", "delete", "--root", &root, id]).ok();
    assert_ne!(c.kubectl(&["-n", "kube-system", "get", "secret", &format!("bootstrap-token-{id}")]).0, 0);
    assert_eq!(run_in(&c.netns, &["token", "delete", "--root", &root, id]).code(), 2);
    c.wait_cluster_info_signed();

    // A phase whose input is missing says which phase makes it; exit 2, nothing written.
    let lone = Scratch::new("");
    let bare = c.bare_node("lone", 30);
    let r = run_in(&bare, &["join", "phase", "kubelet-start", "--root", &lone.root_str(), "--node-name", "lone"]);
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("run `kubestrap join phase discovery` first"), "{}", r.stderr());
    assert!(!lone.root().join("etc").exists());
    let token = ["join", ep.as_str(), "--token", TOKEN, "--discovery-token-ca-cert-hash", &hash];
    let lone_root = lone.root_str();
    let typo = [&token[..], &["--root", &lone_root]].concat();
    let r = run_in(&bare, &[&typo[..], &["--skip-phases", "discovery,kubelet-strat"]].concat());
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("\"kubelet-strat\"") && r.stderr().contains("join phases are"), "{}", r.stderr());
    // Skipping kubelet-start leaves discovery's product and no identity.
    run_in(&bare, &[&typo[..], &["--node-name", "lone", "--skip-phases", "kubelet-start"]].concat()).ok();
    assert!(at(&lone.root(), "/etc/kubernetes/bootstrap-kubelet.conf").exists());
    assert!(!at(&lone.root(), "/etc/kubernetes/kubelet.conf").exists());

    // worker-1 joins phase by phase; its kubelet starts from what kubelet-start wrote.
    let w = Scratch::new("");
    std::fs::write(w.config(), c.fill_node(fixture!("real/join.yaml"), "worker-1", 21, &w.root())).unwrap();
    let (cfg, wroot) = (w.config(), w.root_str());
    let phase = |p: &str| ["join", "phase", p, "--config", &cfg, "--root", &wroot].map(str::to_string).to_vec();
    let runs = c.node("worker-1", 21, w, &[phase("preflight"), phase("discovery"), phase("kubelet-start")]);
    for r in &runs {
        assert_eq!(r.code(), 0, "{}\n{}", r.stderr(), c.status());
    }
    assert_eq!(runs.len(), 3);
    assert!(runs[1].stderr().contains("[discovery]") && !runs[1].stderr().contains("[kubelet-start]"));
    c.wait_ready("worker-1");
    let w1 = c.hosts[1].root.clone();
    let again = run_in(&c.hosts[1].netns, &phase("kubelet-start").iter().map(String::as_str).collect::<Vec<_>>());
    assert!(again.stderr().contains("Already done"), "{}", again.stderr());
    // The whole join again on worker-1: its Node is Ready, and its own.
    let full = ["join", "--config", &cfg, "--root", &wroot];
    let r = run_in(&c.hosts[1].netns, &full);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.stderr().contains("the Node \"worker-1\" is this node's own"), "{}", r.stderr());
    assert!(joined(&w1));

    // A new machine asking for worker-1's name is refused: its Node is Ready and not this one's.
    let thief = Scratch::new("");
    let bare = c.bare_node("thief", 31);
    let r = run_in(&bare, &[&token[..], &["--root", &thief.root_str(), "--node-name", "worker-1"]].concat());
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("already exists in the cluster and is Ready"), "{}", r.stderr());
    assert_no_credentials(&thief.root());

    // Killed while its CSR waits: the rerun reuses the key and the CSR, and skips discovery.
    // Approval is held by removing kubeadm's auto-approve binding, then given by hand.
    let binding = "kubeadm:node-autoapprove-bootstrap";
    assert_eq!(c.kubectl(&["delete", "clusterrolebinding", binding]).0, 0);
    let before = c.bootstrap_csrs().len();
    let w3 = Scratch::new("");
    let bare = c.bare_node("worker-3", 23);
    let w3_root = w3.root_str();
    let args = [&token[..], &["--root", &w3_root, "--node-name", "worker-3"]].concat();
    let mut child = ChildGuard(bare.command(&*BIN).args(&args).env_remove("JOURNAL_STREAM").spawn().expect("join"));
    let key = at(&w3.root(), "/var/lib/kubelet/pki/kubelet-client.key.tmp");
    let pending = c.wait("worker-3's CSR", || {
        let csrs = c.bootstrap_csrs();
        (csrs.len() == before + 1 && key.exists())
            .then(|| csrs[before]["metadata"]["name"].as_str().map(str::to_string))
    });
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let pending = pending.expect("CSR name");
    assert!(at(&w3.root(), "/etc/kubernetes/bootstrap-kubelet.conf").exists(), "discovery's product survives");
    assert_eq!(c.kubectl(&["certificate", "approve", &pending]).0, 0);
    let group = "--group=system:bootstrappers:kubeadm:default-node-token";
    let role = "--clusterrole=system:certificates.k8s.io:certificatesigningrequests:nodeclient";
    assert_eq!(c.kubectl(&["create", "clusterrolebinding", binding, role, group]).0, 0);
    let r = run_in(&bare, &args);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let err = r.stderr();
    assert!(err.contains("Using the cluster an earlier, interrupted join verified"), "{err}");
    assert!(err.contains("Reusing the key of an earlier, unfinished TLS bootstrap"), "{err}");
    assert_eq!(c.bootstrap_csrs().len(), before + 1, "the rerun found the same CSR");
    assert!(joined(&w3.root()) && !at(&w3.root(), "/etc/kubernetes/bootstrap-kubelet.conf").exists());

    // File discovery: a kubeconfig with the cluster's CA and a bootstrap token.
    let kc = kubestrap::objects::kubelet::bootstrap_kubelet_conf(
        &format!("https://{ep}"),
        &std::fs::read(c.scratch.pki("ca.crt")).unwrap(),
        TOKEN,
    );
    let w4 = Scratch::new("");
    let file = w4.root().with_file_name("discovery.conf");
    std::fs::write(&file, kc.to_yaml().unwrap()).unwrap();
    let r = run_in(
        &c.bare_node("worker-4", 24),
        &["join", "--discovery-file", file.to_str().unwrap(), "--root", &w4.root_str(), "--node-name", "worker-4"],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(joined(&w4.root()));
}
