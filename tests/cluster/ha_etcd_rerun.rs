//! A `join --control-plane` SIGKILLed in etcd-join and run again, against real etcd: cp-2 the
//! moment its learner shows in the member list, cp-3 once its etcd manifest is written (its etcd
//! starting, the promote under way). Each rerun reuses its member: one member per node, all
//! voters. Own loopback addresses, so it runs beside `ha_etcd`.

use crate::common::etcd::health_tls;
use crate::common::*;
use crate::ha_etcd::{Ha, Node, flag, voters};

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kubestrap::etcd;
use kubestrap::fsutil::NodeFs;

/// Runs `n`'s join, SIGKILLs it when `kill_now` says so, then runs it again to the end; the
/// kubelet stand-in runs throughout. Returns the rerun.
fn killed_then_rerun(ha: &Ha, n: &Node, kill_now: &(dyn Fn() -> bool + Sync)) -> Run {
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| ha.kubelet(n, t0, &stop));
        let mut child = ha.spawn_join(n);
        let deadline = Instant::now() + Duration::from_secs(120);
        while !kill_now() {
            assert!(child.try_wait().unwrap().is_none(), "join of {} ended before the kill point", n.name);
            assert!(Instant::now() < deadline, "join of {} never reached the kill point", n.name);
            std::thread::sleep(Duration::from_millis(2));
        }
        child.kill().unwrap();
        let killed = Run { out: child.wait_with_output().unwrap() };
        let manifest = n.at("/etc/kubernetes/manifests/etcd.yaml").exists();
        println!(
            "join --control-plane {} SIGKILLed after {:.2?} (etcd manifest written: {manifest})",
            n.name,
            t0.elapsed()
        );
        assert_eq!(killed.code(), -1, "killed by a signal:\n{}", killed.stderr());
        ha.assert_clean(&killed);
        // The killed run left exactly one member for this node.
        let mine: Vec<_> = ha.members().into_iter().filter(|m| m.1 == n.peer_url()).collect();
        assert_eq!(mine.len(), 1, "{mine:?}");

        let t1 = Instant::now();
        let rerun = Run { out: ha.spawn_join(n).wait_with_output().unwrap() };
        println!("join --control-plane {} rerun: {:.2?} wall", n.name, t1.elapsed());
        stop.store(true, Ordering::SeqCst);
        ha.assert_clean(&rerun);
        rerun
    })
}

#[test]
fn a_join_killed_in_etcd_join_reruns_to_one_voting_member_per_node() {
    let ha = Ha::start("127.0.0.12");
    let n2 = Node::new("cp-2", "127.0.0.13", "");
    let n3 = Node::new("cp-3", "127.0.0.14", "");
    let creds =
        etcd::Credentials::load(&NodeFs::new(ha.first.s.root()), "/etc/kubernetes/pki", etcd::HEALTHCHECK_CLIENT)
            .unwrap();
    let watcher = etcd::Client::new(&[ha.first.client_url()], &creds).unwrap();
    let has_learner = |n: &Node| {
        watcher.member_list().is_ok_and(|ms| ms.iter().any(|m| m.has_peer_url(&n.peer_url()) && m.is_learner))
    };

    let r = killed_then_rerun(&ha, &n2, &|| has_learner(&n2));
    assert_eq!(r.code(), 0, "rerun of cp-2:\n{}\n{}", r.stdout(), r.stderr());
    assert!(r.stderr().contains("already exists"), "the rerun reuses its member:\n{}", r.stderr());
    assert!(!r.stderr().contains("Announced new etcd member"), "{}", r.stderr());
    assert_eq!(ha.members(), voters(&[&ha.first, &n2]));

    let manifest = n3.at("/etc/kubernetes/manifests/etcd.yaml");
    let r = killed_then_rerun(&ha, &n3, &|| manifest.exists());
    assert_eq!(r.code(), 0, "rerun of cp-3:\n{}\n{}", r.stdout(), r.stderr());
    assert!(r.stderr().contains("already exists"), "{}", r.stderr());
    assert_eq!(ha.members(), voters(&[&ha.first, &n2, &n3]));
    assert_eq!(flag(&n3, "initial-cluster-state").as_deref(), Some("existing"));
    let (code, out) = crate::common::etcd::etcdctl(
        &n3.client_url(),
        &crate::common::etcd::refs(&health_tls(&ha.first.s)),
        &["endpoint", "health"],
    );
    assert!(code == 0 && crate::common::etcd::is_healthy(&out), "{out}");
}
