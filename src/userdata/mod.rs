//! User-data → what this node does: `init` with typed kubeadm documents, or `join` with a
//! JoinConfiguration. The schema is in docs/user-data.md.
//!
//! Formats: kubeadm v1beta4 documents unchanged; `#cloud-config` with a `kubestrap:` mapping (the
//! shorthand, optionally with embedded kubeadm documents under `kubeadm:`); `#cloud-config` that
//! runs `kubeadm init|join` from runcmd (Cluster API's bootstrap data, hand-written user-data),
//! whose write_files and commands kubestrap performs around its own init or join; any of them
//! gzip-compressed, and cloud-config may be a `## template: jinja` (Cluster API's header); an
//! Ignition config (Cluster API's `format: ignition`) is read into the same files and script.
//! The `kubestrap.*` credentials override the same fields, and meta-data's local-hostname names
//! the node unless the user-data does. Token values never appear in errors or notices.
//!
//! One file per step, in the order [`plan_detailed`] runs them: `decode` (bytes → text, format,
//! private keys), `jinja` (the template variables), `cloud_config` (the shorthand) or `cloud_init`
//! (write_files, runcmd and the kubeadm line in it: `write_files`, `runcmd`, `kubeadm_cmd`,
//! `script`) or `ignition` (an Ignition config into the same files, script and kubeadm line),
//! `overrides` (credentials, node name, shorthand-vs-document merging), then
//! `init_plan` or `join_plan`. Every format returns a [`Parsed`] (the documents and their
//! [`Shape`]), and every step hands its notices to one [`Notices`]. This file picks the
//! user-data, decides the role and owns the [`NodePlan`] value.

mod cloud_config;
mod cloud_init;
mod control_plane;
mod decode;
mod ignition;
mod init_plan;
mod jinja;
mod join_plan;
mod kubeadm_cmd;
mod overrides;
mod runcmd;
mod script;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod vars_tests;
mod write_files;

use serde::{Deserialize, Serialize};

use self::cloud_config::Shorthand;
use self::overrides::Overrides;
use crate::config::types::JoinConfiguration;
use crate::config::{ConfigError, Documents};
use crate::datasource::{CRED_USER_DATA, Gathered};

pub use self::decode::MAX_USER_DATA_BYTES;
pub use self::script::{Action, Command, Script};
pub use self::write_files::WriteFile;

/// What the node will do. The boot command keeps it between its two stages as YAML (see
/// [`NodePlan::to_yaml`]), so it is plain typed data rather than anything resolved against the host.
// Built once per boot and moved, never stored in bulk: the size difference does not matter, and
// a plain field keeps matching simple.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum NodePlan {
    /// Control plane: the kubeadm documents for [`crate::config::resolve_init`], which runs on
    /// the node (it needs the host's address and hostname), once per stage.
    Init {
        docs: Documents,
        /// `--upload-certs`: seal the shared certificates into kubeadm-certs for the other
        /// control planes.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        upload_certs: bool,
        /// How to join instead when a cluster already answers at the controlPlaneEndpoint at
        /// first boot (the user-data gave the token, pins and certificate key); without it such
        /// a node stops rather than make a second cluster.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        join_existing: Option<Box<JoinConfiguration>>,
    },
    /// A worker, or a control plane when `join.controlPlane` is set.
    Join { join: JoinConfiguration },
}

impl NodePlan {
    /// The plan file's text. YAML, with the variant as a tag (`!Init` / `!Join`), so an operator
    /// can read it and the token scrub after bootstrap can work on the text: a token is a plain
    /// `<id>.<secret>` scalar there.
    pub fn to_yaml(&self) -> Result<String, serde_yaml::Error> {
        serde_yaml::to_string(self)
    }

    /// Reads what [`NodePlan::to_yaml`] wrote.
    pub fn from_yaml(bytes: &[u8]) -> Result<NodePlan, serde_yaml::Error> {
        crate::config::from_yaml_slice(bytes)
    }

    /// A join (worker or control plane).
    pub fn is_join(&self) -> bool {
        matches!(self, NodePlan::Join { .. })
    }

    /// A worker's plan: its only stage is pre-kubelet.
    pub fn is_worker(&self) -> bool {
        matches!(self, NodePlan::Join { join } if join.control_plane.is_none())
    }
}

/// The boot plan file: what the node does and, for cloud-config that runs kubeadm, the script
/// around it (only the part the post-kubelet stage runs is kept).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BootPlan {
    pub node: NodePlan,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<Script>,
}

impl BootPlan {
    /// YAML, so an operator can read it and the token scrub after bootstrap can work on the
    /// text: a token is a plain `<id>.<secret>` scalar there.
    pub fn to_yaml(&self) -> Result<String, serde_yaml::Error> {
        serde_yaml::to_string(self)
    }

    /// Reads what [`BootPlan::to_yaml`] wrote.
    pub fn from_yaml(bytes: &[u8]) -> Result<BootPlan, serde_yaml::Error> {
        crate::config::from_yaml_slice(bytes)
    }
}

/// A plan and the notices (ignored keys, overridden values) the operator should see.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub plan: NodePlan,
    /// For cloud-config that runs kubeadm: files and commands around kubestrap's init or join.
    pub script: Option<Script>,
    pub notices: Notices,
}

/// What the operator should see about the user-data (ignored keys, overridden values), in the
/// order raised. Every step, format or plan, takes it as `&mut Notices`; none returns notices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Notices(Vec<String>);

impl Notices {
    fn push(&mut self, notice: String) {
        self.0.push(notice);
    }

    /// Moves `other`'s notices to the end of these.
    fn append(&mut self, other: &mut Notices) {
        self.0.append(&mut other.0);
    }

    fn extend(&mut self, notices: impl IntoIterator<Item = String>) {
        self.0.extend(notices);
    }
}

impl std::ops::Deref for Notices {
    type Target = [String];
    fn deref(&self) -> &[String] {
        &self.0
    }
}

impl<'a> IntoIterator for &'a Notices {
    type Item = &'a String;
    type IntoIter = std::slice::Iter<'a, String>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// The formats that can carry a `kubeadm init|join` line; each names its files its own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// `#cloud-config` whose runcmd runs kubeadm.
    CloudInit,
    /// An Ignition config with Cluster API's /etc/kubeadm.sh.
    Ignition,
}

impl Format {
    /// Names the format in errors.
    const fn document(self) -> &'static str {
        match self {
            Format::CloudInit => "#cloud-config",
            Format::Ignition => "Ignition",
        }
    }

    /// Where the format lists the files it writes.
    const fn files_key(self) -> &'static str {
        match self {
            Format::CloudInit => "write_files",
            Format::Ignition => "storage.files",
        }
    }
}

/// What every user-data format (kubeadm documents, cloud-config shorthand, a Jinja template,
/// cloud-init's runcmd, Ignition) makes of its text: the kubeadm documents and what else decides
/// the node's role.
struct Parsed {
    docs: Documents,
    shape: Shape,
}

/// What else a format gave besides the documents, which decides how the role is found.
// Built once per boot and moved; boxing would only add noise.
#[allow(clippy::large_enum_variant)]
enum Shape {
    /// Plain kubeadm documents: their kinds give the role.
    Documents,
    /// The `kubestrap:` mapping (with its embedded documents): `kubestrap.role` or the kinds.
    Shorthand(Shorthand),
    /// A `kubeadm init|join` line (cloud-init's runcmd, Ignition's /etc/kubeadm.sh): its role and
    /// the script around it.
    Kubeadm { role: Role, script: Script },
}

/// Plans the node from what the datasource gathered; notices are logged as warnings.
pub fn plan(g: &Gathered) -> Result<NodePlan, ConfigError> {
    let p = plan_detailed(g)?;
    for n in &p.notices {
        log::warn!("{n}");
    }
    Ok(p.plan)
}

/// What the plan reads about this machine: the parts of [`Gathered`] that name the node.
#[derive(Clone, Copy)]
struct Machine<'a> {
    /// The datasource, naming meta-data in errors.
    source: &'a str,
    /// meta-data's local-hostname: the node name unless the user-data gives one.
    local_hostname: Option<&'a str>,
    /// The hostname as gathered: the node name when nothing else gives one.
    hostname: &'a str,
}

impl<'a> Machine<'a> {
    fn of(g: &'a Gathered) -> Machine<'a> {
        Machine { source: &g.source, local_hostname: g.meta.local_hostname.as_deref(), hostname: &g.hostname }
    }
}

/// What every plan step reads; copied into the helpers.
#[derive(Clone, Copy)]
struct PlanInput<'a> {
    /// Names the user-data in errors.
    src: &'a str,
    sh: &'a Shorthand,
    ov: &'a Overrides,
    machine: Machine<'a>,
    /// The user-data was `#cloud-config` shorthand, so errors name shorthand keys.
    shorthand: bool,
    /// A kubeadm line's `--upload-certs`.
    upload_certs: bool,
}

/// A plan function's one argument: what it reads and the documents it builds on (which it
/// consumes).
struct PlanRequest<'a> {
    input: PlanInput<'a>,
    docs: Documents,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A control plane: init, or with `initNode` (or a live cluster at the endpoint) join one.
    /// `upload_certs`: a kubeadm line's `--upload-certs`.
    ControlPlane { upload_certs: bool },
    /// A JoinConfiguration (worker, or control plane when it has `controlPlane`).
    Join,
}

/// [`plan`], returning the notices instead of logging them.
pub fn plan_detailed(g: &Gathered) -> Result<Planned, ConfigError> {
    let mut notices = Notices::default();
    let (raw, src, from_credential) = match g.credentials.get(CRED_USER_DATA) {
        Some(c) => {
            if g.user_data.is_some() && g.source != "credentials" {
                notices.push(format!("credential {CRED_USER_DATA} replaces the user-data from {}", g.source));
            }
            (c.as_slice(), format!("credential {CRED_USER_DATA}"), true)
        }
        None => match &g.user_data {
            Some(u) => (u.as_slice(), format!("user-data ({})", g.source), false),
            None => {
                return Err(ConfigError::file(
                    &format!("user-data ({})", g.source),
                    "is missing: pass kubeadm config documents or #cloud-config with a kubestrap: key (see docs/user-data.md)"
                        .into(),
                ));
            }
        },
    };
    let text = decode::to_text(&src, raw)?;
    let Parsed { mut docs, shape } = if jinja::is_template(&text) {
        jinja::read(&src, &text, &crate::datasource::vars::Vars::new(g), from_credential, &mut notices)?
    } else if decode::is_cloud_config(&text) {
        cloud_config::read(&src, &text, from_credential, &mut notices)?
    } else if let Some(config) = ignition::detect(&src, &text)? {
        ignition::read(&src, config, &crate::datasource::vars::Vars::new(g), from_credential, &mut notices)?
    } else {
        decode::read(&src, &text, from_credential)?
    };
    // Reported once, here; the plan does not carry them on.
    notices.extend(std::mem::take(&mut docs.warnings));

    // Errors name kubeadm's paths unless the user wrote the shorthand.
    let shorthand = matches!(shape, Shape::Shorthand(_));
    let (role, sh, script) = match shape {
        Shape::Kubeadm { role, script } => (role, None, Some(script)),
        Shape::Shorthand(sh) => (role(&src, &docs, Some(&sh))?, Some(sh), None),
        Shape::Documents => (role(&src, &docs, None)?, None, None),
    };
    let sh = sh.unwrap_or_default();
    let token = Overrides::read(&src, g, &sh, &mut notices)?;
    let upload_certs = matches!(role, Role::ControlPlane { upload_certs: true });
    let input = PlanInput { src: &src, sh: &sh, ov: &token, machine: Machine::of(g), shorthand, upload_certs };
    let request = PlanRequest { input, docs };
    let plan = match role {
        Role::ControlPlane { .. } => control_plane::plan(request, &mut notices)?,
        Role::Join => join_plan::join_plan(request, &mut notices)?,
    };
    Ok(Planned { plan, script, notices })
}

/// The role: `kubestrap.role` when given, else the kind of kubeadm document; the two must agree.
fn role(src: &str, docs: &Documents, sh: Option<&Shorthand>) -> Result<Role, ConfigError> {
    let has_init = docs.init.is_some() || docs.cluster.is_some();
    let has_join = docs.join.is_some();
    // With initNode one user-data serves the init node and the joining ones; a control-plane
    // JoinConfiguration next to the init documents says how to join a cluster found running.
    let cp_join = docs.join.as_ref().is_some_and(|j| j.control_plane.is_some());
    let init_node = sh.is_some_and(|s| s.init_node.is_some() || (cp_join && has_init));
    if has_init && has_join && !init_node {
        return Err(ConfigError::file(
            src,
            "holds both InitConfiguration/ClusterConfiguration and JoinConfiguration; a node either inits (control plane) or joins (worker): keep one".into(),
        ));
    }
    let role = match sh.and_then(|s| s.role.as_deref()) {
        Some("control-plane") => Role::ControlPlane { upload_certs: false },
        Some("worker") => Role::Join,
        Some(other) => {
            return Err(ConfigError::doc(
                src,
                "kubestrap",
                "role",
                format!("{other:?} must be control-plane or worker"),
            ));
        }
        None if has_init || init_node => Role::ControlPlane { upload_certs: false },
        None if has_join => Role::Join,
        None if sh.is_some() => {
            return Err(ConfigError::doc(
                src,
                "kubestrap",
                "role",
                "is missing: set control-plane or worker (or embed kubeadm documents under kubeadm:)".into(),
            ));
        }
        None => {
            return Err(ConfigError::file(
                src,
                "has no InitConfiguration, ClusterConfiguration or JoinConfiguration document, so the node's role is unknown".into(),
            ));
        }
    };
    if role == Role::Join && (has_init || init_node) {
        return Err(ConfigError::doc(
            src,
            "kubestrap",
            "role",
            "is worker but kubestrap.kubeadm holds an InitConfiguration/ClusterConfiguration (or initNode is set)"
                .into(),
        ));
    }
    if role != Role::Join && has_join && !init_node {
        return Err(ConfigError::doc(
            src,
            "kubestrap",
            "role",
            "is control-plane but kubestrap.kubeadm holds a JoinConfiguration; set kubestrap.initNode when one \
             user-data serves the init node and the joining ones"
                .into(),
        ));
    }
    Ok(role)
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;
    use crate::config::resolve_init;

    #[test]
    fn userdata_role_and_format_errors() {
        let both = format!("{KUBEADM_INIT}---\n{}", kubeadm_join());
        assert!(plan_detailed(&gathered(&both)).unwrap_err().to_string().contains("either inits"));
        let only_kubelet = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
        assert!(plan_detailed(&gathered(only_kubelet)).unwrap_err().to_string().contains("role is unknown"));
        let mut g = gathered("");
        g.user_data = None;
        assert!(plan_detailed(&g).unwrap_err().to_string().contains("is missing"));
        let ud = "#cloud-config\nkubestrap:\n  role: control-plane\n  kubeadm: {apiVersion: kubeadm.k8s.io/v1beta4, kind: JoinConfiguration}\n";
        assert!(plan_detailed(&gathered(ud)).unwrap_err().to_string().contains("is control-plane but"));
    }

    /// Every kind of plan, with the fields the plan file must keep (tokens, pins, pass-through
    /// kubelet settings).
    fn plans() -> Vec<NodePlan> {
        let mut g = gathered(&cp_cloud_config());
        g.meta.local_hostname = Some("cp-0".into());
        [g, gathered(KUBEADM_INIT), gathered(&worker_cloud_config()), gathered(&kubeadm_join())]
            .iter()
            .map(|g| plan_detailed(g).unwrap().plan)
            .collect()
    }

    #[test]
    fn userdata_plan_round_trips_through_the_plan_file() {
        for p in plans() {
            let text = p.to_yaml().unwrap();
            assert_eq!(NodePlan::from_yaml(text.as_bytes()).unwrap(), p, "{text}");
            assert_eq!(text.starts_with("!Join"), p.is_join(), "{text}");
            assert!(!text.contains("null") && !text.contains("~"), "no noise in the plan file:\n{text}");
        }
        // The token is a plain scalar the scrub after bootstrap finds, and what it leaves still reads.
        let text = plans()[0].to_yaml().unwrap();
        assert!(text.contains(&format!("token: {TOKEN}\n")), "{text}");
        let scrubbed = text.replace(TOKEN, "scrubbed-after-bootstrap");
        assert!(matches!(NodePlan::from_yaml(scrubbed.as_bytes()).unwrap(), NodePlan::Init { .. }));
    }

    #[test]
    fn userdata_plan_file_keeps_only_the_post_kubelet_script() {
        let ud = format!(
            "## template: jinja\n#cloud-config\nwrite_files:\n- path: /etc/kubernetes/pki/ca.key\n  permissions: '0600'\n  \
             content: |\n    -----BEGIN RSA PRIVATE KEY-----\n    MIIE\n    -----END RSA PRIVATE KEY-----\n\
             - path: /run/kubeadm/join.yaml\n  content: |\n    apiVersion: kubeadm.k8s.io/v1beta4\n    kind: JoinConfiguration\n    \
             nodeRegistration: {{name: '{{{{ ds.meta_data.local_hostname }}}}'}}\n    discovery:\n      bootstrapToken:\n        \
             token: {TOKEN}\n        apiServerEndpoint: 127.0.0.1:6443\n        caCertHashes: [{HASH}]\n\
             runcmd:\n- modprobe br_netfilter\n- kubeadm join --config /run/kubeadm/join.yaml && echo success > /run/ok\n- echo done\n"
        );
        let mut g = gathered(&ud);
        g.meta.local_hostname = Some("w-1".into());
        let p = plan_detailed(&g).unwrap();
        assert!(p.notices.iter().any(|n| n.contains("private keys for write_files")), "{:?}", p.notices);
        assert_eq!(join_of(p.clone()).node_registration.name, "w-1");
        let script = p.script.clone().unwrap();
        assert_eq!((script.files.len(), script.before.len(), script.after.len()), (2, 1, 2));
        let file = BootPlan { node: p.plan, script: p.script };
        let text = file.to_yaml().unwrap();
        assert!(!text.contains("PRIVATE KEY") && !text.contains("modprobe"), "{text}");
        let back = BootPlan::from_yaml(text.as_bytes()).unwrap();
        let s = back.script.unwrap();
        assert!(s.files.is_empty() && s.before.is_empty());
        assert_eq!(s.after, script.after);
        assert_eq!(s.kubeadm, "runcmd[1]: kubeadm join --config /run/kubeadm/join.yaml");
    }

    #[test]
    fn userdata_post_kubelet_stage_resolves_the_same_init_config() {
        for p in plans().into_iter().filter(|p| !p.is_join()) {
            let NodePlan::Init { docs, .. } = &p else { unreachable!() };
            // pre-kubelet: the plan as built; post-kubelet: the plan as read back from its file.
            let pre = resolve_init("user-data", docs.clone(), &host()).unwrap();
            let NodePlan::Init { docs, .. } = NodePlan::from_yaml(p.to_yaml().unwrap().as_bytes()).unwrap() else {
                panic!("the plan file changed the role")
            };
            let post = resolve_init("user-data", docs, &host()).unwrap();
            // InitConfig has no PartialEq; its Debug form shows every field.
            assert_eq!(format!("{pre:?}"), format!("{post:?}"));
        }
    }
}
