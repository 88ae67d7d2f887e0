//! The CoreDNS addon (kubeadm's phases/addons/dns): ServiceAccount, ClusterRole and binding,
//! the `coredns` ConfigMap (Corefile), the Deployment and the `kube-dns` Service.

use serde_json::{Value, json};

use super::rbac::{cluster_role, cluster_role_binding};
use super::{KUBE_SYSTEM, config_map, service_account, service_account_subject};
use crate::config::InitConfig;
use crate::constants::{CONTROL_PLANE_LABEL, DEFAULT_IMAGE_REPOSITORY};

pub const NAME: &str = "coredns";
pub(crate) const SERVICE_NAME: &str = "kube-dns";
pub(crate) const CLUSTER_ROLE: &str = "system:coredns";
/// kubeadm v1.37.2's CoreDNSVersion, one tag whatever the Kubernetes minor.
pub(crate) const COREDNS_VERSION: &str = "v1.14.6";
/// kubeadm's coreDNSReplicas for a fresh cluster.
pub(crate) const REPLICAS: u32 = 2;
/// Label every CoreDNS object selects on (kept from the kube-dns days).
pub(crate) const APP_LABEL: &str = "kube-dns";

/// kubeadm's GetDNSImage: dns.imageRepository, else the cluster's imageRepository; the image
/// lives one level deeper (`coredns/coredns`) only in the default registry; dns.imageTag, else
/// the CoreDNS version kubeadm pins.
pub(crate) fn coredns_image(cfg: &InitConfig) -> String {
    let dns = &cfg.cluster.dns;
    let mut repo = if dns.image_repository.is_empty() {
        cfg.cluster.image_repository.clone()
    } else {
        dns.image_repository.clone()
    };
    if repo == DEFAULT_IMAGE_REPOSITORY {
        repo.push_str("/coredns");
    }
    let tag = if dns.image_tag.is_empty() { COREDNS_VERSION } else { dns.image_tag.as_str() };
    format!("{repo}/coredns:{tag}")
}

/// kubeadm's Corefile template, rendered for `dns_domain`: cluster names answered by the
/// kubernetes plugin, everything else forwarded to the node's resolv.conf, and cluster answers
/// kept out of the cache so they follow Service changes at once.
pub fn corefile(dns_domain: &str) -> String {
    format!(
        ".:53 {{
    errors
    health {{
       lameduck 5s
    }}
    ready
    kubernetes {dns_domain} in-addr.arpa ip6.arpa {{
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }}
    prometheus :9153
    forward . /etc/resolv.conf {{
       max_concurrent 1000
    }}
    cache 30 {{
       disable success {dns_domain}
       disable denial {dns_domain}
    }}
    loop
    reload
    loadbalance
}}
"
    )
}

pub(crate) fn coredns_config_map(cfg: &InitConfig) -> Value {
    config_map(NAME, KUBE_SYSTEM, &[("Corefile", &corefile(&cfg.cluster.networking.dns_domain))])
}

pub(crate) fn coredns_cluster_role() -> Value {
    cluster_role(
        CLUSTER_ROLE,
        json!([
            {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"], "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
        ]),
    )
}

/// The Deployment, as kubeadm's CoreDNSDeployment template.
pub(crate) fn coredns_deployment(cfg: &InitConfig) -> Value {
    let labels = json!({"k8s-app": APP_LABEL});
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"labels": labels, "name": NAME, "namespace": KUBE_SYSTEM},
        "spec": {
            "replicas": REPLICAS,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "priorityClassName": "system-cluster-critical",
                    "serviceAccountName": NAME,
                    // Spread replicas over nodes when there are several.
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchExpressions": [
                                {"key": "k8s-app", "operator": "In", "values": [APP_LABEL]},
                            ]},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }]}},
                    "tolerations": [
                        {"key": "CriticalAddonsOnly", "operator": "Exists"},
                        {"key": CONTROL_PLANE_LABEL, "effect": "NoSchedule"},
                    ],
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "containers": [{
                        "name": NAME,
                        "image": coredns_image(cfg),
                        "imagePullPolicy": "IfNotPresent",
                        "resources": {
                            "limits": {"memory": "170Mi"},
                            "requests": {"cpu": "100m", "memory": "70Mi"},
                        },
                        "args": ["-conf", "/etc/coredns/Corefile"],
                        "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/coredns", "readOnly": true}],
                        "ports": [
                            {"containerPort": 53, "name": "dns", "protocol": "UDP"},
                            {"containerPort": 53, "name": "dns-tcp", "protocol": "TCP"},
                            {"containerPort": 9153, "name": "metrics", "protocol": "TCP"},
                            {"containerPort": 8080, "name": "liveness-probe", "protocol": "TCP"},
                            {"containerPort": 8181, "name": "readiness-probe", "protocol": "TCP"},
                        ],
                        "livenessProbe": {
                            "httpGet": {"path": "/health", "port": "liveness-probe", "scheme": "HTTP"},
                            "initialDelaySeconds": 60,
                            "timeoutSeconds": 5,
                            "successThreshold": 1,
                            "failureThreshold": 5,
                        },
                        "readinessProbe": {
                            "httpGet": {"path": "/ready", "port": "readiness-probe", "scheme": "HTTP"},
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
                            "readOnlyRootFilesystem": true,
                        },
                    }],
                    // CoreDNS itself must resolve upstream names through the node, not itself.
                    "dnsPolicy": "Default",
                    "volumes": [{
                        "name": "config-volume",
                        "configMap": {"name": NAME, "items": [{"key": "Corefile", "path": "Corefile"}]},
                    }],
                },
            },
        },
    })
}

/// The `kube-dns` Service at the cluster DNS IP (10th address of the service subnet).
/// resourceVersion "0" is in kubeadm's template so that its create-or-update path can update
/// the Service unconditionally; on create it is ignored.
pub fn kube_dns_service(cfg: &InitConfig) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "labels": {"k8s-app": APP_LABEL, "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"},
            "name": SERVICE_NAME,
            "namespace": KUBE_SYSTEM,
            "annotations": {"prometheus.io/port": "9153", "prometheus.io/scrape": "true"},
            "resourceVersion": "0",
        },
        "spec": {
            "clusterIP": cfg.dns_ip.to_string(),
            "ports": [
                {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
                {"name": "metrics", "port": 9153, "protocol": "TCP", "targetPort": 9153},
            ],
            "selector": {"k8s-app": APP_LABEL},
        },
    })
}

/// Every CoreDNS object, dependencies first: ServiceAccount, ClusterRole, ClusterRoleBinding,
/// ConfigMap, Deployment, Service (kubeadm creates the ConfigMap and RBAC before the
/// ServiceAccount; the end state is the same). Empty when `dns.disabled`.
pub fn coredns_objects(cfg: &InitConfig) -> Vec<Value> {
    if cfg.cluster.dns.disabled {
        return Vec::new();
    }
    vec![
        service_account(NAME, KUBE_SYSTEM),
        coredns_cluster_role(),
        cluster_role_binding(CLUSTER_ROLE, CLUSTER_ROLE, vec![service_account_subject(NAME, KUBE_SYSTEM)]),
        coredns_config_map(cfg),
        coredns_deployment(cfg),
        kube_dns_service(cfg),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::test_support::cfg;

    #[test]
    fn objects_and_order() {
        let objs = coredns_objects(&cfg(""));
        let names: Vec<String> = objs
            .iter()
            .map(|o| format!("{}/{}", o["kind"].as_str().unwrap(), o["metadata"]["name"].as_str().unwrap()))
            .collect();
        assert_eq!(
            names,
            vec![
                "ServiceAccount/coredns",
                "ClusterRole/system:coredns",
                "ClusterRoleBinding/system:coredns",
                "ConfigMap/coredns",
                "Deployment/coredns",
                "Service/kube-dns",
            ]
        );
        assert_eq!(
            objs[2]["subjects"],
            json!([{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}])
        );
        assert_eq!(objs[1]["rules"][1]["resources"], json!(["endpointslices"]));
        assert_eq!(objs[1]["rules"][1]["apiGroups"], json!(["discovery.k8s.io"]));
        assert!(coredns_objects(&cfg("dns:\n  disabled: true\n")).is_empty());
    }

    #[test]
    fn image_rules() {
        assert_eq!(coredns_image(&cfg("")), "registry.k8s.io/coredns/coredns:v1.14.6");
        assert_eq!(
            coredns_image(&cfg("imageRepository: my.registry.example/k8s\n")),
            "my.registry.example/k8s/coredns:v1.14.6"
        );
        assert_eq!(
            coredns_image(&cfg(
                "imageRepository: my.registry.example/k8s\ndns:\n  imageRepository: registry.k8s.io\n  imageTag: v1.12.0\n"
            )),
            "registry.k8s.io/coredns/coredns:v1.12.0"
        );
        assert_eq!(coredns_image(&cfg("dns:\n  imageRepository: dns.example\n")), "dns.example/coredns:v1.14.6");
    }

    #[test]
    fn corefile_uses_the_dns_domain() {
        let c = cfg("networking:\n  dnsDomain: corp.internal\n");
        let cm = coredns_config_map(&c);
        let f = cm["data"]["Corefile"].as_str().unwrap();
        assert!(f.contains("    kubernetes corp.internal in-addr.arpa ip6.arpa {\n"), "{f}");
        assert!(f.contains("       disable success corp.internal\n       disable denial corp.internal\n"), "{f}");
        assert!(!f.contains("cluster.local"));
        assert!(f.starts_with(".:53 {\n    errors\n") && f.ends_with("    loadbalance\n}\n"), "{f}");
        // Braces balance.
        assert_eq!(f.matches('{').count(), f.matches('}').count());
    }

    #[test]
    fn deployment_and_service() {
        let c = cfg("networking:\n  serviceSubnet: 10.100.0.0/16\n");
        let d = coredns_deployment(&c);
        assert_eq!(d["spec"]["replicas"], 2);
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(pod["priorityClassName"], "system-cluster-critical");
        assert_eq!(
            pod["tolerations"][1],
            json!({"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"})
        );
        let ports: Vec<(i64, &str)> = pod["containers"][0]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["containerPort"].as_i64().unwrap(), p["protocol"].as_str().unwrap()))
            .collect();
        assert_eq!(&ports[..3], &[(53, "UDP"), (53, "TCP"), (9153, "TCP")]);
        assert_eq!(pod["containers"][0]["args"], json!(["-conf", "/etc/coredns/Corefile"]));
        assert_eq!(d["spec"]["selector"]["matchLabels"], d["spec"]["template"]["metadata"]["labels"]);

        let s = kube_dns_service(&c);
        assert_eq!(s["spec"]["clusterIP"], "10.100.0.10");
        assert_eq!(s["metadata"]["labels"]["kubernetes.io/name"], "CoreDNS");
        assert_eq!(s["metadata"]["annotations"]["prometheus.io/scrape"], "true");
        let names: Vec<&str> =
            s["spec"]["ports"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(names, vec!["dns", "dns-tcp", "metrics"]);
        assert_eq!(s["spec"]["selector"], d["spec"]["template"]["metadata"]["labels"]);
    }
}
