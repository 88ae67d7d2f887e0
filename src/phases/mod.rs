//! The phases as data: one table row per phase (name, one line about it, boot stage, whether it
//! commits alone, and its function), for `init` and for `join`; the only module that sees both.
//! `kubestrap phases` prints these tables; `init`/`join` run them in order; `init phase <name>` and
//! `join phase <name>` run one entry. A phase reads its inputs from disk (a missing one names the
//! phase that makes it), commits its own writes, and reports itself in the boot status.

use crate::error::{Error, Result};
use crate::init::InitContext;
use crate::init::{
    addons, api, certs, control_plane, etcd, kubeconfig, kubelet_finalize, kubelet_start, preflight, upload_certs,
};
use crate::join::JoinContext;
use crate::node::Node;

/// One row of a phase table.
pub struct Phase<F> {
    pub name: &'static str,
    /// The one line `kubestrap phases` prints.
    pub about: &'static str,
    /// At boot: before the kubelet starts (writes the node's files), or once it runs (needs the
    /// local etcd or API server). `init --on-disk-only` runs the pre-kubelet ones.
    pub stage: Stage,
    /// Commit this phase's writes when it ends; `false` lets them wait for the next phase's
    /// commit in a whole run (see `run_init`).
    pub commit: bool,
    pub run: F,
}

/// The boot stages (`kubestrap boot --stage`), and the column saying which a phase belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    PreKubelet,
    PostKubelet,
}

impl Stage {
    pub fn parse(s: &str) -> Option<Stage> {
        match s {
            "pre-kubelet" => Some(Stage::PreKubelet),
            "post-kubelet" => Some(Stage::PostKubelet),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Stage::PreKubelet => "pre-kubelet",
            Stage::PostKubelet => "post-kubelet",
        }
    }
}

use Stage::{PostKubelet as Post, PreKubelet as Pre};

pub(crate) type InitFn = fn(&InitContext) -> Result<()>;
pub(crate) type JoinFn = fn(&JoinContext) -> Result<()>;

/// `kubeadm init`'s phases, in kubeadm's order.
///
/// `commit: false` saves one syncfs pair per phase in a whole run (on a first-boot VM a commit
/// costs 10-400 ms): etcd and control-plane write only derived state (static Pod manifests,
/// rewritten from the config on every run); preflight writes only the init-in-progress marker,
/// which lands with the certificates (renamed first), so a cut leaves either both or neither,
/// and without certificates a fresh preflight is right.
#[rustfmt::skip]
pub const INIT_PHASES: &[Phase<InitFn>] = &[
    Phase { name: "preflight", stage: Pre, commit: false, about: "Check that this machine can become a control-plane node", run: preflight::run },
    Phase { name: "certs", stage: Pre, commit: true, about: "Generate the CAs, leaf certificates and the service-account key pair", run: certs::run },
    Phase { name: "kubeconfig", stage: Pre, commit: true, about: "Write admin, super-admin, kubelet, controller-manager and scheduler kubeconfigs", run: kubeconfig::run },
    Phase { name: "etcd", stage: Pre, commit: false, about: "Write the static Pod manifest for local etcd", run: etcd::run },
    Phase { name: "control-plane", stage: Pre, commit: false, about: "Write the static Pod manifests for the API server, controller-manager and scheduler", run: control_plane::run },
    Phase { name: "kubelet-start", stage: Pre, commit: true, about: "Write the kubelet's config.yaml and flags, and (re)start the kubelet", run: kubelet_start::run },
    Phase { name: "wait-control-plane", stage: Post, commit: true, about: "Wait for the kubelet, then for the API server's /livez", run: api::wait_control_plane },
    Phase { name: "upload-config", stage: Post, commit: true, about: "Upload the kubeadm-config and kubelet-config ConfigMaps and their RBAC", run: api::upload_config },
    Phase { name: "upload-certs", stage: Post, commit: true, about: "With --upload-certs: the shared CAs and keys, encrypted, in the kubeadm-certs Secret", run: upload_certs::run },
    Phase { name: "mark-control-plane", stage: Post, commit: true, about: "Wait for the Node, then label and taint it as control-plane", run: api::mark_control_plane },
    Phase { name: "bootstrap-token", stage: Post, commit: true, about: "Create bootstrap tokens, their RBAC, and the signed cluster-info ConfigMap", run: api::bootstrap_token },
    Phase { name: "kubelet-finalize/enable-client-cert-rotation", stage: Post, commit: true, about: "Point kubelet.conf at the kubelet's rotating client certificate and restart the kubelet", run: kubelet_finalize::enable_client_cert_rotation },
    Phase { name: "addon/coredns", stage: Post, commit: true, about: "Install the CoreDNS addon (Deployment, Service, ConfigMap, RBAC)", run: addons::coredns },
    Phase { name: "addon/kube-proxy", stage: Post, commit: true, about: "Install the kube-proxy addon (DaemonSet, ConfigMap, RBAC)", run: addons::kube_proxy },
    Phase { name: "show-join-command", stage: Post, commit: true, about: "Print how to use admin.conf and the join command", run: api::show_join_command },
];

/// `kubeadm join`'s phases. kubeadm discovers inside its join data; here discovery is a phase of
/// its own whose product is bootstrap-kubelet.conf, so each phase can run alone. The
/// control-plane phases skip themselves on a worker join; the post-kubelet ones need the local
/// etcd and API server the kubelet runs.
#[rustfmt::skip]
pub(crate) const JOIN_PHASES: &[Phase<JoinFn>] = &[
    Phase { name: "preflight", stage: Pre, commit: true, about: "Check that this machine can become a node", run: crate::join::preflight },
    Phase { name: "discovery", stage: Pre, commit: true, about: "Find the cluster and trust its CA (token + CA pin, or a discovery file); write bootstrap-kubelet.conf", run: crate::join::discovery },
    Phase { name: "control-plane-prepare/download-certs", stage: Pre, commit: true, about: "Control plane: download the shared CAs and keys from the kubeadm-certs Secret (--certificate-key)", run: crate::join::control_plane::download_certs },
    Phase { name: "control-plane-prepare/certs", stage: Pre, commit: true, about: "Control plane: this node's certificates, signed by the shared CAs", run: crate::join::control_plane::certs },
    Phase { name: "control-plane-prepare/kubeconfig", stage: Pre, commit: true, about: "Control plane: admin, controller-manager and scheduler kubeconfigs", run: crate::join::control_plane::kubeconfig },
    Phase { name: "control-plane-prepare/control-plane", stage: Pre, commit: true, about: "Control plane: the API server, controller-manager and scheduler manifests", run: crate::join::control_plane::manifests },
    Phase { name: "kubelet-start", stage: Pre, commit: true, about: "Write the kubelet's config and flags, get the node's client certificate (TLS bootstrap), write kubelet.conf", run: crate::join::kubelet_start },
    Phase { name: "etcd-join", stage: Post, commit: true, about: "Control plane, stacked etcd: add this node as an etcd learner, write its etcd manifest, promote it", run: crate::join::control_plane::etcd_join },
    Phase { name: "mark-control-plane", stage: Post, commit: true, about: "Control plane: label and taint this node as control-plane", run: crate::join::control_plane::mark_control_plane },
    Phase { name: "wait-control-plane", stage: Post, commit: true, about: "Control plane: wait for the kubelet, then for this node's API server's /livez", run: crate::join::wait_control_plane::phase },
];

/// The names of the phases of `table` outside `stage` (what a run of that stage skips).
pub fn outside<F>(table: &[Phase<F>], stage: Stage) -> impl Iterator<Item = String> + '_ {
    table.iter().filter(move |p| p.stage != stage).map(|p| p.name.to_string())
}

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

/// `phase NAME [SUB]` at the head of a command's positional words (kubeadm's phase
/// subcommands; a sub-phase, or a parent's `all`, as a second word): the phase's name and the
/// words after it. No `phase` first: no name, every word.
pub fn phase_words<'w, F>(
    words: &'w [String],
    list: &'static [Phase<F>],
    workflow: &str,
) -> Result<(Option<String>, &'w [String])> {
    if words.first().map(String::as_str) != Some("phase") {
        return Ok((None, words));
    }
    let name = words.get(1).ok_or_else(|| {
        let names: Vec<&str> = list.iter().map(|p| p.name).collect();
        Error::bad_flag(format!("`kubestrap {workflow} phase` needs a phase name: {}", names.join(", ")))
    })?;
    Ok(match words.get(2).map(|sub| format!("{name}/{sub}")) {
        Some(full) if !select(list, &full).is_empty() => (Some(full), &words[3..]),
        _ => (Some(name.clone()), &words[2..]),
    })
}

/// Finds `name` in `list` or says which phases `workflow` has.
pub fn lookup<F>(list: &'static [Phase<F>], workflow: &str, name: &str) -> Result<&'static Phase<F>> {
    find(list, name).ok_or_else(|| unknown(list, workflow, name))
}

/// Like [`lookup`], but a parent name selects all its sub-phases.
pub(crate) fn lookup_all<F>(list: &'static [Phase<F>], workflow: &str, name: &str) -> Result<Vec<&'static Phase<F>>> {
    let found = select(list, name);
    if found.is_empty() { Err(unknown(list, workflow, name)) } else { Ok(found) }
}

fn unknown<F>(list: &'static [Phase<F>], workflow: &str, name: &str) -> Error {
    let known: Vec<&str> = list.iter().map(|p| p.name).collect();
    Error::bad_flag(format!("unknown {workflow} phase {name:?}; {workflow} phases are: {}", known.join(", ")))
}

/// Checks `--skip-phases` names so a typo is an error rather than a phase that silently runs.
pub(crate) fn check_skip<F>(list: &'static [Phase<F>], workflow: &str, skip: &[String]) -> Result<()> {
    skip.iter().try_for_each(|s| lookup_all(list, workflow, s).map(|_| ()))
}

/// Does `--skip-phases` name this phase (or its parent)?
pub(crate) fn is_skipped(skip: &[String], name: &str) -> bool {
    skip.iter().any(|s| name == s || name.strip_prefix(s.as_str()).is_some_and(|r| r.starts_with('/')))
}

/// Runs the init phases not in `skip`, in order.
pub(crate) fn run_init(ctx: &InitContext, skip: &[String]) -> Result<()> {
    check_skip(INIT_PHASES, "init", skip)?;
    // Every key the run will make starts now, on every core, while the phases before and
    // between them run (RSA generation is most of init's time).
    ctx.reserve_keys(!is_skipped(skip, "certs"), !is_skipped(skip, "kubeconfig"));
    // Every patch applied in memory first: a bad one fails the run before it writes anything.
    crate::init::check_patches(ctx, |p| !is_skipped(skip, p))?;
    for p in INIT_PHASES.iter().filter(|p| !is_skipped(skip, p.name)) {
        step(&ctx.node, p.name, p.commit, || (p.run)(ctx))?;
    }
    // What a last, deferred phase left staged.
    Ok(ctx.node.fs.commit()?)
}

/// Runs the join phases not in `skip`, in order.
pub fn run_join(ctx: &JoinContext, skip: &[String]) -> Result<()> {
    check_skip(JOIN_PHASES, "join", skip)?;
    for p in JOIN_PHASES.iter().filter(|p| !is_skipped(skip, p.name)) {
        run_join_phase(ctx, p)?;
    }
    Ok(())
}

pub fn run_init_phase(ctx: &InitContext, p: &Phase<InitFn>) -> Result<()> {
    step(&ctx.node, p.name, true, || (p.run)(ctx))
}

pub(crate) fn run_join_phase(ctx: &JoinContext, p: &Phase<JoinFn>) -> Result<()> {
    step(&ctx.node, p.name, true, || (p.run)(ctx))
}

/// Runs one phase and (unless `commit` is false: see `INIT_PHASES`) commits its writes; a
/// failed phase leaves no trace of its own writes, nor of uncommitted ones before it.
fn step(node: &Node, name: &str, commit: bool, run: impl FnOnce() -> Result<()>) -> Result<()> {
    let fs = node.fs;
    if let Some(r) = node.report {
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
    fn the_columns_hold_the_lists_they_replaced() {
        let names = |t: &[Phase<InitFn>], keep: fn(&Phase<InitFn>) -> bool| {
            t.iter().filter(|p| keep(p)).map(|p| p.name).collect::<Vec<_>>()
        };
        let on_disk = names(INIT_PHASES, |p| p.stage == Stage::PreKubelet);
        assert_eq!(on_disk, ["preflight", "certs", "kubeconfig", "etcd", "control-plane", "kubelet-start"]);
        assert_eq!(names(INIT_PHASES, |p| !p.commit), ["preflight", "etcd", "control-plane"]);
        let after: Vec<&str> = JOIN_PHASES.iter().filter(|p| p.stage == Stage::PostKubelet).map(|p| p.name).collect();
        assert_eq!(after, ["etcd-join", "mark-control-plane", "wait-control-plane"]);
        assert!(JOIN_PHASES.iter().all(|p| p.commit));
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
