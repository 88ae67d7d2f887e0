//! RBAC authorisation evaluated from the stored Role/ClusterRole/RoleBinding/
//! ClusterRoleBinding objects, plus the slice of the real server's bootstrap
//! policy kubestrap relies on. Nothing is allowed unless an object grants it,
//! so a binding kubestrap forgets to create makes tests fail as on a real
//! cluster.

use crate::auth::UserInfo;
use crate::resources::{CLUSTERROLEBINDINGS, CLUSTERROLES, ROLEBINDINGS, ROLES};
use crate::store::Store;
use serde_json::{Value, json};

/// What a request wants to do, as the real authorizer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attributes {
    Resource { verb: String, group: String, resource: String, subresource: String, namespace: String, name: String },
    NonResource { verb: String, path: String },
}

/// The group that bypasses authorisation entirely (the real server's
/// privileged-group authorizer runs before RBAC).
const SUPERUSER_GROUP: &str = "system:masters";

pub fn authorize(store: &Store, user: &UserInfo, attrs: &Attributes) -> bool {
    if user.groups.iter().any(|g| g == SUPERUSER_GROUP) {
        return true;
    }
    // The Node authorizer runs before RBAC on the real server.
    if is_node(user) && node_rules().as_array().into_iter().flatten().any(|r| rule_allows(r, attrs)) {
        return true;
    }
    let namespace = match attrs {
        Attributes::Resource { namespace, .. } => namespace.as_str(),
        Attributes::NonResource { .. } => "",
    };
    // ClusterRoleBindings grant everywhere.
    for binding in store.list(&CLUSTERROLEBINDINGS, "") {
        if binds(binding, user) && role_rules(store, binding, "").any(|r| rule_allows(r, attrs)) {
            return true;
        }
    }
    // RoleBindings grant only inside their namespace, and never non-resource
    // URLs (those rules are only honoured from ClusterRoleBindings).
    if namespace.is_empty() {
        return false;
    }
    let Attributes::Resource { .. } = attrs else { return false };
    store
        .list(&ROLEBINDINGS, namespace)
        .any(|binding| binds(binding, user) && role_rules(store, binding, namespace).any(|r| rule_allows(r, attrs)))
}

/// The Status message the real server returns with a 403.
pub fn forbidden_message(user: &UserInfo, attrs: &Attributes) -> String {
    match attrs {
        Attributes::Resource { verb, group, resource, subresource, namespace, name } => {
            let qualified = if group.is_empty() { resource.clone() } else { format!("{resource}.{group}") };
            let subject = if name.is_empty() { qualified } else { format!("{qualified} \"{name}\"") };
            let full = if subresource.is_empty() { resource.clone() } else { format!("{resource}/{subresource}") };
            let scope = if namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace \"{namespace}\"")
            };
            format!(
                "{subject} is forbidden: User \"{}\" cannot {verb} resource \"{full}\" in API group \"{group}\" {scope}",
                user.name
            )
        }
        Attributes::NonResource { verb, path } => {
            format!("forbidden: User \"{}\" cannot {verb} path \"{path}\"", user.name)
        }
    }
}

fn is_node(user: &UserInfo) -> bool {
    user.name.starts_with("system:node:") && user.groups.iter().any(|g| g == "system:nodes")
}

/// A simplified Node authorizer: upstream's static node rules
/// (`bootstrappolicy.NodeRules`) without the object graph, so nodes get no
/// secrets/configmaps, and without NodeRestriction's own-object limits.
fn node_rules() -> Value {
    json!([
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch", "update"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "create", "delete"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch", "update"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["services", "endpoints"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"], "verbs": ["create", "get", "list", "watch"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update", "patch", "delete"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews", "localsubjectaccessreviews"], "verbs": ["create"]},
    ])
}

fn strs(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str)
}

fn binds(binding: &Value, user: &UserInfo) -> bool {
    binding["subjects"].as_array().into_iter().flatten().any(|s| {
        let name = s["name"].as_str().unwrap_or("");
        match s["kind"].as_str().unwrap_or("") {
            "User" => name == user.name,
            "Group" => user.groups.iter().any(|g| g == name),
            "ServiceAccount" => {
                let ns = s["namespace"].as_str().unwrap_or("");
                !ns.is_empty() && user.name == format!("system:serviceaccount:{ns}:{name}")
            }
            _ => false,
        }
    })
}

/// The rules of the role a binding refers to; a dangling roleRef grants
/// nothing, as upstream.
fn role_rules<'a>(store: &'a Store, binding: &Value, namespace: &str) -> impl Iterator<Item = &'a Value> + 'a {
    let name = binding["roleRef"]["name"].as_str().unwrap_or("");
    let role = match binding["roleRef"]["kind"].as_str().unwrap_or("") {
        "ClusterRole" => store.try_get(&CLUSTERROLES, "", name),
        "Role" if !namespace.is_empty() => store.try_get(&ROLES, namespace, name),
        _ => None,
    };
    role.and_then(|r| r["rules"].as_array()).into_iter().flatten()
}

fn has(list: &Value, want: &str) -> bool {
    strs(list).any(|v| v == "*" || v == want)
}

/// Upstream `RuleAllows`: verbs, then API groups, resources (with the
/// `resource/subresource` and `*/subresource` forms) and resourceNames, or
/// non-resource URLs with a trailing `*` prefix match.
fn rule_allows(rule: &Value, attrs: &Attributes) -> bool {
    match attrs {
        Attributes::Resource { verb, group, resource, subresource, name, .. } => {
            if !has(&rule["verbs"], verb) || !has(&rule["apiGroups"], group) {
                return false;
            }
            let combined = if subresource.is_empty() { resource.clone() } else { format!("{resource}/{subresource}") };
            let resource_ok = strs(&rule["resources"]).any(|r| {
                r == "*"
                    || r == combined
                    || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource.as_str()))
            });
            let names: Vec<&str> = strs(&rule["resourceNames"]).collect();
            resource_ok && (names.is_empty() || names.contains(&name.as_str()))
        }
        Attributes::NonResource { verb, path } => {
            has(&rule["verbs"], verb)
                && strs(&rule["nonResourceURLs"]).any(|u| {
                    u == "*" || u == path || u.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix))
                })
        }
    }
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "rules": rules,
    })
}

fn cluster_role_binding(name: &str, role: &str, subjects: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

fn group(name: &str) -> Value {
    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": name})
}

/// The part of the real API server's RBAC bootstrap policy that matters to
/// kubeadm-style bootstrapping. Rules are copied from upstream's
/// `plugin/pkg/auth/authorizer/rbac/bootstrappolicy`.
pub fn bootstrap_policy() -> Vec<Value> {
    let csr = "certificatesigningrequests";
    let health = json!(["/healthz", "/livez", "/readyz", "/version", "/version/"]);
    vec![
        cluster_role(
            "cluster-admin",
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
        ),
        cluster_role_binding("cluster-admin", "cluster-admin", json!([group(SUPERUSER_GROUP)])),
        cluster_role(
            "system:discovery",
            json!([{"nonResourceURLs": [
                "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*",
                "/readyz", "/version", "/version/"
            ], "verbs": ["get"]}]),
        ),
        cluster_role_binding("system:discovery", "system:discovery", json!([group("system:authenticated")])),
        cluster_role(
            "system:basic-user",
            json!([{"apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"]}]),
        ),
        cluster_role_binding("system:basic-user", "system:basic-user", json!([group("system:authenticated")])),
        cluster_role("system:public-info-viewer", json!([{"nonResourceURLs": health, "verbs": ["get"]}])),
        cluster_role_binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            json!([group("system:authenticated"), group("system:unauthenticated")]),
        ),
        cluster_role(
            "system:node-bootstrapper",
            json!([{"apiGroups": ["certificates.k8s.io"], "resources": [csr],
                    "verbs": ["create", "get", "list", "watch"]}]),
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            json!([{"apiGroups": ["certificates.k8s.io"], "resources": [format!("{csr}/nodeclient")],
                    "verbs": ["create"]}]),
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            json!([{"apiGroups": ["certificates.k8s.io"], "resources": [format!("{csr}/selfnodeclient")],
                    "verbs": ["create"]}]),
        ),
        cluster_role(
            "system:node-proxier",
            json!([
                {"apiGroups": [""], "resources": ["endpoints", "services"], "verbs": ["list", "watch"]},
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
                {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
            ]),
        ),
        cluster_role_binding(
            "system:node-proxier",
            "system:node-proxier",
            json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-proxy"}]),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Knobs;
    use std::time::Duration;

    fn store() -> Store {
        Store::new(Knobs { auto_approve: true, deny_csrs: false, legacy_approver: false, signer_delay: Duration::ZERO })
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo { name: name.into(), uid: String::new(), groups: groups.iter().map(|g| g.to_string()).collect() }
    }

    fn res(verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Attributes {
        Attributes::Resource {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        }
    }

    #[test]
    fn anonymous_needs_cluster_info_role() {
        let mut s = store();
        let anon = user("system:anonymous", &["system:unauthenticated"]);
        let get_ci = res("get", "", "configmaps", "", "kube-public", "cluster-info");
        assert!(!authorize(&s, &anon, &get_ci));
        assert!(authorize(&s, &anon, &Attributes::NonResource { verb: "get".into(), path: "/healthz".into() }));
        assert!(!authorize(&s, &anon, &Attributes::NonResource { verb: "get".into(), path: "/api".into() }));
        s.create(
            &ROLES,
            "kube-public",
            json!({"metadata": {"name": "r"}, "rules": [{"verbs": ["get"], "apiGroups": [""],
                   "resources": ["configmaps"], "resourceNames": ["cluster-info"]}]}),
        )
        .unwrap();
        assert!(!authorize(&s, &anon, &get_ci));
        s.create(
            &ROLEBINDINGS,
            "kube-public",
            json!({"metadata": {"name": "r"}, "roleRef": {"kind": "Role", "name": "r", "apiGroup": "rbac.authorization.k8s.io"},
                   "subjects": [{"kind": "User", "name": "system:anonymous"}]}),
        )
        .unwrap();
        assert!(authorize(&s, &anon, &get_ci));
        assert!(!authorize(&s, &anon, &res("get", "", "configmaps", "", "kube-public", "other")));
        assert!(!authorize(&s, &anon, &res("list", "", "configmaps", "", "kube-public", "")));
        assert!(!authorize(&s, &anon, &res("get", "", "configmaps", "", "kube-system", "cluster-info")));
    }

    #[test]
    fn subresources_and_superuser() {
        let mut s = store();
        let boot = user(
            "system:bootstrap:abcdef",
            &["system:bootstrappers", "system:bootstrappers:x", "system:authenticated"],
        );
        let nodeclient = res("create", "certificates.k8s.io", "certificatesigningrequests", "nodeclient", "", "");
        assert!(!authorize(&s, &boot, &nodeclient));
        s.create(
            &CLUSTERROLEBINDINGS,
            "",
            json!({"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole",
                   "name": "system:certificates.k8s.io:certificatesigningrequests:nodeclient"},
                   "subjects": [{"kind": "Group", "name": "system:bootstrappers:x"}]}),
        )
        .unwrap();
        assert!(authorize(&s, &boot, &nodeclient));
        assert!(!authorize(&s, &boot, &res("create", "certificates.k8s.io", "certificatesigningrequests", "", "", "")));
        let admin = user("admin", &["system:masters"]);
        assert!(authorize(&s, &admin, &res("delete", "", "secrets", "", "kube-system", "x")));
    }

    #[test]
    fn forbidden_wording() {
        let anon = user("system:anonymous", &[]);
        assert_eq!(
            forbidden_message(&anon, &res("get", "", "configmaps", "", "kube-public", "cluster-info")),
            "configmaps \"cluster-info\" is forbidden: User \"system:anonymous\" cannot get resource \"configmaps\" \
             in API group \"\" in the namespace \"kube-public\""
        );
    }
}
