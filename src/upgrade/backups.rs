//! Old upgrade backups pruned: every run backs up the manifests, etcd's whole data directory,
//! the kubelet's config and certificates under /etc/kubernetes/tmp, and kubeadm never removes
//! them, so a node whose upgrade by image is retried at each boot fills a small A/B root. The
//! newest `KEEP` of each kind stay (the one just made among them).

use std::path::Path;

use log::info;

use crate::paths::KUBERNETES_TMP_DIR;

/// How many backups of each kind stay.
pub const KEEP: usize = 3;

/// The kinds: directories named `<prefix><stamp>` (file_stamp: sorts by time).
const KINDS: [&str; 4] =
    ["kubeadm-backup-manifests-", "kubeadm-backup-etcd-", "kubeadm-kubelet-config-", "kubeadm-backup-certs-"];

/// Removes all but the newest `KEEP` backups of each kind under `root`'s /etc/kubernetes/tmp.
/// Best effort: a backup that cannot be removed is named and left.
pub fn prune(root: &Path) {
    let dir = root.join(KUBERNETES_TMP_DIR.trim_start_matches('/'));
    let Ok(entries) = std::fs::read_dir(&dir) else { return };
    let names: Vec<String> = entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    for prefix in KINDS {
        let mut kind: Vec<&String> = names.iter().filter(|n| n.starts_with(prefix)).collect();
        kind.sort();
        let old = kind.len().saturating_sub(KEEP);
        for n in &kind[..old] {
            match std::fs::remove_dir_all(dir.join(n.as_str())) {
                Ok(()) => info!("[upgrade] Removed the old backup {KUBERNETES_TMP_DIR}/{n} (the newest {KEEP} stay)"),
                Err(e) => log::warn!("[upgrade] removing the old backup {KUBERNETES_TMP_DIR}/{n}: {e}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_newest_three_of_each_kind_stay_and_nothing_else_is_touched() {
        let root = tempfile::tempdir().unwrap();
        let tmp = root.path().join("etc/kubernetes/tmp");
        let stamps = [
            "2026-01-01-00-00-00",
            "2026-03-01-00-00-00",
            "2026-02-01-00-00-00",
            "2026-05-01-00-00-00",
            "2026-04-01-00-00-00",
        ];
        for s in stamps {
            for k in super::KINDS {
                std::fs::create_dir_all(tmp.join(format!("{k}{s}")).join("x")).unwrap();
            }
        }
        std::fs::create_dir_all(tmp.join("kubeadm-upgraded-manifests123")).unwrap();
        std::fs::write(tmp.join("notes"), "mine").unwrap();
        super::prune(root.path());
        let mut left: Vec<String> =
            std::fs::read_dir(&tmp).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        let mut want = vec!["kubeadm-upgraded-manifests123".to_string(), "notes".to_string()];
        for k in super::KINDS {
            for s in ["2026-03-01-00-00-00", "2026-04-01-00-00-00", "2026-05-01-00-00-00"] {
                want.push(format!("{k}{s}"));
            }
        }
        want.sort();
        assert_eq!(left, want);
        super::prune(root.path());
        assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), want.len(), "a second prune removes nothing");
    }
}
