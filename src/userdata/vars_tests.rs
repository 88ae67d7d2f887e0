//! Cluster API provider-style user-data (tests/fixtures/jinja-vars/) planned from each
//! datasource's meta-data: the variable table fills the node name and kubelet flags, and the
//! `kubestrap:` shorthand names the node from the same `v1.local_hostname`.

use serde_json::json;

use super::{NodePlan, plan_detailed};
use crate::datasource::vars::Vars;
use crate::datasource::{Gathered, MetaData};

fn gathered(source: &str, user_data: &str, id: &str, host: &str, tree: serde_json::Value) -> Gathered {
    Gathered {
        source: source.into(),
        user_data: Some(user_data.as_bytes().to_vec()),
        meta: MetaData { instance_id: Some(id.into()), local_hostname: Some(host.into()), tree },
        ..Default::default()
    }
}

/// The join's node name and kubelet flags as `name=value`.
fn join_of(g: &Gathered) -> (String, Vec<String>) {
    let p = plan_detailed(g).unwrap_or_else(|e| panic!("{}: {e}", g.source));
    let NodePlan::Join { join } = p.plan else { panic!("{}: not a join", g.source) };
    let r = join.node_registration;
    (r.name, r.kubelet_extra_args.iter().map(|a| format!("{}={}", a.name, a.value)).collect())
}

#[test]
fn provider_templates_render_from_each_datasource() {
    let aws = include_str!("../../tests/fixtures/jinja-vars/aws-worker");
    let tree = json!({"instance-id": "i-0abc", "local-hostname": "ip-10-0-0-7.ec2.internal",
        "placement": {"availability-zone": "us-east-1a", "region": "us-east-1"}});
    let (name, args) = join_of(&gathered("ec2", aws, "i-0abc", "ip-10-0-0-7.ec2.internal", tree));
    assert_eq!(name, "ip-10-0-0-7.ec2.internal");
    assert!(
        args.contains(
            &"node-labels=topology.kubernetes.io/zone=us-east-1a,topology.kubernetes.io/region=us-east-1".into()
        ),
        "{args:?}"
    );

    let vsphere = include_str!("../../tests/fixtures/jinja-vars/vsphere-worker");
    let g = gathered(
        "nocloud",
        vsphere,
        "vm-1",
        "md-0-abcde",
        json!({"instance-id": "vm-1", "local-hostname": "md-0-abcde"}),
    );
    assert_eq!(join_of(&g).0, "md-0-abcde");

    let openstack = include_str!("../../tests/fixtures/jinja-vars/openstack-worker");
    let tree = json!({"uuid": "u-1", "hostname": "w-0.novalocal", "availability_zone": "nova"});
    let (name, args) = join_of(&gathered("configdrive", openstack, "u-1", "w-0.novalocal", tree));
    assert_eq!(name, "w-0.novalocal");
    assert!(args.contains(&"provider-id=openstack:///u-1".into()), "{args:?}");
    assert!(args.contains(&"node-labels=topology.kubernetes.io/zone=nova".into()), "{args:?}");

    let azure = include_str!("../../tests/fixtures/jinja-vars/azure-worker");
    let g = gathered("nocloud", azure, "i-9", "az-worker", json!({}));
    let (name, args) = join_of(&g);
    assert_eq!(name, "az-worker");
    assert!(args.contains(&"node-labels=instance=i-9".into()), "{args:?}");
}

#[test]
fn a_name_the_datasource_lacks_is_refused_naming_both() {
    let aws = include_str!("../../tests/fixtures/jinja-vars/aws-worker");
    // The same template on a NoCloud seed without placement: refused, not rendered empty.
    let g = gathered("nocloud-seed", aws, "i-1", "n-1", json!({}));
    let e = plan_detailed(&g).unwrap_err().to_string();
    assert!(
        e.contains("ds.meta_data.placement.availability_zone is not supplied by the nocloud-seed datasource"),
        "{e}"
    );
}

#[test]
fn shorthand_node_name_is_the_tables_local_hostname() {
    let ud = "#cloud-config\nkubestrap:\n  role: worker\n  token: abcdef.0123456789abcdef\n  controlPlaneEndpoint: \
              127.0.0.1:6443\n  caCertHashes: ['sha256:0000000000000000000000000000000000000000000000000000000000000000']\n";
    let tree = json!({"uuid": "u-1", "hostname": "w-1.novalocal"});
    let g = gathered("configdrive", ud, "u-1", "w-1.novalocal", tree);
    let (name, _) = join_of(&g);
    assert_eq!(Vars::new(&g).jinja("v1.local_hostname").unwrap(), name);
}
