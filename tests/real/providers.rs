//! Cluster API providers' Jinja user-data (tests/fixtures/jinja-vars/: AWS's nested placement,
//! vSphere's `hostname`, OpenStack's `v1.*` and bare names, Azure's bracket form with a default)
//! booted on the real components: each worker's name and labels come from its own meta-data
//! through the one variable table, and each Node is Ready under that name (#22).

use super::cluster::*;
use crate::common::*;

/// The test host's settings in a provider's JoinConfiguration: the endpoint and pin of this
/// cluster, and this node's CRI socket, node IP and cgroup root.
fn test_host(user_data: &str) -> String {
    let (reg, args) = ("      nodeRegistration:\n", "        kubeletExtraArgs:\n");
    assert!(user_data.contains(reg) && user_data.contains(args), "the provider's nodeRegistration changed");
    user_data
        .replace("127.0.0.1:6443", "{addr}:{port}")
        .replace(&format!("sha256:{}", "0".repeat(64)), "{hash}")
        .replace(reg, &format!("{reg}        criSocket: {{cri}}\n"))
        .replace(
            args,
            &format!("{args}        - name: node-ip\n          value: {{ip}}\n        - name: cgroup-root\n          value: /kubestrap-{{name}}\n"),
        )
}

#[test]
fn provider_jinja_user_data_boots_workers_named_from_their_meta_data() {
    let mut c = Cluster::boot(fixture!("real/boot-control-plane.user-data"));
    c.wait_cluster_info_signed();
    let cases = [
        (
            "w-aws",
            fixture!("jinja-vars/aws-worker"),
            "placement:\n  availability-zone: us-east-1a\n  region: us-east-1\nregion: us-east-1\n",
            Some(("topology.kubernetes.io/zone", "us-east-1a")),
        ),
        ("w-vsphere", fixture!("jinja-vars/vsphere-worker"), "hostname: w-vsphere\n", None),
        (
            "w-openstack",
            fixture!("jinja-vars/openstack-worker"),
            "availability_zone: nova\n",
            Some(("topology.kubernetes.io/zone", "nova")),
        ),
        ("w-azure", fixture!("jinja-vars/azure-worker"), "", Some(("instance", "i-w-azure"))),
    ];
    for (i, (name, ud, meta, label)) in cases.into_iter().enumerate() {
        let w = Scratch::new("");
        let root = w.root();
        seed(&root, &c.fill_node(&test_host(ud), name, 22 + i, &root), name);
        // The provider's meta-data, on the NoCloud seed (its tree is what ds.meta_data reads).
        write_file(
            &root.join("var/lib/cloud/seed/nocloud/meta-data"),
            format!("instance-id: i-{name}\nlocal-hostname: {name}\n{meta}"),
        );
        let runs = c.boot_node_in(name, 22 + i, w);
        assert_eq!(runs.len(), 2, "{name}: {}", runs[0].stderr());
        for r in &runs {
            assert_eq!(r.code(), 0, "{name}:\n{}\n{}", r.stdout(), r.stderr());
        }
        c.wait_ready(name);
        if let Some((key, value)) = label {
            let node = c.get(&["node", name]);
            assert_eq!(node["metadata"]["labels"][key], value, "{name}: {}", node["metadata"]["labels"]);
        }
    }
}
