//! `kubestrap upgrade diff` beside the real `kubeadm upgrade diff` on a control plane that
//! kubestrap joined (join_parity.rs's cp-2, the real kubelet running its static Pods): at the
//! cluster's own version both find nothing to change; at another version both print the same
//! unified diffs (kubeadm's three in Go's random map order, so compared file by file), the
//! image tags among them; and kubestrap changed nothing on the node.

use std::collections::BTreeMap;

use super::cluster::*;

/// The diff text of a run's stdout by manifest (`--- <path>` starts each), kubeadm's
/// `[upgrade/diff]` lines left out.
fn by_file(out: &str) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in out.split_inclusive('\n').filter(|l| !l.starts_with("[upgrade/diff]")) {
        if let Some(path) = line.strip_prefix("--- ") {
            files.extend(current.take());
            current = Some((path.trim_end().to_string(), String::new()));
        }
        match &mut current {
            Some((_, text)) => text.push_str(line),
            None => panic!("a line before any `--- <file>`: {line:?}\n{out}"),
        }
    }
    files.extend(current);
    files
}

fn manifests(root: &std::path::Path) -> Vec<Vec<u8>> {
    let dir = at(root, "/etc/kubernetes/manifests");
    let mut names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    names.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

pub fn diff_beside_kubeadm(c: &Cluster, node: &str) {
    let h = c.hosts.iter().find(|h| h.name == node).expect("host");
    let root = h.root.display().to_string();
    let logs = c.logs.with_file_name(format!("{node}-upgrade-diff"));
    std::fs::create_dir_all(&logs).unwrap();
    let before = manifests(&h.root);
    for (version, want_changes) in [(None, false), (Some("v1.37.1"), true)] {
        let mut ours = vec!["upgrade", "diff", "--root", &root];
        let mut theirs = vec!["upgrade", "diff"];
        ours.extend(version);
        theirs.extend(version);
        let r = run_in(&h.netns, &ours);
        assert_eq!(r.code(), 0, "kubestrap upgrade diff {version:?}:\n{}", r.stderr());
        let k = run_kubeadm(&h.netns, &h.root, &logs, &theirs, &|| c.health());
        assert_eq!(k.code(), 0, "kubeadm upgrade diff {version:?}:\n{}\n{}", k.stdout(), k.stderr());
        let (mine, kubeadms) = (by_file(&r.stdout()), by_file(&k.stdout()));
        assert_eq!(mine, kubeadms, "upgrade diff {version:?}: kubestrap's (left) and kubeadm's (right) differ");
        if want_changes {
            assert_eq!(mine.len(), 3, "a diff for each of the three manifests: {mine:#?}");
            let apiserver = &mine["/etc/kubernetes/manifests/kube-apiserver.yaml"];
            assert!(
                apiserver.contains("-    image: registry.k8s.io/kube-apiserver:v1.37.2\n")
                    && apiserver.contains("+    image: registry.k8s.io/kube-apiserver:v1.37.1\n"),
                "{apiserver}"
            );
        } else {
            assert!(mine.is_empty(), "at the cluster's own version nothing changes: {mine:#?}");
        }
    }
    assert_eq!(manifests(&h.root), before, "upgrade diff changed a manifest");
}
