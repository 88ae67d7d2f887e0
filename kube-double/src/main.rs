//! `kube-double`: the API server test double as a standalone process, for
//! VM and end-to-end tests that run kubestrap as a separate binary.

use argh::FromArgs;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// A Kubernetes API server test double (not a real API server).
#[derive(FromArgs)]
struct Args {
    /// directory with apiserver.crt, apiserver.key, ca.crt and optionally ca.key
    #[argh(option)]
    pki_dir: PathBuf,
    /// HTTPS listen address (default 127.0.0.1:6443)
    #[argh(option, default = "SocketAddr::from(([127, 0, 0, 1], 6443))")]
    listen: SocketAddr,
    /// also serve a kubelet-style plain-HTTP /healthz here (implies --kubelet)
    #[argh(option)]
    kubelet_healthz: Option<SocketAddr>,
    /// serve the kubelet /healthz stand-in on 127.0.0.1:10248
    #[argh(switch)]
    kubelet: bool,
    /// register a Ready Node with this name at start (repeatable)
    #[argh(option)]
    register_node: Vec<String>,
    /// at start, post a mirror Pod for every static Pod manifest (*.yaml) in this directory,
    /// on the first --register-node (as that node's kubelet would); needs --register-node
    #[argh(option)]
    static_pods: Option<PathBuf>,
    /// approve only the three-usage kubelet CSR set, like v1.24-era controllers
    #[argh(switch)]
    legacy_approver: bool,
    /// do not auto-approve CSRs
    #[argh(switch)]
    no_auto_approve: bool,
    /// deny every kubelet client CSR
    #[argh(switch)]
    deny_csrs: bool,
    /// refuse connections for this many seconds after start
    #[argh(option, default = "0")]
    down_for_secs: u64,
    /// delay before the bootstrap signer signs cluster-info, in seconds
    #[argh(option, default = "0")]
    signer_delay_secs: u64,
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let args: Args = argh::from_env();
    let mut cfg = match kube_double::Config::from_pki_dir(&args.pki_dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kube-double: {e}");
            return ExitCode::FAILURE;
        }
    };
    cfg.listen = args.listen;
    cfg.kubelet_healthz = args.kubelet_healthz.or(args.kubelet.then_some(kube_double::DEFAULT_KUBELET_HEALTHZ));
    cfg.legacy_approver = args.legacy_approver;
    cfg.auto_approve = !args.no_auto_approve;
    cfg.deny_csrs = args.deny_csrs;
    cfg.down_for = Duration::from_secs(args.down_for_secs);
    cfg.signer_delay = Duration::from_secs(args.signer_delay_secs);
    let handle = match kube_double::start(cfg) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("kube-double: {e}");
            return ExitCode::FAILURE;
        }
    };
    for node in &args.register_node {
        if let Err(e) = handle.register_node(node, &[]) {
            eprintln!("kube-double: registering node {node}: {e}");
            return ExitCode::FAILURE;
        }
    }
    if let Some(dir) = &args.static_pods {
        let Some(node) = args.register_node.first() else {
            eprintln!("kube-double: --static-pods needs --register-node (the node the Pods run on)");
            return ExitCode::FAILURE;
        };
        match handle.mirror_static_pods(dir, node) {
            Ok(names) => eprintln!("kube-double: mirror Pods {}", names.join(", ")),
            Err(e) => {
                eprintln!("kube-double: mirroring the static Pods of {}: {e}", dir.display());
                return ExitCode::FAILURE;
            }
        }
    }
    eprintln!("kube-double: serving on {}", handle.url());
    if let Some(k) = handle.kubelet_addr() {
        eprintln!("kube-double: kubelet healthz on http://{k}/healthz");
    }
    // Runs until killed.
    handle.wait();
    ExitCode::SUCCESS
}
