//! `upgrade diff [version]`, as kubeadm 1.37's: the unified diff between this control plane's
//! kube-apiserver, kube-controller-manager and kube-scheduler manifests and the ones the
//! cluster's configuration gives at `version` (default the cluster's `kubernetesVersion`). It
//! changes nothing. kubeadm prints the three in Go's map order (random); kubestrap in that order.

use std::io::Write;
use std::path::PathBuf;

use log::info;

use super::cluster::client_from;
use super::context::{Want, control_plane_config};
use crate::config::upgrade::UpgradeConfiguration;
use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::paths::{self, ADMIN_CONF};

pub const COMPONENTS: [&str; 3] = ["kube-apiserver", "kube-controller-manager", "kube-scheduler"];

/// `upgrade diff`'s flags.
#[derive(Debug, Default)]
pub struct DiffArgs {
    pub root: PathBuf,
    pub kubeconfig: Option<PathBuf>,
    /// The positional `[version]`.
    pub version: Option<String>,
    pub context_lines: Option<usize>,
    pub config: Option<UpgradeConfiguration>,
}

pub fn run_diff(a: &DiffArgs, fs: &NodeFs, out: &mut dyn Write) -> Result<()> {
    for c in COMPONENTS {
        let m = paths::manifest(c);
        if !fs.exists(&m) {
            return Err(Error::bad_file(format!(
                "the manifest file {:?} does not exist: `upgrade diff` runs on a control plane",
                m.as_str()
            )));
        }
    }
    let d = a.config.as_ref().and_then(|c| c.diff.clone()).unwrap_or_default();
    let cfg_lines = d.context_lines;
    // kubeadm 1.37 takes the flag when given, else the UpgradeConfiguration's diff.contextLines,
    // which defaults to 0: its documented "3" never applies.
    let context = a.context_lines.or(cfg_lines.map(|n| n as usize)).unwrap_or(0);

    let admin = fs.real(ADMIN_CONF.as_str());
    let client = client_from(fs, a.kubeconfig.as_deref().unwrap_or(&admin))?;
    info!("[upgrade/diff] Reading configuration from the \"kubeadm-config\" ConfigMap in namespace \"kube-system\"...");
    info!("[upgrade/diff] Use 'kubeadm init phase upload-config kubeadm --config your-config-file' to re-upload it.");
    // kubeadm: the cluster's version, then the config's diff.kubernetesVersion, then the argument.
    let want =
        Want { version: a.version.clone().or(d.kubernetes_version.clone()), patches: None, component_configs: false };
    let cfg = control_plane_config(fs, &client, &want)?;
    let node = crate::node::Node::new(fs, &crate::clock::SystemClock, None);
    let ctx = crate::init::InitContext::new(cfg, node, Vec::new());
    for (component, pod) in crate::init::control_plane::pods(&ctx, true)? {
        let path = paths::manifest(component);
        let old = String::from_utf8_lossy(&fs.read(&path)?.unwrap_or_default()).into_owned();
        let new = crate::manifests::pod::to_yaml(&pod)?;
        for line in unified(&old, &new, path.as_str(), context) {
            out.write_all(line.as_bytes()).map_err(|e| Error::failed(format!("writing the diff: {e}")))?;
        }
    }
    Ok(())
}

/// go-difflib's unified diff (Python difflib's algorithm), as kubeadm writes it: lines split
/// after each newline with the last piece given one, no date after the file names.
fn unified(old: &str, new: &str, path: &str, context: usize) -> Vec<String> {
    let lines = |s: &str| {
        let mut v: Vec<String> = s.split_inclusive('\n').map(str::to_string).collect();
        match v.last_mut() {
            Some(l) if !l.ends_with('\n') => l.push('\n'),
            _ => v.push("\n".into()),
        }
        v
    };
    let (a, b) = (lines(old), lines(new));
    let mut d = difflib::unified_diff(&a, &b, path, "new manifest", "", "", context);
    // The crate writes "\t<date>" even for an empty date; go-difflib writes none.
    for header in d.iter_mut().take(2) {
        *header = header.replacen("\t\n", "\n", 1);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::unified;

    #[test]
    fn a_changed_tag_is_one_hunk_with_three_lines_of_context_as_kubeadm_prints_it() {
        let old = "a\nb\nc\nd\nimage: x:v1.37.2\ne\nf\ng\nh\n";
        let new = old.replace("v1.37.2", "v1.37.1");
        let d = unified(old, &new, "/etc/kubernetes/manifests/kube-apiserver.yaml", 3).concat();
        assert_eq!(
            d,
            "--- /etc/kubernetes/manifests/kube-apiserver.yaml\n+++ new manifest\n@@ -2,7 +2,7 @@\n b\n c\n d\n-image: x:v1.37.2\n+image: x:v1.37.1\n e\n f\n g\n"
        );
        assert!(unified(old, old, "p", 3).is_empty(), "equal manifests print nothing");
    }

    #[test]
    fn go_difflibs_extra_last_line_shows_near_the_end() {
        let d = unified("a\nb\n", "a\nc\n", "p", 3).concat();
        assert_eq!(d, "--- p\n+++ new manifest\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n \n");
    }
}
