//! kubeadm's decoding rules (#22): `field: null` is the field not given, at any depth, and a
//! command does not validate documents it never reads (join reads only its JoinConfiguration,
//! init everything but it).

use kubestrap::config::{Reads, parse_documents, parse_documents_for};

const WITH_NULLS: &str = "\
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens: null
nodeRegistration:
  name: cp-1
  taints: null
  kubeletExtraArgs: null
  ignorePreflightErrors: null
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.37.2
apiServer:
  extraArgs: null
  certSANs: null
  extraVolumes:
  - name: audit
    hostPath: /etc/audit
    mountPath: /etc/audit
    readOnly: null
controllerManager: null
scheduler:
  extraArgs: null
etcd:
  local:
    dataDir: /var/lib/etcd
    extraArgs: null
    serverCertSANs: null
dns: null
";

/// The same documents with every null line taken out.
fn without_nulls(text: &str) -> String {
    text.lines().filter(|l| !l.trim_end().ends_with(": null")).map(|l| format!("{l}\n")).collect()
}

#[test]
fn null_is_the_field_not_given_at_any_depth() {
    let with = parse_documents("nulls.yaml", WITH_NULLS).expect("kubeadm accepts null as the empty value");
    let without = parse_documents("nulls.yaml", &without_nulls(WITH_NULLS)).expect("the same without the nulls");
    assert_eq!(with, without);
    assert!(with.init.is_some() && with.cluster.is_some());
}

#[test]
fn a_wrong_type_next_to_a_null_still_names_its_field() {
    let text = format!("{WITH_NULLS}networking:\n  podSubnet: [10.244.0.0/16]\n");
    let e = parse_documents("nulls.yaml", &text).expect_err("a list where a string belongs").to_string();
    assert!(e.contains("networking.podSubnet"), "{e}");
    assert!(!e.contains(" at line "), "lines would point into a copy without the nulls: {e}");
}

const JOIN: &str = "\
apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: 127.0.0.1:6443
    token: abcdef.0123456789abcdef
    unsafeSkipCAVerification: true
";
/// A ClusterConfiguration no kubeadm would accept (a list where a string belongs).
const BAD_CLUSTER: &str = "\
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
networking:
  podSubnet: [10.244.0.0/16]
";

#[test]
fn join_does_not_validate_documents_it_never_reads() {
    let text = format!("{JOIN}---\n{BAD_CLUSTER}");
    let docs =
        parse_documents_for("join.yaml", &text, Reads::Join).expect("kubeadm join ignores the ClusterConfiguration");
    assert!(docs.join.is_some());
    assert!(docs.cluster.is_none());
    assert!(
        docs.warnings.iter().any(|w| w.contains(
            "ignored configuration document with GroupVersionKind kubeadm.k8s.io/v1beta4, Kind=ClusterConfiguration"
        )),
        "{:?}",
        docs.warnings
    );
    // Read as user-data documents (the role not yet known), the same file is refused by field.
    let e = parse_documents("join.yaml", &text).expect_err("all documents read").to_string();
    assert!(e.contains("networking.podSubnet"), "{e}");
}

#[test]
fn init_does_not_validate_a_join_configuration() {
    let bad_join = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery: [oops]\n";
    let init = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n";
    let docs = parse_documents_for("init.yaml", &format!("{init}---\n{bad_join}"), Reads::Init).expect("ignored");
    assert!(docs.init.is_some() && docs.join.is_none());
    assert!(docs.warnings.iter().any(|w| w.contains("Kind=JoinConfiguration")), "{:?}", docs.warnings);
    // A file with only a JoinConfiguration is still no init config, and says what it holds.
    let only = parse_documents_for("init.yaml", bad_join, Reads::Init).expect("ignored");
    let e = only.require_init("init.yaml").expect_err("nothing for init").to_string();
    assert!(e.contains("holds a JoinConfiguration"), "{e}");
}
