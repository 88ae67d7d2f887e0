//! Ignition configs as user-data (Cluster API's `format: ignition`, spec 2.3.0; Butane's 3.x):
//! translated into what the cloud-init path produces, the files to write and the [`Script`]
//! around the one kubeadm step, whose documents come from `/etc/kubeadm.yml` through the same
//! `kubeadm_cmd` reader. `/etc/kubeadm.sh` is taken apart by its fixed shape (`kubeadm_sh`),
//! config references are read from `data:` URLs only (`references`, `resource`), units are
//! merged by name (`units`), and the Afterburn envsubst idiom is done natively (`envsubst`).

mod detect;
mod envsubst;
mod files;
mod kubeadm_sh;
mod references;
mod resource;
#[cfg(test)]
mod tests;
mod units;

use serde_json::Value;

use self::files::Entry;
use self::references::Layer;
use super::script::{Action, Command, Script};
use super::{Format, Notices, Parsed, Shape, WriteFile, decode, kubeadm_cmd};
use crate::config::ConfigError;
use crate::datasource::vars::Vars;

pub(super) use self::detect::detect;

/// Names Ignition errors.
pub(super) const DOC: &str = Format::Ignition.document();
const KUBEADM_SH: &str = "/etc/kubeadm.sh";
const KUBEADM_YML: &str = "/etc/kubeadm.yml";

/// The kubeadm documents, role and script of an Ignition config.
pub(super) fn read(
    src: &str,
    config: Value,
    vars: &Vars,
    from_credential: bool,
    notices: &mut Notices,
) -> Result<Parsed, ConfigError> {
    let layers = references::layers(src, config)?;
    let users = ignored_sections(src, &layers, notices);
    let mut entries = files::files(src, &layers, &users, notices)?;
    let units = units::merged(src, &layers)?;
    let (sh_at, sh) = whole_file(&entries, KUBEADM_SH).ok_or_else(|| {
        ConfigError::file(
            src,
            "is an Ignition config without Cluster API's /etc/kubeadm.sh in storage.files; kubestrap bootstraps from \
             Ignition only when it runs kubeadm the way Cluster API's `format: ignition` does"
                .into(),
        )
    })?;
    entries.retain(|e| e.file.path != KUBEADM_SH);
    let parts =
        kubeadm_sh::split(&sh).map_err(|m| ConfigError::doc(src, DOC, &format!("{sh_at} ({KUBEADM_SH})"), m))?;
    let env = |n: &str| vars.env(n).map_err(|e| e.to_string());
    let mut pre = parts.pre.clone();
    if let Some((kept, assigned)) = envsubst::take_idiom(&pre, &env) {
        pre = kept;
        substitute(src, &mut entries, &|n| envsubst::lookup(&assigned, &env, n))?;
        notices.push(format!(
            "{src}: {KUBEADM_SH}: the envsubst of {KUBEADM_YML} is done by kubestrap before it reads the kubeadm config"
        ));
    }
    // Afterburn's /run/metadata files come from boot itself, for every user-data format.
    let mut written: Vec<WriteFile> = entries.into_iter().map(|e| e.file).collect();
    if !from_credential
        && written.iter().any(|f| decode::private_key_line(&String::from_utf8_lossy(&f.content)).is_some())
    {
        notices.push(format!(
            "{src}: carries private keys in storage.files (as Cluster API's user-data does); anything that can read \
             the user-data can read them"
        ));
    }
    let origin = format!("{KUBEADM_SH}:{}", parts.line);
    let (role, docs) = kubeadm_cmd::documents(src, Format::Ignition, &origin, &parts.argv, &written, notices)?;
    let installed = units::install(src, &units, notices);
    written.extend(installed.files);
    let shell = |origin: &str, block: &str, env: &[(String, String)]| Command {
        origin: origin.into(),
        action: Action::Shell(kubeadm_sh::bash_block(env, block)),
    };
    let mut script = Script { files: written, before: installed.commands, ..Default::default() };
    if !pre.trim().is_empty() {
        // The Afterburn variables, so the user's own envsubst and scripts still see them.
        script.before.push(shell("preKubeadmCommands", &pre, &vars.afterburn()));
    }
    let shown = crate::token::replace_tokens(&parts.argv.join(" "), "<token hidden>");
    script.kubeadm = format!("{origin}: {shown}");
    let at = |action| Command { origin: KUBEADM_SH.into(), action };
    script.after.push(at(Action::Mkdir(vec![kubeadm_sh::SENTINEL_DIR.into()])));
    script.after.push(at(Action::Echo {
        path: kubeadm_sh::SENTINEL_FILE.into(),
        text: "success\n".into(),
        append: false,
    }));
    if parts.moves_config {
        script.after.push(at(Action::Shell(kubeadm_sh::MOVE_LINE.into())));
    }
    if !parts.post.trim().is_empty() {
        // kubeadm.service gave both blocks the Afterburn environment, and one shell ran them.
        let post = format!("{}{}", envsubst::carried_assignments(&parts.pre), parts.post);
        script.after.push(shell("postKubeadmCommands", &post, &vars.afterburn()));
    }
    Ok(Parsed { docs, shape: Shape::Kubeadm { role, script } })
}

/// A file's final contents (the last replacement plus the appends after it) and where that
/// replacement was given.
fn whole_file(entries: &[Entry], path: &str) -> Option<(String, String)> {
    let mut out: Option<(String, Vec<u8>)> = None;
    for e in entries.iter().filter(|e| e.file.path == path) {
        match (&mut out, e.file.append) {
            (Some((_, c)), true) => c.extend_from_slice(&e.file.content),
            _ => out = Some((e.at.clone(), e.file.content.clone())),
        }
    }
    out.map(|(at, c)| (at, String::from_utf8_lossy(&c).into_owned()))
}

/// envsubst over every entry that writes /etc/kubeadm.yml.
fn substitute(
    src: &str,
    entries: &mut [Entry],
    value: &dyn Fn(&str) -> Result<String, String>,
) -> Result<(), ConfigError> {
    for e in entries.iter_mut().filter(|e| e.file.path == KUBEADM_YML) {
        let text = String::from_utf8(std::mem::take(&mut e.file.content))
            .map_err(|_| ConfigError::doc(src, DOC, &e.at, format!("{KUBEADM_YML} is not UTF-8 text")))?;
        let done = envsubst::substitute(&text, value).map_err(|(name, why)| {
            ConfigError::doc(
                src,
                DOC,
                &e.at,
                format!(
                    "{KUBEADM_YML} uses ${{{name}}}, which the pre-commands' envsubst would fill in, but {why}; \
                     write the value into the kubeadm config or use a variable the datasource supplies"
                ),
            )
        })?;
        e.file.content = done.into_bytes();
    }
    Ok(())
}

/// Notices for what kubestrap does not do (users, disks, filesystems, networkd); the names of
/// the ignored users, whose sudoers files are then not written either.
fn ignored_sections(src: &str, layers: &[Layer], notices: &mut Notices) -> Vec<String> {
    let mut users = Vec::new();
    for layer in layers {
        let Value::Object(top) = &layer.config else { continue };
        for (key, v) in top {
            let what = match key.as_str() {
                "ignition" | "systemd" => continue,
                "storage" => {
                    for (k, _) in v.as_object().into_iter().flatten().filter(|(k, _)| *k != "files") {
                        notices.push(format!(
                            "{src}: {}: ignored: kubestrap writes files only (no disks, filesystems, links or directories)",
                            layer.path(&format!("storage.{k}"))
                        ));
                    }
                    continue;
                }
                "passwd" => {
                    let list = v.get("users").and_then(Value::as_array).into_iter().flatten();
                    users.extend(list.filter_map(|u| u.get("name").and_then(Value::as_str)).map(str::to_string));
                    "kubestrap does not create users or groups (as with cloud-config users)"
                }
                _ => "kubestrap does not apply it",
            };
            notices.push(format!("{src}: {}: ignored: {what}", layer.path(key)));
        }
    }
    users
}
