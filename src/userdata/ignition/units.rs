//! `systemd.units` of every layer, merged by name (Cluster API appends additionalConfig, so a
//! unit can come twice: once with contents, once with drop-ins only). Cluster API's
//! `kubeadm.service` is its bootstrap, which kubestrap performs itself; mount units and ntpd are
//! not kubestrap's to manage; every other unit and drop-in is written under
//! `/etc/systemd/system` and, when enabled, started without waiting, as Ignition's enable would
//! have it running by now.

use serde_json::Value;

use super::references::Layer;
use crate::config::ConfigError;
use crate::userdata::{Action, Command, Notices, WriteFile};

/// Where Ignition writes units.
const UNIT_DIR: &str = "/etc/systemd/system";
/// Cluster API's bootstrap unit: runs /etc/kubeadm.sh, which kubestrap performs instead.
pub(super) const KUBEADM_UNIT: &str = "kubeadm.service";

/// One unit after merging every entry of that name.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Unit {
    pub name: String,
    /// The first entry's path, for notices.
    pub at: String,
    pub contents: Option<String>,
    pub enabled: Option<bool>,
    pub mask: bool,
    /// (name, contents), a later drop-in of the same name replacing the earlier.
    pub dropins: Vec<(String, String)>,
}

/// The merged units, in first-seen order.
pub(super) fn merged(src: &str, layers: &[Layer]) -> Result<Vec<Unit>, ConfigError> {
    let mut out: Vec<Unit> = Vec::new();
    for layer in layers {
        let Some(list) = layer.config.get("systemd").and_then(|s| s.get("units")) else { continue };
        let Value::Array(list) = list else {
            return Err(ConfigError::doc(src, "Ignition", &layer.path("systemd.units"), "must be a list".into()));
        };
        for (i, item) in list.iter().enumerate() {
            let at = layer.path(&format!("systemd.units[{i}]"));
            let err = |f: &str, m: String| ConfigError::doc(src, "Ignition", &format!("{at}.{f}"), m);
            let name = item.get("name").and_then(Value::as_str).ok_or_else(|| err("name", "is missing".into()))?;
            if !plain_name(name) {
                return Err(err("name", format!("{name:?} is not a unit file name")));
            }
            let at_unit = out.iter().position(|u| u.name == name);
            let unit = match at_unit {
                Some(u) => &mut out[u],
                None => {
                    out.push(Unit { name: name.into(), at: at.clone(), ..Default::default() });
                    let last = out.len() - 1;
                    &mut out[last]
                }
            };
            if let Some(c) = item.get("contents").and_then(Value::as_str) {
                unit.contents = Some(c.to_string());
            }
            // 2.x also spelled it `enable`.
            if let Some(e) = item.get("enabled").or_else(|| item.get("enable")).and_then(Value::as_bool) {
                unit.enabled = Some(e);
            }
            unit.mask |= item.get("mask").and_then(Value::as_bool).unwrap_or(false);
            for (j, d) in item.get("dropins").and_then(Value::as_array).into_iter().flatten().enumerate() {
                let dn = d.get("name").and_then(Value::as_str).unwrap_or_default();
                if !plain_name(dn) {
                    return Err(err(&format!("dropins[{j}].name"), format!("{dn:?} is not a drop-in file name")));
                }
                let dc = d.get("contents").and_then(Value::as_str).unwrap_or_default().to_string();
                unit.dropins.retain(|(n, _)| n != dn);
                unit.dropins.push((dn.to_string(), dc));
            }
        }
    }
    Ok(out)
}

fn plain_name(n: &str) -> bool {
    !n.is_empty() && !n.contains('/') && n != "." && n != ".."
}

/// What the units come to: files to write and commands to run first.
#[derive(Debug, Default)]
pub(super) struct Installed {
    pub files: Vec<WriteFile>,
    pub commands: Vec<Command>,
}

/// Writes (and enables) the units kubestrap keeps; notices for the rest.
pub(super) fn install(src: &str, units: &[Unit], notices: &mut Notices) -> Installed {
    let mut out = Installed::default();
    let mut enable = Vec::new();
    for u in units {
        let skip = if u.name == KUBEADM_UNIT {
            Some("Cluster API's bootstrap unit: kubestrap performs /etc/kubeadm.sh itself")
        } else if u.name.ends_with(".mount") {
            Some("kubestrap does not mount filesystems")
        } else if u.name == "ntpd.service" {
            Some("kubestrap does not manage time synchronisation")
        } else {
            None
        };
        if let Some(why) = skip {
            notices.push(format!("{src}: {}: unit {} ignored: {why}", u.at, u.name));
            continue;
        }
        let file = |path: String, text: &str| WriteFile {
            path,
            content: text.as_bytes().to_vec(),
            mode: 0o644,
            owner: "root:root".into(),
            append: false,
        };
        if let Some(c) = &u.contents {
            out.files.push(file(format!("{UNIT_DIR}/{}", u.name), c));
        }
        for (n, c) in &u.dropins {
            out.files.push(file(format!("{UNIT_DIR}/{}.d/{n}", u.name), c));
        }
        if u.mask {
            notices.push(format!("{src}: {}: mask of {} ignored: kubestrap does not mask units", u.at, u.name));
        }
        if u.enabled == Some(true) && !u.mask {
            enable.push(u.name.clone());
        }
        notices.push(format!("{src}: {}: unit {} written under {UNIT_DIR}", u.at, u.name));
    }
    if !out.files.is_empty() {
        let run = |line: String| Command { origin: "systemd.units".into(), action: Action::Shell(line) };
        out.commands.push(run("systemctl daemon-reload".into()));
        // --no-block: a unit ordered after kubestrap's own must not wait on it.
        if !enable.is_empty() {
            out.commands.push(run(format!("systemctl enable --now --no-block {}", enable.join(" "))));
        }
    }
    out
}
