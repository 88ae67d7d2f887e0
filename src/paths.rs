//! Every node path kubestrap reads or writes, with its mode, stated once (kubeadm's `constants.go`
//! path functions are the model). Paths are host paths ("/etc/kubernetes/admin.conf"); `NodeFs`
//! maps them under `--root`. Writes take a [`File`], so a file's mode cannot be restated at a call
//! site; directories take their mode from [`DIRS`], so a directory's mode no longer depends on
//! which write happens to create it first.

use std::borrow::Cow;

/// Keys, kubeconfigs with credentials, tokens, manifests, kubestrap's own state.
pub const PRIVATE: u32 = 0o600;
/// Certificates, public keys, the kubelet's config and flags.
pub(crate) const READABLE: u32 = 0o644;
/// Any directory not in [`DIRS`] (custom certificatesDir, pki/etcd, parents).
pub(crate) const DIR_DEFAULT: u32 = 0o755;

pub const KUBERNETES_DIR: &str = "/etc/kubernetes";
pub const MANIFESTS_DIR: &str = "/etc/kubernetes/manifests";
/// kubeadm's `/etc/kubernetes/tmp`: its upgrade backups, and our renewal backups.
pub const KUBERNETES_TMP_DIR: &str = "/etc/kubernetes/tmp";
pub const DEFAULT_CERTS_DIR: &str = "/etc/kubernetes/pki";
pub const ETCD_DATA_DIR: &str = "/var/lib/etcd";
pub const KUBELET_DIR: &str = "/var/lib/kubelet";
pub(crate) const KUBELET_PKI_DIR: &str = "/var/lib/kubelet/pki";
/// kubestrap's own state: the boot plan, stamps, the run lock, a generated token.
pub(crate) const STATE_DIR: &str = "/var/lib/kubestrap";
/// Lost at reboot: the status file and datasource mounts.
pub(crate) const RUN_DIR: &str = "/run/kubestrap";

/// Directories with a mode of their own, as kubeadm and the kubelet create them.
pub(crate) const DIRS: &[(&str, u32)] = &[
    (KUBERNETES_DIR, 0o755),
    // kubeadm's CreateStaticPodFiles: MkdirAll(manifestDir, 0700).
    (MANIFESTS_DIR, 0o700),
    // kubeadm's CreateTimestampDir: MkdirAll(tmp, 0700), then Mkdir(dir, 0700).
    (KUBERNETES_TMP_DIR, 0o700),
    (DEFAULT_CERTS_DIR, 0o755),
    // etcd refuses a data dir readable by others.
    (ETCD_DATA_DIR, 0o700),
    // kubeadm's WriteConfigToDisk: MkdirAll(kubeletDir, 0700).
    (KUBELET_DIR, 0o700),
    (KUBELET_PKI_DIR, 0o755),
    (STATE_DIR, 0o700),
    (RUN_DIR, 0o755),
];

/// The mode a directory is created with.
pub(crate) fn dir_mode(host_dir: &str) -> u32 {
    let d = host_dir.trim_end_matches('/');
    DIRS.iter().find(|(p, _)| *p == d).map_or(DIR_DEFAULT, |(_, m)| *m)
}

/// A file kubestrap writes: where, and with which mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub path: Cow<'static, str>,
    pub mode: u32,
}

impl File {
    pub const fn fixed(path: &'static str, mode: u32) -> File {
        File { path: Cow::Borrowed(path), mode }
    }
    pub fn at(path: String, mode: u32) -> File {
        File { path: Cow::Owned(path), mode }
    }
    pub fn as_str(&self) -> &str {
        &self.path
    }
}

impl AsRef<str> for File {
    fn as_ref(&self) -> &str {
        &self.path
    }
}

impl std::fmt::Display for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.path)
    }
}

/// A directory created with a fixed mode (the etcd data dir may be configured anywhere).
pub struct Dir {
    pub path: String,
    pub mode: u32,
}

// /etc/kubernetes

/// `/etc/kubernetes/<name>`: admin.conf, super-admin.conf, kubelet.conf, controller-manager.conf,
/// scheduler.conf. They hold client keys.
pub fn kubeconfig(file_name: &str) -> File {
    File::at(format!("{KUBERNETES_DIR}/{file_name}"), PRIVATE)
}
pub(crate) const ADMIN_CONF: File = File::fixed("/etc/kubernetes/admin.conf", PRIVATE);
pub const SUPER_ADMIN_CONF: File = File::fixed("/etc/kubernetes/super-admin.conf", PRIVATE);
pub(crate) const KUBELET_CONF: File = File::fixed("/etc/kubernetes/kubelet.conf", PRIVATE);
/// Written by join's discovery (it holds the bootstrap token), removed once the TLS bootstrap is done.
pub(crate) const BOOTSTRAP_KUBELET_CONF: File = File::fixed("/etc/kubernetes/bootstrap-kubelet.conf", PRIVATE);

/// Where `certs renew` and the every-boot renewal keep the files they replace, named as
/// kubeadm names its upgrade backups (`kubeadm-backup-etcd-<stamp>`); `stamp` is
/// `YYYY-MM-DD-hh-mm-ss` (UTC).
pub fn renewal_backup_dir(stamp: &str) -> Dir {
    Dir { path: format!("{KUBERNETES_TMP_DIR}/kubeadm-backup-certs-{stamp}"), mode: 0o700 }
}
/// A file inside a renewal backup: `<dir>/<path relative to /etc/kubernetes>` (a certificatesDir
/// elsewhere keeps its full path). Private: the backups hold keys.
pub fn renewal_backup_file(dir: &Dir, host_path: &str) -> File {
    let rel = host_path.strip_prefix("/etc/kubernetes/").unwrap_or(host_path).trim_start_matches('/');
    File::at(format!("{}/{rel}", dir.path), PRIVATE)
}

/// `/etc/kubernetes/manifests/<component>.yaml`.
pub fn manifest(component: &str) -> File {
    File::at(format!("{MANIFESTS_DIR}/{component}.yaml"), PRIVATE)
}

// The PKI, under the configured certificatesDir.

pub fn cert(certs_dir: &str, name: &str) -> File {
    File::at(format!("{certs_dir}/{name}.crt"), READABLE)
}
pub fn key(certs_dir: &str, name: &str) -> File {
    File::at(format!("{certs_dir}/{name}.key"), PRIVATE)
}
/// The service-account public key as the `certs` phase writes it: kubeadm's `WritePublicKey`
/// goes through keyutil.WriteKey, so 0600 like a key.
pub fn sa_pub(certs_dir: &str) -> File {
    File::at(format!("{certs_dir}/sa.pub"), PRIVATE)
}
/// sa.pub as `download-certs` writes it: kubeadm's writeCertOrKey writes any non-private-key
/// PEM with certutil.WriteCert, so 0644.
pub fn sa_pub_downloaded(certs_dir: &str) -> File {
    File::at(format!("{certs_dir}/sa.pub"), READABLE)
}
/// A CA certificate at a configured path (JoinConfiguration.caCertPath).
pub(crate) fn ca_cert_at(path: &str) -> File {
    File::at(path.to_string(), READABLE)
}
pub(crate) fn default_ca_cert() -> String {
    format!("{DEFAULT_CERTS_DIR}/ca.crt")
}

/// The local etcd's data dir.
pub(crate) fn etcd_data_dir(path: &str) -> Dir {
    Dir { path: path.to_string(), mode: 0o700 }
}

// The kubelet.

pub(crate) const KUBELET_CONFIG: File = File::fixed("/var/lib/kubelet/config.yaml", READABLE);
pub(crate) const KUBELET_FLAGS_ENV: File = File::fixed("/var/lib/kubelet/kubeadm-flags.env", READABLE);
/// The node's own KubeletConfiguration fields (kubeadm 1.34+: the CRI endpoint), merged into config.yaml.
pub(crate) const KUBELET_INSTANCE_CONFIG: File = File::fixed("/var/lib/kubelet/instance-config.yaml", READABLE);
/// The key of a pending TLS bootstrap, kept so a rerun finds the same CSR (named by the key).
pub(crate) const KUBELET_CLIENT_KEY_TMP: File = File::fixed("/var/lib/kubelet/pki/kubelet-client.key.tmp", PRIVATE);
/// The kubelet's rotating identity: an absolute symlink to the newest timestamped bundle.
pub(crate) const KUBELET_CLIENT_CURRENT: File = File::fixed("/var/lib/kubelet/pki/kubelet-client-current.pem", PRIVATE);
/// `kubelet-client-<ts>.pem`: certificate chain then key.
pub(crate) fn kubelet_client_bundle(timestamp: &str) -> File {
    File::at(format!("{KUBELET_PKI_DIR}/kubelet-client-{timestamp}.pem"), PRIVATE)
}

// kubestrap's own state.

/// The plan the pre-kubelet boot stage worked from, for the post-kubelet one (holds the token).
pub(crate) const BOOT_PLAN: File = File::fixed("/var/lib/kubestrap/plan.yaml", PRIVATE);
/// Held (flock) for a whole run so two runs on one root never interleave.
pub(crate) const RUN_LOCK: File = File::fixed("/var/lib/kubestrap/lock", PRIVATE);
/// A bootstrap token kubestrap generated, so a rerun prints and uses the same one.
pub(crate) const GENERATED_TOKEN: File = File::fixed("/var/lib/kubestrap/bootstrap-token", PRIVATE);
/// A certificate key kubestrap generated for `--upload-certs`, kept for reruns and the join command.
pub(crate) const GENERATED_CERTIFICATE_KEY: File = File::fixed("/var/lib/kubestrap/certificate-key", PRIVATE);
/// Left by an init/join that got past preflight, so a resumed run accepts its own files.
pub(crate) const INIT_IN_PROGRESS: File = File::fixed("/var/lib/kubestrap/init-in-progress", PRIVATE);
pub(crate) const JOIN_IN_PROGRESS: File = File::fixed("/var/lib/kubestrap/join-in-progress", PRIVATE);
/// What the image was built for (`{"kubernetesVersion": "v1.37.2"}`), written by the image
/// builder; read at every boot to upgrade the node by image.
pub(crate) const IMAGE_INFO: File = File::fixed("/usr/share/kubestrap/image.json", READABLE);
/// The Kubernetes version this node was last set up (or upgraded) for.
pub(crate) const DEPLOYED_VERSION: File = File::fixed("/var/lib/kubestrap/kubernetes-version", READABLE);
/// A control plane's upgrade by image under way (its target version): a boot that finds the
/// manifests already at that version still runs it again, so phases cut short by a power cut
/// (kubelet-config, the add-ons) are finished.
pub(crate) const UPGRADE_IN_PROGRESS: File = File::fixed("/var/lib/kubestrap/upgrade-in-progress", READABLE);
/// While it exists the kubelet does not start (its unit's ConditionPathExists=!): an upgrade by
/// image refused on a worker, whose new kubelet would break the version skew rules.
pub(crate) const KUBELET_HOLD: File = File::fixed("/run/kubestrap/hold-kubelet", READABLE);
/// A boot stage's done stamp and attempt counter.
pub(crate) fn boot_done(stage: &str) -> File {
    File::at(format!("{STATE_DIR}/done-{stage}"), PRIVATE)
}
pub(crate) fn boot_attempts(stage: &str) -> File {
    File::at(format!("{STATE_DIR}/attempts-{stage}"), PRIVATE)
}
/// How many of a boot stage's user-data steps (bootcmd, write_files, runcmd entries) are done,
/// so a retried stage does not run a command or append a file twice.
pub(crate) fn boot_script_progress(stage: &str) -> File {
    File::at(format!("{STATE_DIR}/script-{stage}"), PRIVATE)
}
/// Readable by anyone who debugs the node; holds no secrets.
pub(crate) const STATUS: File = File::fixed("/run/kubestrap/status.json", READABLE);

/// Why the last boot stage failed, for a fleet manager, next to Cluster API's success sentinel
/// (`bootstrap-success.complete`, which the user-data's own `echo success` writes):
/// written when a stage fails, removed when one succeeds. Holds no secrets.
pub(crate) const BOOT_FAILURE: File = File::fixed("/run/cluster-api/bootstrap-failure.json", READABLE);

/// Afterburn's attribute files, as units read them with `EnvironmentFile=`: Flatcar's
/// `COREOS_<PLATFORM>_*` names and upstream's `AFTERBURN_<PLATFORM>_*`. Meta-data, not secret.
pub(crate) const METADATA_FLATCAR: File = File::fixed("/run/metadata/flatcar", READABLE);
pub(crate) const METADATA_AFTERBURN: File = File::fixed("/run/metadata/afterburn", READABLE);
pub(crate) const METADATA_DIR: &str = "/run/metadata";
/// Their first-boot contents, kept so that every later boot can put them back in `/run`.
pub(crate) const METADATA_FLATCAR_SAVED: File = File::fixed("/var/lib/kubestrap/metadata-flatcar", READABLE);
pub(crate) const METADATA_AFTERBURN_SAVED: File = File::fixed("/var/lib/kubestrap/metadata-afterburn", READABLE);

/// Every directory kubestrap writes into besides the certificates dir: where a killed run may
/// have left temp files.
pub(crate) const WRITTEN_DIRS: &[&str] =
    &[KUBERNETES_DIR, MANIFESTS_DIR, KUBELET_DIR, KUBELET_PKI_DIR, STATE_DIR, RUN_DIR, METADATA_DIR];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_private_and_dirs_have_one_mode() {
        for f in [ADMIN_CONF, BOOTSTRAP_KUBELET_CONF, KUBELET_CLIENT_KEY_TMP, BOOT_PLAN, GENERATED_TOKEN] {
            assert_eq!(f.mode, 0o600, "{f}");
        }
        assert_eq!(key("/x", "ca").mode, 0o600);
        assert_eq!(cert("/x", "ca").mode, 0o644);
        assert_eq!(sa_pub("/x").mode, 0o600, "init's certs phase: keyutil.WriteKey");
        assert_eq!(sa_pub_downloaded("/x").mode, 0o644, "download-certs: certutil.WriteCert");
        assert_eq!(kubeconfig("scheduler.conf"), File::at("/etc/kubernetes/scheduler.conf".into(), 0o600));
        assert_eq!(dir_mode("/var/lib/kubelet"), 0o700);
        assert_eq!(dir_mode("/var/lib/kubelet/"), 0o700);
        assert_eq!(dir_mode("/etc/kubernetes/manifests"), 0o700);
        assert_eq!(dir_mode("/srv/pki/etcd"), 0o755);
        let mut seen = std::collections::HashSet::new();
        assert!(DIRS.iter().all(|(p, _)| seen.insert(*p)), "a directory is listed twice");
    }
}
