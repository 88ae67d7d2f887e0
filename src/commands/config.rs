//! `kubestrap config print init-defaults|join-defaults`, `config migrate` and `config images
//! list`, as kubeadm's `config` commands.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};

use log::warn;

use crate::cli::{self, ConfigCommand, ConfigPrintWhat};
use crate::config::defaults::{self, join_documents, to_yaml};
use crate::config::{Documents, HostFacts, resolve_init};
use crate::error::{Context, Error, Result};

pub fn run(c: cli::Config) -> Result<()> {
    match c.command {
        ConfigCommand::Print(p) => {
            let (mut docs, components) = match p.what {
                ConfigPrintWhat::InitDefaults(d) => {
                    let (init, cluster) = defaults::init_defaults();
                    (vec![to_yaml(&init)?, to_yaml(&cluster)?], d.component_configs)
                }
                ConfigPrintWhat::JoinDefaults(d) => {
                    (vec![to_yaml(&defaults::join_defaults(&crate::host::hostname()))?], d.component_configs)
                }
            };
            docs.extend(component_configs(components.as_deref())?);
            write_stdout(&join_documents(&docs))
        }
        ConfigCommand::Migrate(m) => migrate(m),
        ConfigCommand::Images(i) => match i.command {
            cli::ConfigImagesCommand::List(l) => images_list(l),
        },
    }
}

/// kubeadm's `config images list`: with `--config`, the file's values (the flags are ignored,
/// as kubeadm ignores them); else the defaults with the flags applied.
fn images_list(l: cli::ConfigImagesList) -> Result<()> {
    let (init, mut cluster) = defaults::init_defaults();
    let docs = match &l.config {
        Some(path) => {
            let source = path.display().to_string();
            let text = std::fs::read_to_string(path)
                .map_err(|e| Error::bad_config(format!("reading config {source}: {e}")))?;
            crate::config::load::parse_documents(&source, &text)?
        }
        None => {
            if let Some(v) = &l.kubernetes_version {
                cluster.kubernetes_version = v.clone();
            }
            if let Some(r) = &l.image_repository {
                cluster.image_repository = r.clone();
            }
            Documents { init: Some(init), cluster: Some(cluster), ..Default::default() }
        }
    };
    // The images do not depend on this machine.
    let cfg = resolve_init("--config", docs, &static_host())?;
    let images = crate::images::required(&cfg);
    let text = match l.output.as_str() {
        "text" => images.iter().map(|i| format!("{i}\n")).collect(),
        "json" => {
            // Go's MarshalIndent with four spaces, in kubeadm's key order.
            let items: Vec<String> =
                images.iter().map(|i| format!("        {}", serde_json::Value::from(i.as_str()))).collect();
            format!(
                "{{\n    \"kind\": \"Images\",\n    \"apiVersion\": \"{IMAGES_API}\",\n    \"images\": [\n{}\n    ]\n}}\n",
                items.join(",\n")
            )
        }
        "yaml" => {
            let list: String = images.iter().map(|i| format!("- {i}\n")).collect();
            format!("apiVersion: {IMAGES_API}\nimages:\n{list}kind: Images\n")
        }
        other => return Err(Error::bad_flag(format!("--output {other:?}: kubestrap prints text, json or yaml"))),
    };
    write_stdout(&text)
}

/// kubeadm's output API group for `config images list -o json|yaml`.
const IMAGES_API: &str = "output.kubeadm.k8s.io/v1alpha3";

/// The defaulted KubeletConfiguration / KubeProxyConfiguration for the printed init defaults, as
/// kubeadm's `--component-configs`.
fn component_configs(list: Option<&str>) -> Result<Vec<String>> {
    const KINDS: &str = "[KubeletConfiguration KubeProxyConfiguration]";
    let kinds = cli::split_list(list);
    if kinds.is_empty() {
        return Ok(Vec::new());
    }
    let (init, cluster) = defaults::init_defaults();
    let docs = Documents { init: Some(init), cluster: Some(cluster), ..Default::default() };
    let cfg = resolve_init("defaults", docs, &static_host())?;
    kinds
        .iter()
        .map(|k| match k.as_str() {
            "KubeletConfiguration" => Ok(to_yaml(&crate::objects::kubelet::kubelet_configuration(&cfg))?),
            "KubeProxyConfiguration" => Ok(to_yaml(&crate::objects::proxy::kube_proxy_configuration(&cfg))?),
            other => Err(Error::bad_flag(format!("--component-configs {other:?}: needs to contain some of {KINDS}"))),
        })
        .collect()
}

fn migrate(m: cli::ConfigMigrate) -> Result<()> {
    let old = m.old_config.ok_or_else(|| Error::bad_flag("the --old-config flag is mandatory"))?;
    let source = old.display().to_string();
    let text =
        std::fs::read_to_string(&old).map_err(|e| Error::bad_config(format!("reading --old-config {source}: {e}")))?;
    let (out, warnings) = defaults::migrate(&source, &text)?;
    for w in warnings.iter().filter(|w| !w.contains("is deprecated")) {
        warn!("[config] WARNING: {w}");
    }
    match m.new_config {
        // 0600, not kubeadm's 0644: the documents may hold a bootstrap token.
        Some(new) => Ok(crate::fsutil::atomic_write(&new, out.as_bytes(), crate::paths::PRIVATE)?),
        None => write_stdout(&out),
    }
}

/// kubeadm's static host defaults: node "node" advertising 1.2.3.4.
fn static_host() -> HostFacts {
    HostFacts { hostname: "node".into(), default_address: Some(IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4))) }
}

fn write_stdout(text: &str) -> Result<()> {
    std::io::stdout().lock().write_all(text.as_bytes()).ctx("writing to stdout")
}
