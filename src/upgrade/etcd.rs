//! The etcd step of the static Pod rollout, as kubeadm 1.37's performEtcdStaticPodUpgrade: the
//! cluster healthy first, the data dir copied, the manifest rolled; then its two failure paths.
//! (a) The roll fails: the manifest is already back; wait for the old etcd, and only if it stays
//! down copy the data back and wait again. (b) The roll succeeds but the cluster does not come
//! back: data copied back, manifest moved back, wait again. kubeadm's `cp -r backup datadir`
//! copies into the existing data dir (a nested copy, nothing restored); kubestrap moves the
//! failed data dir aside and puts the backup in its place.

use std::path::Path;
use std::time::Duration;

use log::info;
use serde_json::Value;

use super::staticpods::{Dirs, Recover, Rollout, copy_dir, write_pod};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::paths;

impl Rollout<'_> {
    /// etcd first: its cluster healthy, its data dir copied, then its manifest at the target's
    /// etcd version (never a downgrade).
    pub(super) fn etcd(&self, dirs: &Dirs, recover: &mut Recover) -> Result<()> {
        let fs = self.ctx.node.fs;
        let cfg = &self.ctx.cfg;
        let etcd = EtcdHealth::new(self)?;
        etcd.check(self.ctx.node.clock, cfg.etcd_api_call_timeout)
            .map_err(|e| e.context("etcd cluster is not healthy"))?;
        let data_dir = cfg.local_etcd().map(|l| l.data_dir.clone()).unwrap_or_else(|| paths::ETCD_DATA_DIR.into());
        copy_dir(fs.real(&data_dir).as_path(), fs.real(&dirs.etcd_backup).as_path())
            .map_err(|e| Error::failed(format!("failed to back up etcd data: {e}")))?;
        let desired = cfg.etcd_image_tag.clone();
        let manifest = fs.read(paths::manifest("etcd"))?.unwrap_or_default();
        let pod: Value = serde_yaml::from_slice(&manifest)
            .map_err(|e| Error::bad_file(format!("{}: {e}", paths::manifest("etcd"))))?;
        let current = crate::images::tag_of(pod["spec"]["containers"][0]["image"].as_str().unwrap_or_default());
        if current.is_empty() {
            return Err(Error::failed("failed to retrieve the current etcd version"));
        }
        let (Some(want), Some(have)) = (Semver::parse(&desired), Semver::parse(&current)) else {
            return Err(match Semver::parse(&desired) {
                None => Error::bad_config(format!("failed to parse tag {desired:?} as a semantic version")),
                Some(_) => Error::failed(format!(
                    "failed comparing the current etcd version {:?} to the desired one {:?}",
                    current.replace('_', "+"),
                    desired.replace('_', "+")
                )),
            });
        };
        if want < have {
            info!(
                "[upgrade/etcd] Non fatal issue encountered during upgrade: the desired etcd version {:?} is older than the currently installed {:?}. Skipping etcd upgrade",
                desired.replace('_', "+"),
                current.replace('_', "+")
            );
            return Ok(());
        }
        let before = self.hash("etcd")?;
        let Some(new) = crate::manifests::etcd(cfg, &self.ctx.env) else { return Ok(()) };
        let new = self.ctx.patched_pod("etcd", new, false)?;
        write_pod(self.ctx, &format!("{}/etcd.yaml", dirs.temp), &new)?;
        let backup = &dirs.etcd_backup;
        let restore = || -> Result<()> {
            info!("[upgrade/etcd] Rolling back etcd data");
            restore_data(fs.real(&data_dir).as_path(), fs.real(backup).as_path(), &self.stamp).map_err(|e| {
                e.context(format!(
                    "fatal error rolling back local etcd cluster datadir, the backup of etcd database is stored here:({backup})"
                ))
            })?;
            info!("[upgrade/etcd] Etcd data rollback successful");
            Ok(())
        };
        let wait_previous = || -> Result<()> {
            info!("[upgrade/etcd] Waiting for previous etcd to become available");
            etcd.wait(self).map_err(|e| {
                info!("[upgrade/etcd] Failed to healthcheck previous etcd: {e}");
                e.context(format!(
                    "fatal error rolling back local etcd cluster manifest, the backup of etcd database is stored here:({backup})"
                ))
            })
        };
        // (a) The roll failed: its manifest is back (or was never moved).
        if let Err(e) = self.component("etcd", &before, dirs, recover) {
            info!("[upgrade/etcd] Failed to upgrade etcd: {e}");
            if wait_previous().is_err() {
                // etcd is down: its data can be copied back safely.
                restore()?;
                wait_previous()?;
            }
            info!("[upgrade/etcd] Etcd was rolled back and is now available");
            return Err(e.context(
                "fatal error when trying to upgrade the etcd cluster, rolled the state back to pre-upgrade state",
            ));
        }
        // (b) The new etcd serves, but the cluster does not come back.
        info!("[upgrade/etcd] Waiting for etcd to become available");
        if let Err(e) = etcd.wait(self) {
            info!("[upgrade/etcd] Failed to healthcheck etcd: {e}");
            restore()?;
            info!("[upgrade/etcd] Rolling back etcd manifest");
            let e = self.rollback(recover, e, true);
            wait_previous()?;
            info!("[upgrade/etcd] Etcd was rolled back and is now available");
            return Err(
                e.context("fatal error upgrading local etcd cluster, rolled the state back to pre-upgrade state")
            );
        }
        Ok(())
    }
}

/// The data dir from its backup (`cp -r` put it under the backup dir by its own name): the
/// failed one renamed to `<dir>.failed-<stamp>` beside it (kept for a look; a rename, so no
/// space), the backup copied in its place. A failed copy puts the failed dir back.
fn restore_data(data: &Path, backup_dir: &Path, stamp: &str) -> Result<()> {
    let io = |what: &str, p: &Path, e: std::io::Error| Error::failed(format!("{what} {}: {e}", p.display()));
    let name = data.file_name().ok_or_else(|| Error::failed(format!("{}: no directory name", data.display())))?;
    let from = backup_dir.join(name);
    if !from.is_dir() {
        return Err(Error::failed(format!("{} does not exist", from.display())));
    }
    let mut aside = data.as_os_str().to_owned();
    aside.push(format!(".failed-{stamp}"));
    let aside = Path::new(&aside);
    let moved = match std::fs::rename(data, aside) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(io("moving aside", data, e)),
    };
    if let Err(e) = copy_dir(&from, data) {
        let _ = std::fs::remove_dir_all(data);
        if moved {
            let _ = std::fs::rename(aside, data);
        }
        return Err(io("copying back into", data, e));
    }
    Ok(())
}

/// The etcd cluster through its members' endpoints (from the etcd Pods), as kubeadm's client.
struct EtcdHealth {
    client: crate::etcd::client::Client,
}

impl EtcdHealth {
    fn new(r: &Rollout) -> Result<EtcdHealth> {
        let ctx = r.ctx;
        let creds = crate::etcd::client::Credentials::load(
            ctx.node.fs,
            ctx.cfg.certs_dir(),
            crate::etcd::client::HEALTHCHECK_CLIENT,
        )?;
        let endpoints =
            crate::etcd::endpoints::endpoints_from_cluster(r.client, ctx.cfg.api_call_timeout, ctx.node.clock)?;
        Ok(EtcdHealth { client: crate::etcd::client::Client::new(&endpoints, &creds)? })
    }

    /// More than half the members answer Status (kubeadm's CheckClusterHealth), each asked every
    /// 500 ms for up to `patience` (kubeadm's `etcdAPICall`): at boot, an etcd its kubelet has just
    /// started answers late.
    fn check(&self, clock: &dyn Clock, patience: Duration) -> Result<()> {
        let eps = self.client.endpoints();
        let status = |e: &String| {
            let deadline = clock.now() + patience;
            loop {
                match self.client.status(e) {
                    Ok(_) => return None,
                    Err(err) if !err.is_transient() || clock.now() >= deadline => return Some(format!("{e}: {err}")),
                    Err(_) => clock.sleep(Duration::from_millis(500), "etcd to answer"),
                }
            }
        };
        let bad: Vec<String> = eps.iter().filter_map(status).collect();
        if (eps.len() - bad.len()) * 2 > eps.len() {
            Ok(())
        } else {
            Err(Error::cluster(format!("{} of {} members unhealthy: {}", bad.len(), eps.len(), bad.join("; "))))
        }
    }

    /// kubeadm's WaitForClusterAvailable waits up to 135 s (10 tries, 15 s apart); the same
    /// budget polled every second, so a restarted etcd is seen as soon as it answers.
    fn wait(&self, r: &Rollout) -> Result<()> {
        let clock = r.ctx.node.clock;
        let deadline = clock.now() + Duration::from_secs(135);
        loop {
            let e = match self.check(clock, Duration::ZERO) {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if clock.now() >= deadline {
                return Err(e);
            }
            clock.sleep(Duration::from_secs(1), "etcd to become available");
        }
    }
}

/// An etcd image tag as kubeadm compares it (ParseSemantic after `_` becomes `+`): exactly
/// three numbers, an optional pre-release (`3.7.0-0` sorts before `3.7.0`), build metadata
/// ignored.
#[derive(Debug, PartialEq, Eq)]
struct Semver {
    core: (u64, u64, u64),
    pre: Vec<String>,
}

impl Semver {
    fn parse(tag: &str) -> Option<Semver> {
        let t = tag.trim();
        let t = t.strip_prefix('v').unwrap_or(t);
        let t = t.split(['+', '_']).next()?;
        let (core, pre) = match t.split_once('-') {
            Some((c, p)) => (c, p.split('.').map(str::to_string).collect::<Vec<_>>()),
            None => (t, Vec::new()),
        };
        if pre.iter().any(|i| i.is_empty() || !i.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')) {
            return None;
        }
        let n: Vec<u64> = core.split('.').map(|p| p.parse().ok()).collect::<Option<_>>()?;
        match n[..] {
            [a, b, c] => Some(Semver { core: (a, b, c), pre }),
            _ => None,
        }
    }
}

impl PartialOrd for Semver {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Semver {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering::*;
        let ident = |a: &String, b: &String| match (a.parse::<u64>(), b.parse::<u64>()) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            (Ok(_), Err(_)) => Less,
            (Err(_), Ok(_)) => Greater,
            _ => a.cmp(b),
        };
        self.core.cmp(&other.core).then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
            (true, true) => Equal,
            (true, false) => Greater,
            (false, true) => Less,
            _ => self
                .pre
                .iter()
                .zip(&other.pre)
                .map(|(a, b)| ident(a, b))
                .find(|o| *o != Equal)
                .unwrap_or_else(|| self.pre.len().cmp(&other.pre.len())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcd_tags_compare_as_kubeadms_semantic_versions() {
        let v = |t: &str| Semver::parse(t).unwrap_or_else(|| panic!("{t}"));
        assert!(v("3.6.5-0") < v("3.7.0-0"));
        assert_eq!(v("3.7.0-0"), v("3.7.0-0"));
        assert!(v("3.7.1-0") > v("3.7.0-0"));
        assert!(v("3.7.0-0") < v("3.7.0-1"));
        assert!(v("3.7.0-0") < v("3.7.0"), "a pre-release sorts first");
        assert!(v("3.7.0-rc.1") > v("3.7.0-1"), "letters after digits");
        assert!(v("3.7.0-0.1") > v("3.7.0-0"), "more identifiers after fewer");
        assert_eq!(v("3.7.0_build.1"), v("v3.7.0+other"), "build metadata ignored");
        for bad in ["", "3.7", "3.7.0.1", "latest", "3.7.x-0", "3.7.0-"] {
            assert!(Semver::parse(bad).is_none(), "{bad}");
        }
    }

    /// The backup as the step made it (`cp -r datadir backupdir`), restored over a data dir
    /// a failed etcd changed: the backup's bytes in place, the failed dir kept beside it.
    #[test]
    fn the_data_dir_is_restored_from_its_backup_and_the_failed_one_kept() {
        let d = tempfile::tempdir().unwrap();
        let (data, backup) = (d.path().join("etcd"), d.path().join("kubeadm-backup-etcd-x"));
        std::fs::create_dir_all(data.join("member/snap")).unwrap();
        std::fs::write(data.join("member/snap/db"), "old").unwrap();
        std::fs::create_dir(&backup).unwrap();
        copy_dir(&data, &backup).unwrap();
        std::fs::write(data.join("member/snap/db"), "migrated").unwrap();
        std::fs::write(data.join("member/new"), "x").unwrap();
        restore_data(&data, &backup, "s").unwrap();
        assert_eq!(std::fs::read_to_string(data.join("member/snap/db")).unwrap(), "old");
        assert!(!data.join("member/new").exists());
        let aside = d.path().join("etcd.failed-s");
        assert_eq!(std::fs::read_to_string(aside.join("member/snap/db")).unwrap(), "migrated");
        // No backup: refused, the data dir untouched.
        let e = restore_data(&data, &d.path().join("none"), "t").unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        assert_eq!(std::fs::read_to_string(data.join("member/snap/db")).unwrap(), "old");
    }
}
