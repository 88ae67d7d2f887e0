//! The phases as data: a name, a one-line description and a function, for `init` and for `join`.
//! `kubestrap phases` prints these tables; `init`/`join` run them in order; `init phase <name>` and
//! `join phase <name>` run one entry. A phase reads its inputs from disk (a missing one names the
//! phase that makes it), commits its own writes, and reports itself in the boot status.

use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::init::{addons, api, certs, control_plane, etcd, kubeconfig, kubelet_start, preflight, upload_certs};
use crate::join::JoinContext;
use crate::status::Reporter;

// The init context and writers keep their old paths here (tests and callers use them).
pub use crate::init::{InitContext, KUBECONFIGS, KubeconfigSpec, UploadCerts, context, host_env};

pub struct Phase<F> {
    pub name: &'static str,
    pub description: &'static str,
    pub run: F,
}

pub type InitFn = fn(&InitContext) -> Result<()>;
pub type JoinFn = fn(&JoinContext) -> Result<()>;

/// `kubeadm init`'s phases, in kubeadm's order (kubelet-finalize is not ours: kubelet.conf
/// already uses an embedded certificate).
#[rustfmt::skip]
pub const INIT_PHASES: &[Phase<InitFn>] = &[
    Phase { name: "preflight", description: "Check that this machine can become a control-plane node", run: preflight::run },
    Phase { name: "certs", description: "Generate the CAs, leaf certificates and the service-account key pair", run: certs::run },
    Phase { name: "kubeconfig", description: "Write admin, super-admin, kubelet, controller-manager and scheduler kubeconfigs", run: kubeconfig::run },
    Phase { name: "etcd", description: "Write the static Pod manifest for local etcd", run: etcd::run },
    Phase { name: "control-plane", description: "Write the static Pod manifests for the API server, controller-manager and scheduler", run: control_plane::run },
    Phase { name: "kubelet-start", description: "Write the kubelet's config.yaml and flags, and (re)start the kubelet", run: kubelet_start::run },
    Phase { name: "wait-control-plane", description: "Wait for the kubelet, then for the API server's /livez", run: api::wait_control_plane },
    Phase { name: "upload-config", description: "Upload the kubeadm-config and kubelet-config ConfigMaps and their RBAC", run: api::upload_config },
    Phase { name: "upload-certs", description: "With --upload-certs: the shared CAs and keys, encrypted, in the kubeadm-certs Secret", run: upload_certs::run },
    Phase { name: "mark-control-plane", description: "Wait for the Node, then label and taint it as control-plane", run: api::mark_control_plane },
    Phase { name: "bootstrap-token", description: "Create bootstrap tokens, their RBAC, and the signed cluster-info ConfigMap", run: api::bootstrap_token },
    Phase { name: "addon/coredns", description: "Install the CoreDNS addon (Deployment, Service, ConfigMap, RBAC)", run: addons::coredns },
    Phase { name: "addon/kube-proxy", description: "Install the kube-proxy addon (DaemonSet, ConfigMap, RBAC)", run: addons::kube_proxy },
    Phase { name: "show-join-command", description: "Print how to use admin.conf and the join command", run: api::show_join_command },
];

/// `kubeadm join`'s phases. kubeadm discovers inside its join data; here discovery is a phase of
/// its own whose product is bootstrap-kubelet.conf, so each phase can run alone. The
/// control-plane phases skip themselves on a worker join.
#[rustfmt::skip]
pub const JOIN_PHASES: &[Phase<JoinFn>] = &[
    Phase { name: "preflight", description: "Check that this machine can become a node", run: crate::join::preflight },
    Phase { name: "discovery", description: "Find the cluster and trust its CA (token + CA pin, or a discovery file); write bootstrap-kubelet.conf", run: crate::join::discovery },
    Phase { name: "control-plane-prepare/download-certs", description: "Control plane: download the shared CAs and keys from the kubeadm-certs Secret (--certificate-key)", run: crate::join::control_plane::download_certs },
    Phase { name: "control-plane-prepare/certs", description: "Control plane: this node's certificates, signed by the shared CAs", run: crate::join::control_plane::certs },
    Phase { name: "control-plane-prepare/kubeconfig", description: "Control plane: admin, controller-manager and scheduler kubeconfigs", run: crate::join::control_plane::kubeconfig },
    Phase { name: "control-plane-prepare/control-plane", description: "Control plane: the API server, controller-manager and scheduler manifests", run: crate::join::control_plane::manifests },
    Phase { name: "kubelet-start", description: "Write the kubelet's config and flags, get the node's client certificate (TLS bootstrap), write kubelet.conf", run: crate::join::kubelet_start },
    Phase { name: "etcd-join", description: "Control plane, stacked etcd: add this node as an etcd learner, write its etcd manifest, promote it", run: crate::join::control_plane::etcd_join },
    Phase { name: "mark-control-plane", description: "Control plane: label and taint this node as control-plane", run: crate::join::control_plane::mark_control_plane },
    Phase { name: "wait-control-plane", description: "Control plane: wait for the kubelet, then for this node's API server's /livez", run: crate::join::wait_control_plane::phase },
];

/// The join phases that need the kubelet running (the local etcd and API server): at boot a
/// control plane joining runs them in the post-kubelet stage, the others before the kubelet.
pub const JOIN_AFTER_KUBELET: &[&str] = &["etcd-join", "wait-control-plane", "mark-control-plane"];

/// The phases that write the node's files before any kubelet runs (`--on-disk-only`).
pub const ON_DISK_PHASES: &[&str] = &["preflight", "certs", "kubeconfig", "etcd", "control-plane", "kubelet-start"];

pub fn find<F>(list: &'static [Phase<F>], name: &str) -> Option<&'static Phase<F>> {
    list.iter().find(|p| p.name == name)
}

/// The phases a name selects: the phase itself, or every sub-phase of a parent
/// ("control-plane-prepare" runs its four, as with kubeadm). kubeadm gives every parent an
/// `all` sub-phase that runs its siblings; `--skip-phases=<parent>/all` is valid and skips
/// nothing, because `all` has no work of its own (kubeadm's workflow runner).
pub fn select<F>(list: &'static [Phase<F>], name: &str) -> Vec<&'static Phase<F>> {
    if let Some(p) = find(list, name) {
        return vec![p];
    }
    let parent = name.strip_suffix("/all").unwrap_or(name);
    list.iter().filter(|p| p.name.strip_prefix(parent).is_some_and(|r| r.starts_with('/'))).collect()
}

/// Finds `name` in `list` or says which phases `workflow` has.
pub fn lookup<F>(list: &'static [Phase<F>], workflow: &str, name: &str) -> Result<&'static Phase<F>> {
    find(list, name).ok_or_else(|| unknown(list, workflow, name))
}

/// Like [`lookup`], but a parent name selects all its sub-phases.
pub fn lookup_all<F>(list: &'static [Phase<F>], workflow: &str, name: &str) -> Result<Vec<&'static Phase<F>>> {
    let found = select(list, name);
    if found.is_empty() { Err(unknown(list, workflow, name)) } else { Ok(found) }
}

fn unknown<F>(list: &'static [Phase<F>], workflow: &str, name: &str) -> Error {
    let known: Vec<&str> = list.iter().map(|p| p.name).collect();
    Error::usage(format!("unknown {workflow} phase {name:?}; {workflow} phases are: {}", known.join(", ")))
}

/// Checks `--skip-phases` names so a typo is an error rather than a phase that silently runs.
pub fn check_skip<F>(list: &'static [Phase<F>], workflow: &str, skip: &[String]) -> Result<()> {
    skip.iter().try_for_each(|s| lookup_all(list, workflow, s).map(|_| ()))
}

/// Does `--skip-phases` name this phase (or its parent)?
pub fn is_skipped(skip: &[String], name: &str) -> bool {
    skip.iter().any(|s| name == s || name.strip_prefix(s.as_str()).is_some_and(|r| r.starts_with('/')))
}

/// Runs the init phases not in `skip`, in order.
pub fn run_init(ctx: &InitContext, skip: &[String]) -> Result<()> {
    check_skip(INIT_PHASES, "init", skip)?;
    // Every key the run will make starts now, on every core, while the phases before and
    // between them run (RSA generation is most of init's time).
    ctx.reserve_keys(!is_skipped(skip, "certs"), !is_skipped(skip, "kubeconfig"));
    for p in INIT_PHASES.iter().filter(|p| !is_skipped(skip, p.name)) {
        let commit = !COMMIT_WITH_NEXT.contains(&p.name);
        step(ctx.fs, ctx.report, p.name, commit, || (p.run)(ctx))?;
    }
    // What a last, deferred phase left staged.
    Ok(ctx.fs.commit()?)
}

/// Phases whose writes can wait for the next phase's commit in a whole run, one syncfs pair
/// less each (on a first-boot VM a commit costs 10-400 ms): etcd and control-plane write only
/// derived state (static Pod manifests, rewritten from the config on every run); preflight
/// writes only the init-in-progress marker, which lands with the certificates (renamed first),
/// so a cut leaves either both or neither, and without certificates a fresh preflight is right.
const COMMIT_WITH_NEXT: &[&str] = &["preflight", "etcd", "control-plane"];

/// Runs the join phases not in `skip`, in order.
pub fn run_join(ctx: &JoinContext, skip: &[String]) -> Result<()> {
    check_skip(JOIN_PHASES, "join", skip)?;
    for p in JOIN_PHASES.iter().filter(|p| !is_skipped(skip, p.name)) {
        run_join_phase(ctx, p)?;
    }
    Ok(())
}

pub fn run_init_phase(ctx: &InitContext, p: &Phase<InitFn>) -> Result<()> {
    step(ctx.fs, ctx.report, p.name, true, || (p.run)(ctx))
}

pub fn run_join_phase(ctx: &JoinContext, p: &Phase<JoinFn>) -> Result<()> {
    step(ctx.fs, ctx.report, p.name, true, || (p.run)(ctx))
}

/// Runs one phase and (unless `commit` is false: see `COMMIT_WITH_NEXT`) commits its writes; a
/// failed phase leaves no trace of its own writes, nor of uncommitted ones before it.
fn step(
    fs: &NodeFs,
    report: Option<&Reporter>,
    name: &str,
    commit: bool,
    run: impl FnOnce() -> Result<()>,
) -> Result<()> {
    if let Some(r) = report {
        r.phase(name);
    }
    match run().and_then(|()| if commit { Ok(fs.commit()?) } else { Ok(()) }) {
        Ok(()) => Ok(()),
        Err(e) => {
            fs.discard();
            Err(e.context(format_args!("phase {name}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names<F>(v: Vec<&'static Phase<F>>) -> Vec<&'static str> {
        v.into_iter().map(|p| p.name).collect()
    }

    #[test]
    fn addon_has_kubeadms_sub_phases_and_skipping_follows_kubeadms_runner() {
        let skip = |s: &[&str]| -> Vec<&str> {
            let skip: Vec<String> = s.iter().map(|x| x.to_string()).collect();
            check_skip(INIT_PHASES, "init", &skip).unwrap();
            INIT_PHASES
                .iter()
                .filter(|p| p.name.starts_with("addon") && !is_skipped(&skip, p.name))
                .map(|p| p.name)
                .collect()
        };
        assert_eq!(skip(&["addon/kube-proxy"]), ["addon/coredns"]);
        assert_eq!(skip(&["addon/coredns"]), ["addon/kube-proxy"]);
        assert!(skip(&["addon"]).is_empty());
        // `all` has no work of its own in kubeadm: skipping it is valid and skips nothing.
        assert_eq!(skip(&["addon/all"]), ["addon/coredns", "addon/kube-proxy"]);
        assert_eq!(names(select(INIT_PHASES, "addon/all")), ["addon/coredns", "addon/kube-proxy"]);
        assert_eq!(names(select(INIT_PHASES, "addon")), ["addon/coredns", "addon/kube-proxy"]);
        assert_eq!(names(select(JOIN_PHASES, "control-plane-prepare/all")).len(), 4);
        let e = check_skip(INIT_PHASES, "init", &["addon/kube-dns".into()]).unwrap_err();
        assert!(e.message.starts_with("unknown init phase \"addon/kube-dns\""), "{e}");
        assert!(check_skip(INIT_PHASES, "init", &["certs/all".into()]).is_err(), "certs has no sub-phases here");
    }
}
