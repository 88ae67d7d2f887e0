//! The resources the double serves and how request paths map onto them.

/// One REST resource, keyed by (group, plural) like the real server's storage.
#[derive(Debug, PartialEq, Eq)]
pub struct Resource {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// Resources whose `status` is written only through the `/status`
    /// subresource; main-resource writes keep the stored status.
    pub has_status: bool,
}

impl Resource {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.to_string() } else { format!("{}/{}", self.group, self.version) }
    }

    /// `configmaps` or `certificatesigningrequests.certificates.k8s.io`, the
    /// spelling the real server uses in error messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() { self.plural.to_string() } else { format!("{}.{}", self.plural, self.group) }
    }

    /// Prefix of every path for this resource, e.g. `/apis/apps/v1`.
    pub fn path_prefix(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }
}

const fn res(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    has_status: bool,
) -> Resource {
    Resource { group, version, plural, kind, namespaced, has_status }
}

pub static NAMESPACES: Resource = res("", "v1", "namespaces", "Namespace", false, true);
pub static SECRETS: Resource = res("", "v1", "secrets", "Secret", true, false);
pub static CONFIGMAPS: Resource = res("", "v1", "configmaps", "ConfigMap", true, false);
pub static NODES: Resource = res("", "v1", "nodes", "Node", false, true);
pub static CLUSTERROLES: Resource = res("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false, false);
pub static CLUSTERROLEBINDINGS: Resource =
    res("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false, false);
pub static ROLES: Resource = res("rbac.authorization.k8s.io", "v1", "roles", "Role", true, false);
pub static ROLEBINDINGS: Resource = res("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true, false);
pub static CSRS: Resource =
    res("certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", false, true);

static SERVICEACCOUNTS: Resource = res("", "v1", "serviceaccounts", "ServiceAccount", true, false);
static SERVICES: Resource = res("", "v1", "services", "Service", true, true);
static PODS: Resource = res("", "v1", "pods", "Pod", true, true);
static ENDPOINTS: Resource = res("", "v1", "endpoints", "Endpoints", true, false);
static DEPLOYMENTS: Resource = res("apps", "v1", "deployments", "Deployment", true, true);
static DAEMONSETS: Resource = res("apps", "v1", "daemonsets", "DaemonSet", true, true);
static LEASES: Resource = res("coordination.k8s.io", "v1", "leases", "Lease", true, false);

pub static ALL: [&Resource; 16] = [
    &NAMESPACES,
    &SECRETS,
    &CONFIGMAPS,
    &SERVICEACCOUNTS,
    &SERVICES,
    &NODES,
    &PODS,
    &ENDPOINTS,
    &DEPLOYMENTS,
    &DAEMONSETS,
    &CLUSTERROLES,
    &CLUSTERROLEBINDINGS,
    &ROLES,
    &ROLEBINDINGS,
    &CSRS,
    &LEASES,
];

pub fn lookup(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    ALL.iter().copied().find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Finds the resource for an object's `apiVersion` and `kind`.
pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static Resource> {
    ALL.iter().copied().find(|r| r.api_version() == api_version && r.kind == kind)
}

/// A request path split into its REST parts.
#[derive(Debug, PartialEq, Eq)]
pub enum ApiPath {
    /// Anything outside /api and /apis (/healthz, /version, ...).
    NonResource(String),
    /// A discovery document (/api, /apis, /api/v1, /apis/<group>/<version>).
    Discovery(String),
    Resource(ResourcePath),
}

#[derive(Debug, PartialEq, Eq)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    pub plural: String,
    /// Empty for cluster-scoped resources and for all-namespace lists.
    pub namespace: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// Splits a path (no query string) the way the real server's request-info
/// resolver does.
pub fn parse_path(path: &str) -> ApiPath {
    let segs: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api"] | ["apis"] => return ApiPath::Discovery(path.to_string()),
        ["api", version] => return ApiPath::Discovery(format!("/api/{version}")),
        ["apis", group] | ["apis", group, _] if segs.len() <= 3 && !group.is_empty() => {
            return ApiPath::Discovery(path.to_string());
        }
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return ApiPath::NonResource(path.to_string()),
    };
    let mk = |namespace: &str, plural: &str, name: Option<&&str>, sub: Option<&&str>| {
        ApiPath::Resource(ResourcePath {
            group: group.to_string(),
            version: version.to_string(),
            plural: plural.to_string(),
            namespace: namespace.to_string(),
            name: name.map(|s| s.to_string()),
            subresource: sub.map(|s| s.to_string()),
        })
    };
    match rest {
        // /namespaces/<ns>/status and /finalize are subresources of the
        // namespace itself, not a resource called "status" inside it.
        ["namespaces", ns, sub @ ("status" | "finalize")] => mk("", "namespaces", Some(ns), Some(sub)),
        ["namespaces", ns, plural, tail @ ..] if tail.len() <= 2 => mk(ns, plural, tail.first(), tail.get(1)),
        [plural, tail @ ..] if tail.len() <= 2 => mk("", plural, tail.first(), tail.get(1)),
        _ => ApiPath::NonResource(path.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rp(group: &str, plural: &str, ns: &str, name: Option<&str>, sub: Option<&str>) -> ApiPath {
        ApiPath::Resource(ResourcePath {
            group: group.into(),
            version: "v1".into(),
            plural: plural.into(),
            namespace: ns.into(),
            name: name.map(Into::into),
            subresource: sub.map(Into::into),
        })
    }

    #[test]
    fn paths() {
        assert_eq!(
            parse_path("/api/v1/namespaces/kube-public/configmaps/cluster-info"),
            rp("", "configmaps", "kube-public", Some("cluster-info"), None)
        );
        assert_eq!(parse_path("/api/v1/namespaces/kube-system"), rp("", "namespaces", "", Some("kube-system"), None));
        assert_eq!(parse_path("/api/v1/namespaces"), rp("", "namespaces", "", None, None));
        assert_eq!(parse_path("/api/v1/namespaces/x/status"), rp("", "namespaces", "", Some("x"), Some("status")));
        assert_eq!(parse_path("/api/v1/namespaces/x/secrets"), rp("", "secrets", "x", None, None));
        assert_eq!(
            parse_path("/apis/certificates.k8s.io/v1/certificatesigningrequests/n/approval"),
            rp("certificates.k8s.io", "certificatesigningrequests", "", Some("n"), Some("approval"))
        );
        assert_eq!(parse_path("/healthz"), ApiPath::NonResource("/healthz".into()));
        assert_eq!(parse_path("/apis"), ApiPath::Discovery("/apis".into()));
        assert_eq!(parse_path("/apis/apps/v1"), ApiPath::Discovery("/apis/apps/v1".into()));
    }
}
