//! kubeadm 1.37's preflight: where the Port checks listen, ContainerRuntimeVersion, kernels.

use super::*;

fn listened(h: &Fake) -> Vec<(Option<String>, u16)> {
    let mut v = h.listened.lock().unwrap().clone();
    v.sort_by_key(|(_, p)| *p);
    v
}

#[test]
fn ports_listen_where_the_components_will() {
    let h = Fake::good();
    let mut i = input(Role::ControlPlane);
    i.bind = BindAddresses {
        api_server: Some("10.0.0.11".into()),
        scheduler: Some("127.0.0.1".into()),
        controller_manager: None,
        etcd: Some("10.0.0.10".into()),
    };
    run(&h, &i, &[]);
    let want = |a: Option<&str>, p: u16| (a.map(str::to_string), p);
    assert_eq!(
        listened(&h),
        [
            want(Some("10.0.0.10"), 2379),
            want(Some("10.0.0.10"), 2380),
            want(Some("10.0.0.11"), 6443),
            want(None, 10250),
            want(None, 10257),
            want(Some("127.0.0.1"), 10259),
        ]
    );
}

#[test]
fn bind_addresses_follow_kubeadms_rule() {
    use crate::config::types::Arg;
    let yaml = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nlocalAPIEndpoint:\n  advertiseAddress: 10.0.0.10\n";
    let docs = crate::config::parse_documents("t", yaml).unwrap();
    let facts = crate::config::HostFacts { hostname: "cp-1".into(), default_address: None };
    let mut cfg = crate::config::resolve_init("t", docs, &facts).unwrap();
    let b = Input::control_plane(&cfg, Path::new("/")).bind;
    // No bind-address: all addresses, as kubeadm; etcd on the advertise address.
    assert_eq!(b, BindAddresses { etcd: Some("10.0.0.10".into()), ..BindAddresses::default() });
    let arg = |n: &str, v: &str| Arg { name: n.into(), value: v.into() };
    cfg.cluster.api_server.extra_args =
        vec![arg("bind-address", "10.0.0.1"), arg("advertise-address", "10.0.0.12"), arg("bind-address", "10.0.0.2")];
    cfg.cluster.controller_manager.extra_args = vec![arg("bind-address", "0.0.0.0")];
    let b = Input::control_plane(&cfg, Path::new("/")).bind;
    assert_eq!(b.api_server.as_deref(), Some("10.0.0.2"), "the last value, as GetArgValue(.., -1)");
    assert_eq!(b.controller_manager.as_deref(), Some("0.0.0.0"));
    assert_eq!(b.scheduler, None);
    assert_eq!(b.etcd.as_deref(), Some("10.0.0.12"), "apiServer's advertise-address wins for etcd");
}

#[test]
fn runtime_without_runtime_config_warns_with_kubeadms_text() {
    let mut h = Fake::good();
    assert_eq!(outcome(&h, Role::Worker, "ContainerRuntimeVersion"), Outcome::Pass);
    h.runtime_config = Ok(false);
    let r = run(&h, &input(Role::ControlPlane), &[]);
    let row = row(&r, "ContainerRuntimeVersion");
    assert_eq!(row.result, Outcome::Warning);
    assert_eq!(row.message, RUNTIME_CONFIG_MISSING);
    assert!(r.errors().is_empty(), "{:?}", r.errors());
    h.runtime_config = Err("gRPC status 14: unavailable");
    let r = run(&h, &input(Role::Worker), &[]);
    let row = super::row(&r, "ContainerRuntimeVersion");
    assert_eq!(row.result, Outcome::Error);
    assert!(row.message.starts_with("could not check if the runtime config is available: "), "{}", row.message);
}

#[test]
fn kernels_match_system_validators_list() {
    for (k, ok) in [
        ("6.1.0-26-amd64", true),
        ("6.12.5", true),
        ("10.0.1", true),
        ("5.15.0-91-generic", true),
        ("5.10.0-28-amd64", true),
        ("5.4.0-150-generic", true),
        ("5.8.0", false),
        ("4.19.0", false),
        ("6.1", false),
        ("06.1.0", false),
    ] {
        let mut h = Fake::good();
        h.kernel = k.into();
        let want = if ok { Outcome::Pass } else { Outcome::Warning };
        assert_eq!(outcome(&h, Role::Worker, "SystemVerification"), want, "{k}");
    }
    // A real problem stays an error, and its message keeps the kernel warning.
    let mut h = Fake::good();
    h.kernel = "4.19.0".into();
    h.cgroup2 = false;
    let r = run(&h, &input(Role::Worker), &[]);
    assert_eq!(row(&r, "SystemVerification").result, Outcome::Error);
    assert!(row(&r, "SystemVerification").message.contains("kernel release 4.19.0 is unsupported"));
}
