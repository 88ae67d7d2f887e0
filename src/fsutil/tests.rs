use super::*;

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    v.sort();
    v
}

#[test]
fn unsynced_writes_land_at_once_whole_and_leave_no_temp() {
    let t = tempfile::tempdir().unwrap();
    let nfs = NodeFs::new(t.path());
    let f = NodeFile::fixed("/var/lib/kubestrap/attempts-x", 0o600);
    nfs.write_unsynced(&f, b"1").unwrap();
    nfs.write_unsynced(&f, b"2").unwrap();
    let p = t.path().join("var/lib/kubestrap/attempts-x");
    assert_eq!(fs::read(&p).unwrap(), b"2", "visible without a commit");
    assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(names(&t.path().join("var/lib/kubestrap")), ["attempts-x"]);
    // A staged write still waits for the commit; the unsynced one is not staged.
    nfs.discard();
    assert_eq!(fs::read(&p).unwrap(), b"2");
}

#[test]
fn staged_writes_are_visible_to_reads_and_land_on_commit() {
    let t = tempfile::tempdir().unwrap();
    let nfs = NodeFs::new(t.path());
    let key = NodeFile::fixed("/var/lib/kubelet/pki/a.key", 0o600);
    nfs.write(&key, b"secret").unwrap();
    assert_eq!(nfs.read(&key).unwrap().as_deref(), Some(&b"secret"[..]));
    assert!(!t.path().join("var/lib/kubelet/pki/a.key").exists(), "visible before commit");
    nfs.commit().unwrap();
    let p = t.path().join("var/lib/kubelet/pki/a.key");
    assert_eq!(fs::read(&p).unwrap(), b"secret");
    let mode = |p: &str| fs::metadata(t.path().join(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("var/lib/kubelet/pki/a.key"), 0o600);
    // Each directory gets its own mode from `paths`, whichever write creates it.
    assert_eq!(mode("var/lib/kubelet/pki"), 0o755);
    assert_eq!(mode("var/lib/kubelet"), 0o700);
    assert_eq!(mode("var/lib"), 0o755);
    assert_eq!(names(&t.path().join("var/lib/kubelet/pki")), ["a.key"]);
}

#[test]
fn discarded_and_dropped_writes_leave_no_temp_files() {
    let t = tempfile::tempdir().unwrap();
    {
        let nfs = NodeFs::new(t.path());
        nfs.write(&NodeFile::fixed("/d/one", 0o644), b"1").unwrap();
        nfs.discard();
        nfs.write(&NodeFile::fixed("/d/two", 0o644), b"2").unwrap();
    }
    assert!(names(&t.path().join("d")).is_empty());
}

#[test]
fn stale_temps_are_removed_and_dry_run_touches_nothing() {
    let t = tempfile::tempdir().unwrap();
    fs::create_dir(t.path().join("d")).unwrap();
    fs::write(t.path().join("d/.ca.key.kubestrap-tmp.999"), b"half").unwrap();
    fs::write(t.path().join("d/keep"), b"k").unwrap();
    NodeFs::new(t.path()).remove_stale_temps_in(&["/d"]);
    assert_eq!(names(&t.path().join("d")), ["keep"]);
    let dry = NodeFs::dry_run(t.path());
    dry.write(&NodeFile::fixed("/d/new", 0o600), b"n").unwrap();
    dry.commit().unwrap();
    assert_eq!(names(&t.path().join("d")), ["keep"]);
    assert_eq!(dry.planned()[0].mode, "0600");
}
