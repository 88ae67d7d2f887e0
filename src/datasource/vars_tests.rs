//! The variable table per datasource: meta-data trees in, Jinja names and Afterburn's
//! environment out, and refusals that name the variable and the datasource.

use serde_json::json;

use super::*;
use crate::datasource::MetaData;

fn gathered(source: &str, tree: Value) -> Gathered {
    let field = |k: &str| tree.get(k).and_then(Value::as_str).map(str::to_string);
    let (id, host) = match source {
        "configdrive" => (field("uuid"), field("hostname")),
        _ => (field("instance-id"), field("local-hostname")),
    };
    Gathered {
        source: source.into(),
        meta: MetaData { instance_id: id, local_hostname: host, tree },
        ..Default::default()
    }
}

fn ec2() -> Vars {
    Vars::new(&gathered(
        "ec2",
        json!({"instance-id": "i-0abc", "local-hostname": "ip-10-0-0-7.ec2.internal",
               "hostname": "ip-10-0-0-7.ec2.internal", "local-ipv4": "10.0.0.7", "public-ipv4": "203.0.113.7",
               "placement": {"availability-zone": "us-east-1a", "region": "us-east-1"}}),
    ))
}

fn nocloud() -> Vars {
    Vars::new(&gathered(
        "nocloud",
        json!({"instance-id": "iid-1", "local-hostname": "w-1", "ports": [80, 443], "ok": true}),
    ))
}

fn openstack() -> Vars {
    Vars::new(&gathered(
        "configdrive",
        json!({"uuid": "u-1", "hostname": "cp-0.novalocal", "name": "cp-0", "availability_zone": "nova",
               "meta": {"role": "cp"}}),
    ))
}

#[test]
fn ds_meta_data_dotted_bracketed_and_nested() {
    let v = ec2();
    for name in [
        "ds.meta_data.local_hostname",
        "ds.meta_data[\"local-hostname\"]",
        "ds.meta_data['local-hostname']",
        "ds.meta_data.hostname",
        "v1.local_hostname",
        "v1['local-hostname']",
        "local_hostname",
    ] {
        assert_eq!(v.jinja(name).unwrap(), "ip-10-0-0-7.ec2.internal", "{name}");
    }
    assert_eq!(v.jinja("ds.meta_data.placement.availability_zone").unwrap(), "us-east-1a");
    assert_eq!(v.jinja("ds.meta_data.placement['availability-zone']").unwrap(), "us-east-1a");
    assert_eq!(v.jinja("ds.meta_data[\"placement\"][\"region\"]").unwrap(), "us-east-1");
    assert_eq!(v.jinja("v1.availability_zone").unwrap(), "us-east-1a");
    assert_eq!(v.jinja("v1.availability-zone").unwrap(), "us-east-1a");
    assert_eq!(v.jinja("v1.region").unwrap(), "us-east-1");
    assert_eq!(v.jinja("v1.cloud_name").unwrap(), "aws");
    assert_eq!(v.jinja("v1.platform").unwrap(), "ec2");
    assert_eq!(v.jinja("instance_id").unwrap(), "i-0abc");
    let n = nocloud();
    assert_eq!(n.jinja("ds.meta_data.ports[1]").unwrap(), "443");
    assert_eq!(n.jinja("ds.meta_data.ok").unwrap(), "True");
}

#[test]
fn per_datasource_names() {
    // VMware's `hostname` on NoCloud meta-data (Cluster API's vSphere templates).
    assert_eq!(nocloud().jinja("ds.meta_data.hostname").unwrap(), "w-1");
    assert_eq!(nocloud().jinja("v1.cloud_name").unwrap(), "nocloud");
    let o = openstack();
    assert_eq!(o.jinja("ds.meta_data.hostname").unwrap(), "cp-0.novalocal");
    assert_eq!(o.jinja("ds.meta_data.uuid").unwrap(), "u-1");
    assert_eq!(o.jinja("ds.meta_data.local_hostname").unwrap(), "cp-0.novalocal");
    assert_eq!(o.jinja("ds.meta_data['instance-id']").unwrap(), "u-1");
    assert_eq!(o.jinja("v1.instance_id").unwrap(), "u-1");
    assert_eq!(o.jinja("v1.local_hostname").unwrap(), "cp-0.novalocal");
    assert_eq!(o.jinja("v1.availability_zone").unwrap(), "nova");
    assert_eq!(o.jinja("ds.meta_data.meta.role").unwrap(), "cp");
    // EC2 without placement/region: the zone less its letter, as cloud-init does.
    let g = gathered("ec2", json!({"placement": {"availability-zone": "eu-west-1b"}}));
    assert_eq!(Vars::new(&g).jinja("v1.region").unwrap(), "eu-west-1");
}

#[test]
fn refusals_name_the_variable_and_the_datasource() {
    let e = nocloud().jinja("ds.meta_data.placement.availability_zone").unwrap_err();
    assert_eq!(
        e.to_string(),
        "ds.meta_data.placement.availability_zone is not supplied by the nocloud datasource; the meta-data has \
         instance-id, local-hostname, ok, ports"
    );
    let e = openstack().jinja("v1.region").unwrap_err().to_string();
    assert!(e.starts_with("v1.region is not supplied by the configdrive datasource; its v1 keys are "), "{e}");
    let e = ec2().jinja("ds.meta_data.placement").unwrap_err().to_string();
    assert!(e.contains("not one value"), "{e}");
    let e = ec2().jinja("ds.meta_data.placement.zone").unwrap_err().to_string();
    assert!(e.ends_with("; placement has availability-zone, region"), "{e}");
    let e = ec2().jinja("local_hostname | upper").unwrap_err().to_string();
    assert!(e.contains("plain variables only"), "{e}");
    // A source without meta-data still has cloud_name, and says so.
    let g = Gathered { source: "credentials".into(), ..Default::default() };
    let e = Vars::new(&g).jinja("ds.meta_data.local_hostname").unwrap_err().to_string();
    assert_eq!(
        e,
        "ds.meta_data.local_hostname is not supplied by the credentials datasource; the meta-data has no keys"
    );
    assert_eq!(Vars::new(&g).jinja("v1.cloud_name").unwrap(), "unknown");
    assert!(Vars::new(&g).afterburn().is_empty());
    // The dashed spelling of `hostname` does not fall back outside NoCloud: EC2 would have it.
    let g = gathered("ec2", json!({"local-hostname": "a"}));
    assert!(Vars::new(&g).jinja("ds.meta_data.hostname").is_err());
}

#[test]
fn names_that_are_not_plain_variables() {
    for bad in ["", "1x", "a.", "a[b]", "a['b'", "a + b", "f(x)", "a..b"] {
        assert_eq!(parse_name(bad), None, "{bad:?}");
    }
    assert_eq!(parse_name(" a.b-c['d e'][0] ").unwrap(), ["a", "b-c", "d e", "0"]);
}

#[test]
fn afterburn_names_per_platform() {
    let keys = |v: &Vars| v.afterburn().into_iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>();
    assert_eq!(
        keys(&ec2()),
        [
            "COREOS_EC2_HOSTNAME=ip-10-0-0-7.ec2.internal",
            "COREOS_EC2_INSTANCE_ID=i-0abc",
            "COREOS_EC2_IPV4_LOCAL=10.0.0.7",
            "COREOS_EC2_IPV4_PUBLIC=203.0.113.7",
            "COREOS_EC2_REGION=us-east-1",
            "COREOS_EC2_AVAILABILITY_ZONE=us-east-1a",
            "AFTERBURN_AWS_HOSTNAME=ip-10-0-0-7.ec2.internal",
            "AFTERBURN_AWS_INSTANCE_ID=i-0abc",
            "AFTERBURN_AWS_IPV4_LOCAL=10.0.0.7",
            "AFTERBURN_AWS_IPV4_PUBLIC=203.0.113.7",
            "AFTERBURN_AWS_REGION=us-east-1",
            "AFTERBURN_AWS_AVAILABILITY_ZONE=us-east-1a",
        ]
    );
    assert_eq!(
        keys(&openstack()),
        [
            "COREOS_OPENSTACK_HOSTNAME=cp-0.novalocal",
            "COREOS_OPENSTACK_INSTANCE_UUID=u-1",
            "COREOS_OPENSTACK_AVAILABILITY_ZONE=nova",
            "AFTERBURN_OPENSTACK_HOSTNAME=cp-0.novalocal",
            "AFTERBURN_OPENSTACK_INSTANCE_UUID=u-1",
            "AFTERBURN_OPENSTACK_AVAILABILITY_ZONE=nova",
        ]
    );
    assert_eq!(
        keys(&nocloud()),
        [
            "COREOS_NOCLOUD_HOSTNAME=w-1",
            "COREOS_NOCLOUD_INSTANCE_ID=iid-1",
            "AFTERBURN_NOCLOUD_HOSTNAME=w-1",
            "AFTERBURN_NOCLOUD_INSTANCE_ID=iid-1",
        ]
    );
    assert_eq!(ec2().env("AFTERBURN_AWS_REGION").unwrap(), "us-east-1");
    let e = nocloud().env("AFTERBURN_NOCLOUD_REGION").unwrap_err().to_string();
    assert_eq!(e, "AFTERBURN_NOCLOUD_REGION is not supplied by the nocloud datasource");
    // A value with a line break is left out rather than break the KEY=VALUE file.
    let g = gathered("nocloud", json!({"local-hostname": "a\nB=c"}));
    assert!(Vars::new(&g).afterburn().is_empty());
}
