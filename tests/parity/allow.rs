//! The differences from kubeadm that kubestrap makes on purpose, each with its reason. Keys are
//! `"<file> <field>"` as facts.rs writes them; `*` matches any run of characters.

/// (config pattern, "*" for all; key pattern; why kubestrap differs).
const ALLOWED: &[(&str, &str, &str)] = &[
    ("*", "var/lib/kubestrap/*", "kubestrap's own state (the run lock); kubeadm keeps none"),
    ("*", "var/lib/kubestrap/ <mode>", "kubestrap's own state directory"),
    // kubeadm: SEC1 "EC PRIVATE KEY" / PKCS#1 "RSA PRIVATE KEY"; the same keys either way.
    ("*", "*.key pem[0]", "private keys are PKCS#8 PEM on purpose (README, What gets written)"),
    ("*", "*.conf users[*].user.client-key-data pem[0]", "kubeconfig keys are PKCS#8 PEM too (README)"),
    // API objects: the same stored object either way.
    ("*", "api * status*", "kubeadm serializes Go's empty status; the API server ignores status on create"),
    ("*", "api * subjects[*].apiGroup", "the API server defaults a User/Group subject's apiGroup to this one"),
    (
        "*",
        "api DaemonSet kube-system/kube-proxy spec.template.spec.containers[kube-proxy].resources",
        "kubeadm serializes Go's empty ResourceRequirements ({}); absent decodes to the same",
    ),
    (
        "join-*",
        "var/lib/kubelet/pki/kubelet-client-DATE.pem pem[1]",
        "the client key is PKCS#8 PEM too (README); the real kubelet loads and rotates it (tests/real/rotation.rs)",
    ),
    (
        "join-*",
        "var/lib/kubelet/pki/kubelet.crt subject",
        "the kubelet's own self-signed serving certificate, named for the second that kubelet started",
    ),
    ("join-*", "var/lib/kubelet/pki/kubelet.crt issuer", "the same name: it is self-signed"),
    (
        "join-*",
        "var/lib/kubelet/pki/kubelet.crt notBefore before start",
        "dated from when that kubelet started, each run's own moment",
    ),
    (
        "*",
        "api ClusterRoleBinding /kubeadm:cluster-admins *",
        "kubeadm creates it too, but not in its dry run (init.go: EnsureAdminClusterRoleBinding needs a real client); \
         tests/real/peers.rs compares the two real ones",
    ),
];

/// Differences allowed only between these two values: (config pattern, key, kubeadm's value,
/// kubestrap's value, why). A change to either side is a difference again.
type Pinned = (&'static str, &'static str, Option<&'static str>, Option<&'static str>, &'static str);
const PINNED: &[Pinned] = &[(
    "*",
    "api DaemonSet kube-system/kube-proxy spec.template.spec.containers[kube-proxy].volumeMounts[xtables-lock].readOnly",
    None,
    Some("false"),
    "readOnly: false is the default kubeadm leaves out; the same mount (lib-modules' readOnly: true is compared)",
)];

/// Why `key` may differ for `config` between these values, if it may.
pub fn reason(config: &str, key: &str, kubeadm: Option<&str>, kubestrap: Option<&str>) -> Option<&'static str> {
    let pinned = PINNED.iter().find(|(c, k, a, b, _)| glob(c, config) && *k == key && (*a, *b) == (kubeadm, kubestrap));
    ALLOWED
        .iter()
        .find(|(c, k, _)| glob(c, config) && glob(k, key))
        .map(|(_, _, why)| *why)
        .or(pinned.map(|(_, _, _, _, why)| *why))
}

#[test]
fn a_pinned_difference_is_allowed_only_between_its_values() {
    let key = PINNED[0].1;
    assert!(reason("init-default", key, None, Some("false")).is_some());
    assert!(reason("init-default", key, Some("true"), None).is_none(), "lib-modules losing readOnly: true");
    assert!(reason("init-default", &key.replace("xtables-lock", "lib-modules"), None, Some("false")).is_none());
}

/// `*`-only glob matching.
fn glob(pattern: &str, s: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == s,
        Some((head, tail)) => {
            s.starts_with(head)
                && (0..=s.len() - head.len())
                    .any(|i| s.is_char_boundary(head.len() + i) && glob(tail, &s[head.len() + i..]))
        }
    }
}

#[test]
fn glob_matches_runs_of_characters() {
    assert!(glob("a*.key pem[0]", "a/b/ca.key pem[0]"));
    assert!(glob("api * status*", "api Service kube-system/kube-dns status.loadBalancer"));
    assert!(!glob("*.key pem[0]", "ca.key key"));
    assert!(glob("exact", "exact") && !glob("exact", "exactly"));
}
