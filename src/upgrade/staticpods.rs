//! The static Pod rollout of `upgrade apply` and a control plane's `upgrade node`, as kubeadm
//! 1.37's StaticPodControlPlane: the new manifests written to a temp dir, etcd first (its cluster
//! healthy, its data dir copied), then kube-apiserver, kube-controller-manager, kube-scheduler;
//! each one that differs has its certificates renewed, its old manifest moved to the backup dir
//! and the new one into place, then waits for the kubelet to change its mirror Pod's
//! `kubernetes.io/config.hash` and for the component to answer its startup probe. A failure
//! moves every backed-up manifest back. Unlike kubeadm, which then waits until every Pod of that
//! component in the cluster is Running (stalling on a broken one on another node), kubestrap
//! waits for this node's component to answer.

use std::path::Path;
use std::time::Duration;

use log::info;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::init::InitContext;
use crate::kube::Client;
use crate::paths::{self, KUBERNETES_TMP_DIR};
use crate::pki::expiry::Settings;
use crate::pki::renew::{Backup, Outcome, renew};
use crate::retry::{Attempt, GaveUp, Retry};

const HASH_ANNOTATION: &str = "kubernetes.io/config.hash";
const COMPONENTS: [&str; 3] = ["kube-apiserver", "kube-controller-manager", "kube-scheduler"];

pub(super) struct Rollout<'a> {
    pub ctx: &'a InitContext<'a>,
    pub client: &'a Client,
    pub etcd_upgrade: bool,
    pub renew_certs: bool,
    /// `timeouts.upgradeManifests`: each wait's bound.
    pub timeout: Duration,
    /// The backup directories' stamp (`YYYY-MM-DD-hh-mm-ss`).
    pub stamp: String,
}

pub(super) struct Dirs {
    pub temp: String,
    pub backup: String,
    pub etcd_backup: String,
}

/// The components rolled so far, each with its manifest's backup.
pub(super) type Recover = Vec<(&'static str, String)>;

impl Rollout<'_> {
    fn node(&self) -> &str {
        &self.ctx.cfg.node_name
    }

    fn retry<'b>(&'b self, what: &'b str) -> Retry<'b> {
        Retry {
            what,
            tag: "upgrade/staticpods",
            timeout: self.timeout,
            backoff: &crate::timeouts::KUBERNETES_API_CALL_RETRY,
            clock: self.ctx.node.clock,
        }
    }

    /// The mirror Pod's config hash (waited for: the kubelet may not have posted it yet).
    pub(super) fn hash(&self, component: &str) -> Result<String> {
        let path = format!("/api/v1/namespaces/kube-system/pods/{component}-{}", self.node());
        let what = format!("reading the config hash of the mirror Pod {component}-{}", self.node());
        Ok(self.retry(&what).run::<_, GaveUp>(|| match self.client.get(&path) {
            Ok(Some(pod)) => match pod["metadata"]["annotations"][HASH_ANNOTATION].as_str() {
                Some(h) => Attempt::Done(h.to_string()),
                None => Attempt::Wait(format!("{path} has no {HASH_ANNOTATION} annotation")),
            },
            Ok(None) => Attempt::Wait(format!("{path} not found")),
            Err(e) => Attempt::Wait(e.to_string()),
        })?)
    }

    /// The whole rollout; the temp dir goes on success, the backups stay.
    pub fn run(&self) -> Result<()> {
        let fs = self.ctx.node.fs;
        let mut before = Vec::new();
        for c in COMPONENTS {
            before.push((c, self.hash(c)?));
        }
        let local_etcd = self.ctx.cfg.local_etcd().is_some();
        let dirs = Dirs {
            temp: format!("{KUBERNETES_TMP_DIR}/kubeadm-upgraded-manifests{}", random_suffix()?),
            backup: format!("{KUBERNETES_TMP_DIR}/kubeadm-backup-manifests-{}", self.stamp),
            etcd_backup: format!("{KUBERNETES_TMP_DIR}/kubeadm-backup-etcd-{}", self.stamp),
        };
        for d in [KUBERNETES_TMP_DIR, &dirs.temp, &dirs.backup, &dirs.etcd_backup] {
            fs.mkdir(&paths::Dir { path: d.to_string(), mode: 0o700 })?;
        }
        fs.commit()?;
        info!("[upgrade/staticpods] Writing new Static Pod manifests to {:?}", dirs.temp);
        for (name, pod) in crate::init::control_plane::pods(self.ctx, false)? {
            write_pod(self.ctx, &format!("{}/{name}.yaml", dirs.temp), &pod)?;
        }
        let mut recover: Recover = Vec::new();
        if local_etcd && self.etcd_upgrade {
            super::lease::fence("etcd")?;
            self.etcd(&dirs, &mut recover)?;
        }
        for (c, hash) in &before {
            // Stopped before the next roll if the Lease was lost: the rolled ones are healthy.
            super::lease::fence(c)?;
            self.component(c, hash, &dirs, &mut recover)?;
        }
        if self.renew_certs {
            for conf in ["admin.conf", "super-admin.conf"] {
                if conf == "super-admin.conf" && !fs.exists(paths::kubeconfig(conf)) {
                    continue;
                }
                if let Err(e) = self.renew_one(conf) {
                    return Err(self.rollback(
                        &recover,
                        e.context(format!("failed to upgrade the {conf} certificates")),
                        false,
                    ));
                }
            }
        }
        let _ = std::fs::remove_dir_all(fs.real(&dirs.temp));
        if !fs.is_dry_run() {
            super::backups::prune(fs.root());
        }
        if !(local_etcd && self.etcd_upgrade) {
            let _ = std::fs::remove_dir_all(fs.real(&dirs.etcd_backup));
        }
        Ok(())
    }

    fn renew_one(&self, name: &str) -> Result<()> {
        let settings = Settings::from_config(&self.ctx.cfg);
        let backup = Backup::at(self.ctx.node.clock.wall());
        if renew(self.ctx.node.fs, name, self.ctx.node.clock, &settings, &backup)? == Outcome::ExternalCa {
            info!("[upgrade/staticpods] External CA detected, {name} certificate can't be renewed");
        }
        Ok(())
    }

    fn renew_for(&self, component: &str) -> Result<()> {
        let local = self.ctx.cfg.local_etcd().is_some();
        let certs: &[&str] = match component {
            "etcd" if local => &["etcd-server", "etcd-peer", "etcd-healthcheck-client"],
            "kube-apiserver" if local => {
                &["apiserver", "apiserver-kubelet-client", "front-proxy-client", "apiserver-etcd-client"]
            }
            "kube-apiserver" => &["apiserver", "apiserver-kubelet-client", "front-proxy-client"],
            "kube-controller-manager" => &["controller-manager.conf"],
            "kube-scheduler" => &["scheduler.conf"],
            _ => &[],
        };
        for c in certs {
            info!("[upgrade/staticpods] Renewing {c} certificate");
            self.renew_one(c)?;
        }
        Ok(())
    }

    pub(super) fn component(
        &self,
        c: &'static str,
        before_hash: &str,
        dirs: &Dirs,
        recover: &mut Recover,
    ) -> Result<()> {
        let fs = self.ctx.node.fs;
        let current = paths::manifest(c).as_str().to_string();
        let new = format!("{}/{c}.yaml", dirs.temp);
        let api_changed = c == "etcd"
            && !same_pod(
                fs,
                paths::manifest("kube-apiserver").as_str(),
                &format!("{}/kube-apiserver.yaml", dirs.temp),
            )?;
        info!("[upgrade/staticpods] Preparing for {c:?} upgrade");
        let backup = format!("{}/{c}.yaml", dirs.backup);
        recover.push((c, backup.clone()));
        let equal = same_pod(fs, &current, &new)?;
        let rolling = rolling_marker(c);
        if equal && !api_changed {
            // A run cut between this manifest's move and its wait left it unverified.
            if let Some(old) = fs.read(&rolling)? {
                return self.verify_cut_roll(c, &current, &String::from_utf8_lossy(&old), recover);
            }
            info!("[upgrade/staticpods] Current and new manifests of {c} are equal, skipping upgrade");
            return Ok(());
        }
        if self.renew_certs
            && let Err(e) = self.renew_for(c)
        {
            let e = e.context(format!("failed to renew certificates for component {c:?}"));
            return Err(self.rollback(recover, e, c == "etcd"));
        }
        if equal && self.renew_certs {
            info!("[upgrade/staticpods] Restarting the {c} static pod and backing up its manifest to {backup:?}");
        } else {
            info!("[upgrade/staticpods] Moving new manifest to {current:?} and backing up old manifest to {backup:?}");
        }
        // Durable before the move: a cut after it makes the next run verify this roll.
        fs.write(&paths::File::at(rolling.clone(), 0o600), backup.as_bytes())?;
        fs.commit()?;
        let moved = swap_in(fs.real(&new).as_path(), fs.real(&current).as_path(), fs.real(&backup).as_path());
        if let Err(e) = moved {
            return Err(self.rollback(recover, e, c == "etcd"));
        }
        info!("[upgrade/staticpods] Waiting for the kubelet to restart the component");
        info!("[upgrade/staticpods] This can take up to {}", crate::config::values::go_duration(self.timeout));
        let waited = if equal { Ok(()) } else { self.wait_hash_change(c, before_hash) };
        if let Err(e) = waited.and_then(|()| self.wait_serving(c, &current)) {
            return Err(self.rollback(recover, e, c == "etcd"));
        }
        fs.remove(&rolling)?;
        info!("[upgrade/staticpods] Component {c:?} upgraded successfully!");
        Ok(())
    }

    /// A manifest a cut run moved in but never saw serve: its probe now, and on failure the
    /// manifest the cut run backed up moved back (then this run's rollback of the others).
    fn verify_cut_roll(&self, c: &'static str, current: &str, backup: &str, recover: &mut Recover) -> Result<()> {
        let fs = self.ctx.node.fs;
        info!(
            "[upgrade/staticpods] The manifest of {c} was moved in by a run cut short and not yet verified: waiting for it"
        );
        match self.wait_serving(c, current) {
            Ok(()) => {
                fs.remove(rolling_marker(c))?;
                info!("[upgrade/staticpods] Component {c:?} upgraded successfully!");
                Ok(())
            }
            Err(e) => {
                recover.retain(|(name, _)| *name != c);
                recover.push((c, backup.trim().to_string()));
                let e = self.rollback(recover, e.context(format!("{c}, moved in by a run cut short")), c == "etcd");
                fs.remove(rolling_marker(c))?;
                Err(e)
            }
        }
    }

    fn wait_hash_change(&self, c: &str, before: &str) -> Result<()> {
        let path = format!("/api/v1/namespaces/kube-system/pods/{c}-{}", self.node());
        let what = format!("waiting for the kubelet to change the config hash of {c}-{}", self.node());
        self.retry(&what)
            .run::<_, GaveUp>(|| match self.client.get(&path) {
                Ok(Some(pod)) => match pod["metadata"]["annotations"][HASH_ANNOTATION].as_str() {
                    Some(h) if h != before => Attempt::Done(()),
                    _ => Attempt::Wait(format!("the {HASH_ANNOTATION} of {c}-{} is still {before}", self.node())),
                },
                Ok(None) => Attempt::Wait(format!("{path} not found")),
                Err(e) => Attempt::Wait(e.to_string()),
            })
            .map_err(|_| {
                Error::cluster(format!(
                    "static Pod hash for component {c} on Node {} did not change after {}",
                    self.node(),
                    crate::config::values::go_duration(self.timeout)
                ))
            })
    }

    /// The component's startup (else liveness) probe, from its new manifest, answers.
    fn wait_serving(&self, c: &str, manifest: &str) -> Result<()> {
        let text = self.ctx.node.fs.read(manifest)?.unwrap_or_default();
        let pod: Value = serde_yaml::from_slice(&text).map_err(|e| Error::bad_file(format!("{manifest}: {e}")))?;
        let Some(url) = crate::manifests::pod::probe_url(&pod) else { return Ok(()) };
        info!("[upgrade/staticpods] Waiting for {c} to answer at {url}");
        let what = format!("waiting for {c} at {url}");
        Ok(self.retry(&what).run::<_, GaveUp>(|| {
            match crate::kube::https_ok_unverified(&url, crate::timeouts::REQUEST) {
                Ok(()) => Attempt::Done(()),
                Err(e) => Attempt::Wait(e.to_string()),
            }
        })?)
    }

    /// Moves every recorded backup back (etcd's only when asked); always an error.
    pub(super) fn rollback(&self, recover: &[(&'static str, String)], cause: Error, etcd: bool) -> Error {
        let fs = self.ctx.node.fs;
        let mut errs = vec![cause.message];
        for (c, backup) in recover {
            if *c == "etcd" && !etcd {
                continue;
            }
            let real = fs.real(backup);
            if !real.exists() {
                continue;
            }
            if let Err(e) = move_file(&real, fs.real(paths::manifest(c).as_str()).as_path()) {
                errs.push(e.message);
            }
        }
        Error::cluster(format!(
            "couldn't upgrade control plane. kubestrap has tried to recover everything into the earlier state. Errors faced: [{}]",
            errs.join(", ")
        ))
    }
}

/// Two manifests decode to the same Pod (kubeadm compares the decoded objects).
fn same_pod(fs: &crate::fsutil::NodeFs, a: &str, b: &str) -> Result<bool> {
    let read = |p: &str| -> Result<Value> {
        let bytes = fs.read(p)?.ok_or_else(|| Error::bad_file(format!("{p} does not exist")))?;
        serde_yaml::from_slice(&bytes).map_err(|e| Error::bad_file(format!("{p}: {e}")))
    };
    Ok(read(a)? == read(b)?)
}

pub(super) fn write_pod(ctx: &InitContext, host_path: &str, pod: &Value) -> Result<()> {
    let yaml = crate::manifests::pod::to_yaml(pod)?;
    ctx.node.fs.write(&paths::File::at(host_path.to_string(), 0o600), yaml.as_bytes())?;
    Ok(ctx.node.fs.commit()?)
}

fn move_file(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to).map_err(|e| Error::failed(format!("moving {} to {}: {e}", from.display(), to.display())))
}

/// The old manifest kept as the backup (a hard link; a copy across filesystems), then the new one
/// renamed over it, each directory synced: the component has a manifest at every instant, the old
/// or the new, so a power cut anywhere leaves the kubelet one to run and the rerun one to compare.
/// (kubeadm's two renames, current to backup then new to current, leave none between them.)
fn swap_in(new: &Path, current: &Path, backup: &Path) -> Result<()> {
    let failed = |what: &str, p: &Path, e: std::io::Error| Error::failed(format!("{what} {}: {e}", p.display()));
    let sync_dir = |p: &Path| {
        let dir = p.parent().unwrap_or(Path::new("/"));
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| failed("syncing", dir, e))
    };
    // A run cut short in this same second (the stamp is the backup directory's name) already
    // backed this component up: that backup holds the manifest from before the upgrade began,
    // which is what a rollback must restore, so it is kept and no other is made.
    if backup.exists() {
        std::fs::rename(new, current)
            .map_err(|e| Error::failed(format!("moving {} to {}: {e}", new.display(), current.display())))?;
        return sync_dir(current);
    }
    match std::fs::hard_link(current, backup) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => {
            std::fs::copy(current, backup)
                .and_then(|_| std::fs::File::open(backup)?.sync_all())
                .map_err(|e| failed("backing up", current, e))?;
        }
        Err(e) => return Err(failed("backing up", current, e)),
    }
    sync_dir(backup)?;
    std::fs::rename(new, current)
        .map_err(|e| Error::failed(format!("moving {} to {}: {e}", new.display(), current.display())))?;
    sync_dir(current)
}

/// kubeadm's CopyDir (`cp -r -p`): the tree with modes and times.
pub(super) fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    let status = std::process::Command::new("cp").arg("-r").arg("-p").arg(from).arg(to).status()?;
    if status.success() { Ok(()) } else { Err(std::io::Error::other(format!("cp exited with {status}"))) }
}

/// os.MkdirTemp's random digits.
fn random_suffix() -> Result<u32> {
    let mut b = [0u8; 4];
    getrandom::fill(&mut b).map_err(|e| Error::failed(format!("reading random bytes: {e}")))?;
    Ok(u32::from_le_bytes(b) % 1_000_000_000)
}

/// Written (holding the backup's path) before a component's manifest is moved in, removed once
/// it serves: a run cut in between leaves it, and the next run verifies that roll.
fn rolling_marker(c: &str) -> String {
    format!("{KUBERNETES_TMP_DIR}/kubestrap-rolling-{c}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_swap_keeps_the_old_manifest_as_the_backup_and_never_loses_one() {
        let d = tempfile::tempdir().unwrap();
        let (new, current, backup) = (d.path().join("new.yaml"), d.path().join("cur.yaml"), d.path().join("bak.yaml"));
        std::fs::write(&new, "new").unwrap();
        std::fs::write(&current, "old").unwrap();
        swap_in(&new, &current, &backup).unwrap();
        assert_eq!(std::fs::read_to_string(&current).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(&backup).unwrap(), "old");
        assert!(!new.exists());
        // No current manifest (removed by hand): refused, the new one kept, no backup made.
        std::fs::write(&new, "newer").unwrap();
        std::fs::remove_file(&current).unwrap();
        let e = swap_in(&new, &current, &d.path().join("bak2.yaml")).unwrap_err();
        assert!(e.to_string().contains("backing up"), "{e}");
        assert_eq!(std::fs::read_to_string(&new).unwrap(), "newer");
        assert!(!current.exists());
        // A cut run's backup in the same second: kept as the state before the upgrade.
        std::fs::write(&current, "old2").unwrap();
        let b3 = d.path().join("bak3.yaml");
        std::fs::write(&b3, "oldest").unwrap();
        swap_in(&new, &current, &b3).unwrap();
        assert_eq!(std::fs::read_to_string(&current).unwrap(), "newer");
        assert_eq!(std::fs::read_to_string(&b3).unwrap(), "oldest");
    }

    #[test]
    fn probes_are_read_as_the_kubelet_does() {
        let pod = serde_json::json!({"spec": {"containers": [{
            "ports": [{"name": "probe-port", "containerPort": 10257}],
            "startupProbe": {"httpGet": {"host": "127.0.0.1", "path": "/healthz", "port": "probe-port", "scheme": "HTTPS"}},
            "livenessProbe": {"httpGet": {"host": "10.0.0.1", "path": "/livez", "port": 6443, "scheme": "HTTPS"}}
        }]}});
        assert_eq!(crate::manifests::pod::probe_url(&pod).as_deref(), Some("https://127.0.0.1:10257/healthz"));
        let pod = serde_json::json!({"spec": {"containers": [{
            "livenessProbe": {"httpGet": {"host": "fd00::1", "path": "/livez", "port": 2381}}
        }]}});
        assert_eq!(crate::manifests::pod::probe_url(&pod).as_deref(), Some("http://[fd00::1]:2381/livez"));
    }
}
