//! kubeadm 1.37's version skew policy for `upgrade apply` (EnforceVersionPolicies): mandatory
//! errors stop it; skippable ones stop it unless `--force`. kubestrap renders Kubernetes 1.36 and
//! 1.37 as kubeadm 1.37 does, so it plays a kubeadm of minor 37 of any patch.

use crate::config::values::Version;
use crate::constants::{MAX_MINOR, MIN_MINOR};

#[derive(Debug, Default, PartialEq)]
pub struct Skew {
    pub mandatory: Vec<String>,
    pub skippable: Vec<String>,
}

/// The rules between the target, the cluster's version (its API server's) and its kubelets'
/// (the Nodes' `kubeletVersion`s as listed, or why they could not be: a skippable error).
pub fn enforce(
    target: &Version,
    cluster: &Version,
    kubelets: std::result::Result<&[String], String>,
    experimental: bool,
    rc: bool,
) -> Skew {
    let t = target.to_string();
    let prerelease = target.suffix.starts_with('-');
    let mut mandatory = Vec::new();
    let mut skippable = Vec::new();
    if let Err(e) = &kubelets {
        skippable.push(format!("Unable to fetch kubelet version: {e}"));
    }
    // A released version's rule is mandatory; a pre-release's needs --force.
    let mut by_release = |m: String| if prerelease { skippable.push(m) } else { mandatory.push(m) };
    if target.minor > cluster.minor + 1 {
        by_release(format!(
            "Specified version to upgrade to {t:?} is too high; kubeadm can upgrade only 1 minor version at a time"
        ));
    }
    if target.minor + 1 < cluster.minor {
        by_release(format!(
            "Specified version to downgrade to {t:?} is too low; kubeadm can downgrade only 1 minor version at a time"
        ));
    }
    if target.minor > MAX_MINOR {
        by_release(format!(
            "Specified version to upgrade to {t:?} is at least one minor release higher than the kubeadm minor release ({} > {MAX_MINOR}). Such an upgrade is not supported",
            target.minor
        ));
    }
    // The minimum is kubeadm's first rule, mandatory even for a pre-release, which sorts before
    // its release: v1.36.0-rc.1 is below v1.36.0.
    let below_first = (target.major, target.minor, target.patch) == (1, MIN_MINOR, 0) && prerelease;
    if (target.major, target.minor) < (1, MIN_MINOR) || below_first {
        mandatory.insert(
            0,
            format!(
                "Specified version to upgrade to {t:?} is equal to or lower than the minimum supported version \"{cluster}\". Please specify a higher version to upgrade to"
            ),
        );
    }
    if target.major < 1 || (target.major == 1 && target.minor < MAX_MINOR) {
        skippable.push(format!(
            "Kubeadm version v1.{MAX_MINOR} can only be used to upgrade to Kubernetes version 1.{MAX_MINOR}"
        ));
    }
    if prerelease && !experimental && !(rc && target.suffix.starts_with("-rc")) {
        skippable.push(format!(
            "Specified version to upgrade to {t:?} is an unstable version and such upgrades weren't allowed via setting the --allow-*-upgrades flags"
        ));
    }
    let kubelets = kubelets.unwrap_or_default();
    let parsed: std::result::Result<Vec<Version>, &String> =
        kubelets.iter().map(|k| Version::parse(k).map_err(|_| k)).collect();
    let mut old: Vec<String> = match parsed {
        Ok(vs) => vs.iter().filter(|k| target.minor > k.minor + 3).map(|k| k.to_string()).collect(),
        Err(bad) => {
            skippable.push(format!("couldn't parse kubelet version {bad}"));
            Vec::new()
        }
    };
    old.sort();
    old.dedup();
    if !old.is_empty() {
        skippable.push(format!(
            "There are kubelets in this cluster that are too old that have these versions [{}]",
            old.join(" ")
        ));
    }
    Skew { mandatory, skippable }
}

/// kubeadm's formatErrorMsg: a tab, a dash, the message, a newline each.
pub fn format(errs: &[String]) -> String {
    errs.iter().map(|e| format!("\t- {e}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).expect("version")
    }

    fn k(vs: &[&str]) -> Vec<String> {
        vs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_minimums_pre_release_is_below_it_and_kubelets_that_cannot_be_read_are_skippable() {
        let s = enforce(&v("v1.36.0-rc.1"), &v("v1.36.0"), Ok(&[]), true, true);
        assert!(s.mandatory[0].contains("is equal to or lower than the minimum supported version"), "{s:?}");
        assert!(enforce(&v("v1.36.1-rc.1"), &v("v1.36.0"), Ok(&[]), true, true).mandatory.is_empty());
        let s = enforce(&v("v1.37.2"), &v("v1.36.3"), Err("forbidden".into()), false, false);
        assert_eq!(s, Skew { mandatory: vec![], skippable: vec!["Unable to fetch kubelet version: forbidden".into()] });
        let s = enforce(&v("v1.37.2"), &v("v1.36.3"), Ok(&k(&["v1.36.3", "banana"])), false, false);
        assert_eq!(s.skippable, ["couldn't parse kubelet version banana"]);
    }

    #[test]
    fn one_minor_up_passes_and_the_rest_is_kubeadms_words() {
        assert_eq!(enforce(&v("v1.37.2"), &v("v1.36.3"), Ok(&k(&["v1.36.3"])), false, false), Skew::default());
        assert_eq!(enforce(&v("v1.37.0"), &v("v1.37.2"), Ok(&[]), false, false), Skew::default());
        let s = enforce(&v("v1.38.0"), &v("v1.36.3"), Ok(&[]), false, false);
        assert_eq!(s.mandatory.len(), 2, "{s:?}");
        assert!(s.mandatory[0].contains("kubeadm can upgrade only 1 minor version at a time"));
        assert!(s.mandatory[1].contains("(38 > 37). Such an upgrade is not supported"));
        let s = enforce(&v("v1.36.5"), &v("v1.37.2"), Ok(&k(&["v1.33.0"])), false, false);
        assert!(s.mandatory.is_empty());
        assert_eq!(s.skippable, ["Kubeadm version v1.37 can only be used to upgrade to Kubernetes version 1.37"]);
        let s = enforce(&v("v1.35.0"), &v("v1.36.0"), Ok(&[]), false, false);
        assert!(s.mandatory[0].contains("is equal to or lower than the minimum supported version"), "{s:?}");
        let s = enforce(&v("v1.37.0-rc.1"), &v("v1.36.3"), Ok(&k(&["v1.34.1", "v1.33.9"])), false, true);
        assert_eq!(
            s.skippable,
            ["There are kubelets in this cluster that are too old that have these versions [v1.33.9]"]
        );
        let s = enforce(&v("v1.37.0-beta.0"), &v("v1.36.3"), Ok(&[]), false, true);
        assert!(s.skippable[0].contains("is an unstable version"), "{s:?}");
        assert_eq!(format(&["a".into(), "b".into()]), "\t- a\n\t- b\n");
    }
}
