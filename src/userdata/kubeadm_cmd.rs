//! A `kubeadm init|join [flags]` line from runcmd → the kubeadm documents kubestrap runs, read
//! with kubestrap's own command-line parser (`cli::parse_args`, which takes kubeadm's spellings)
//! and the `--config` file taken from `write_files`. Flags are folded into the documents the way
//! kubeadm binds them to its configuration, so the plan stays plain typed documents.

use super::write_files::WriteFile;
use super::{Format, Notices, Role};
use crate::cli::{self, Command};
use crate::config::flags::{InitFlags, mixed_error, mixed_with_config};
use crate::config::types::{BootstrapTokenDiscovery, FileDiscovery, InitConfiguration, JoinConfiguration};
use crate::config::{ConfigError, Documents, Reads, parse_documents_for};
use crate::constants::KUBEADM_API_VERSION;

/// The flags a user-data kubeadm line may carry, per subcommand: those kubestrap applies here.
/// kubeadm's other init flags (`--pod-network-cidr` ...) are refused by name until they are
/// mapped (see `config::flags`), never dropped.
const INIT_FLAGS: &[&str] = &[
    "config",
    "ignore-preflight-errors",
    "skip-phases",
    "apiserver-advertise-address",
    "apiserver-bind-port",
    "apiserver-cert-extra-sans",
    "cert-dir",
    "control-plane-endpoint",
    "cri-socket",
    "feature-gates",
    "image-repository",
    "kubernetes-version",
    "node-name",
    "pod-network-cidr",
    "service-cidr",
    "service-dns-domain",
    "token",
    "token-ttl",
    "skip-token-print",
    "upload-certs",
    "certificate-key",
    "skip-certificate-key-print",
    "patches",
];
const JOIN_FLAGS: &[&str] = &[
    "config",
    "ignore-preflight-errors",
    "skip-phases",
    "token",
    "discovery-token",
    "tls-bootstrap-token",
    "discovery-token-ca-cert-hash",
    "discovery-token-unsafe-skip-ca-verification",
    "discovery-file",
    "node-name",
    "cri-socket",
    "control-plane",
    "certificate-key",
    "apiserver-advertise-address",
    "apiserver-bind-port",
    "patches",
];

/// The role and documents of a kubeadm line. `origin` is `runcmd[i]`.
pub(super) fn documents(
    src: &str,
    format: Format,
    origin: &str,
    argv: &[String],
    files: &[WriteFile],
    notices: &mut Notices,
) -> Result<(Role, Documents), ConfigError> {
    let err = |m: String| ConfigError::doc(src, format.document(), origin, m);
    let argv = without_verbosity(argv, origin, notices);
    let sub = argv.get(1).cloned().unwrap_or_default();
    let flags = flag_names(&argv);
    if let Some(m) = unknown_flag(&sub, &flags, format) {
        return Err(err(m));
    }
    if flags.iter().any(|f| f == "config") {
        // In the order written, as this check has always reported them.
        let mixed = mixed_with_config(flags.iter().map(|f| (f.as_str(), true)));
        if let Some(m) = mixed_error(&mixed) {
            return Err(err(format!("kubeadm {sub}: {m}")));
        }
    }
    let cli = cli::parse_args(&argv).map_err(|e| err(format!("kubeadm {sub}: {e}")))?;
    match cli.command {
        Command::Init(i) => {
            if i.phase.is_some() {
                return Err(err("kubeadm init phase: run the whole `kubeadm init` in user-data".into()));
            }
            let mut docs = if i.config.is_some() {
                config(src, format, origin, i.config.as_deref(), files, Reads::Init)?
            } else {
                // kubeadm's flags alone build the documents, as `kubestrap init` does.
                InitFlags::from_cli(&i).documents_with_token().map_err(|e| err(format!("kubeadm init: {e}")))?
            };
            // Ignored documents are reported by the planner, from docs.warnings (kubeadm's words).
            let had_join = docs.ignored_kinds.iter().any(|k| k == "JoinConfiguration");
            if docs.init.is_none() && docs.cluster.is_none() {
                if had_join {
                    return Err(err(format!(
                        "kubeadm init --config {}: the file holds only a JoinConfiguration, which kubeadm init refuses",
                        display(i.config.as_deref())
                    )));
                }
                docs.init = Some(default_init());
            }
            let init = docs.init.get_or_insert_with(default_init);
            init.node_registration.ignore_preflight_errors.extend(cli::split_all(&i.ignore_preflight_errors));
            if !i.skip_phases.is_empty() {
                init.skip_phases = cli::split_all(&i.skip_phases);
            }
            Ok((Role::ControlPlane { upload_certs: i.upload_certs }, docs))
        }
        Command::Join(j) => {
            let mut docs = config(src, format, origin, j.config.as_deref(), files, Reads::Join)?;
            if j.config.is_some() && docs.join.is_none() {
                return Err(err(format!(
                    "kubeadm join --config {}: the file holds no JoinConfiguration",
                    display(j.config.as_deref())
                )));
            }
            let mut join = docs.join.take().unwrap_or_else(default_join);
            apply_join_flags(&mut join, j, origin, notices, src).map_err(err)?;
            docs.join = Some(join);
            Ok((Role::Join, docs))
        }
        _ => Err(err(format!("kubeadm {sub} is not init or join"))),
    }
}

/// The first flag kubestrap does not take from a user-data kubeadm line, as the refusal.
fn unknown_flag(sub: &str, flags: &[String], format: Format) -> Option<String> {
    let allowed = if sub == "init" { INIT_FLAGS } else { JOIN_FLAGS };
    let f = flags.iter().find(|f| !allowed.contains(&f.as_str()))?;
    Some(format!(
        "kubeadm {sub} --{f}: kubestrap does not take this flag from a user-data kubeadm line (it takes --{}); \
         set the same field in the kubeadm config file given with --config ({})",
        allowed.join(", --"),
        format.files_key()
    ))
}

/// The join flags, bound to the JoinConfiguration fields kubeadm binds them to.
fn apply_join_flags(
    join: &mut JoinConfiguration,
    j: cli::Join,
    origin: &str,
    notices: &mut Notices,
    src: &str,
) -> Result<(), String> {
    if j.words.first().is_some_and(|w| w == "phase") {
        return Err("kubeadm join phase: run the whole `kubeadm join` in user-data".into());
    }
    let endpoint = match j.words.as_slice() {
        [] => None,
        [e] => Some(e.clone()),
        _ => return Err("kubeadm join takes one API server endpoint (HOST:PORT)".into()),
    };
    let nr = &mut join.node_registration;
    nr.ignore_preflight_errors.extend(cli::split_all(&j.ignore_preflight_errors));
    if let Some(n) = j.node_name {
        nr.name = n;
    }
    if let Some(c) = j.cri_socket {
        nr.cri_socket = c;
    }
    if !j.skip_phases.is_empty() {
        join.skip_phases = cli::split_all(&j.skip_phases);
    }
    if let Some(dir) = j.patches.filter(|d| !d.is_empty()) {
        join.patches = Some(crate::config::types::Patches { directory: dir });
    }
    // kubeadm binds these to JoinConfiguration.controlPlane (refused next to --config above).
    if j.control_plane {
        let cp = join.control_plane.get_or_insert_with(Default::default);
        if let Some(a) = j.apiserver_advertise_address {
            cp.local_api_endpoint.advertise_address = a;
        }
        if let Some(p) = j.apiserver_bind_port {
            cp.local_api_endpoint.bind_port = Some(i64::from(p));
        }
        if let Some(k) = j.certificate_key {
            cp.certificate_key = k;
        }
    }
    if j.config.is_some() {
        if endpoint.is_some() {
            notices
                .push(format!("{src}: {origin}: the endpoint argument is ignored next to --config, as kubeadm does"));
        }
        return Ok(());
    }
    let d = &mut join.discovery;
    if let Some(f) = j.discovery_file {
        d.file = Some(FileDiscovery { kube_config_path: f });
    } else if endpoint.is_some() || j.token.is_some() || j.discovery_token.is_some() {
        let bt = d.bootstrap_token.get_or_insert_with(BootstrapTokenDiscovery::default);
        bt.api_server_endpoint = endpoint.unwrap_or_default();
        if let Some(t) = j.discovery_token.or(j.token.clone()) {
            bt.token = t;
        }
        bt.ca_cert_hashes = cli::split_all(&j.discovery_token_ca_cert_hash);
        bt.unsafe_skip_ca_verification = j.discovery_token_unsafe_skip_ca_verification;
    }
    if let Some(t) = j.tls_bootstrap_token.or(j.token) {
        d.tls_bootstrap_token = t;
    }
    Ok(())
}

/// The `--config` file's documents, from what write_files writes there (in order, with appends).
fn config(
    src: &str,
    format: Format,
    origin: &str,
    path: Option<&std::path::Path>,
    files: &[WriteFile],
    reads: Reads,
) -> Result<Documents, ConfigError> {
    let Some(path) = path else { return Ok(Documents::default()) };
    let want = path.to_string_lossy();
    let mut content: Option<Vec<u8>> = None;
    for f in files.iter().filter(|f| f.path == want) {
        match (&mut content, f.append) {
            (Some(c), true) => c.extend_from_slice(&f.content),
            _ => content = Some(f.content.clone()),
        }
    }
    let files_key = format.files_key();
    let Some(bytes) = content else {
        return Err(ConfigError::doc(
            src,
            format.document(),
            origin,
            format!(
                "kubeadm --config {want}: no {files_key} entry writes that file; kubestrap reads the kubeadm \
                 config from {files_key} before anything runs"
            ),
        ));
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| ConfigError::file(&format!("{src}: {files_key} {want}"), "is not UTF-8 text".into()))?;
    parse_documents_for(&format!("{src}: {files_key} {want}"), &text, reads)
}

fn display(p: Option<&std::path::Path>) -> String {
    p.map(|p| p.display().to_string()).unwrap_or_default()
}

fn default_init() -> InitConfiguration {
    InitConfiguration {
        api_version: KUBEADM_API_VERSION.into(),
        kind: "InitConfiguration".into(),
        ..Default::default()
    }
}

fn default_join() -> JoinConfiguration {
    JoinConfiguration {
        api_version: KUBEADM_API_VERSION.into(),
        kind: "JoinConfiguration".into(),
        ..Default::default()
    }
}

/// The long flag names given (`--name`, `--name=value`), in order.
fn flag_names(argv: &[String]) -> Vec<String> {
    argv.iter()
        .take_while(|a| *a != "--")
        .filter_map(|a| a.strip_prefix("--"))
        .map(|a| a.split_once('=').map_or(a, |(f, _)| f).to_string())
        .collect()
}

/// Drops klog's `--v N` / `--v=N` / `-v N` (Cluster API renders `--v` from spec.verbosity):
/// kubestrap logs at its own level.
fn without_verbosity(argv: &[String], origin: &str, notices: &mut Notices) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut it = argv.iter().peekable();
    while let Some(a) = it.next() {
        let (bare, value_follows) = match a.as_str() {
            "--v" | "-v" => (true, it.peek().is_some_and(|v| v.parse::<u32>().is_ok())),
            s if s.starts_with("--v=") || s.starts_with("-v=") => (true, false),
            _ => (false, false),
        };
        if bare {
            if value_follows {
                it.next();
            }
            notices.push(format!("{origin}: kubeadm's verbosity flag ignored: kubestrap logs at its own level"));
        } else {
            out.push(a.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        shlex::split(s).unwrap()
    }

    fn file(path: &str, content: &str) -> WriteFile {
        WriteFile { path: path.into(), content: content.into(), mode: 0o640, owner: "root:root".into(), append: false }
    }

    fn run(line: &str, files: &[WriteFile]) -> Result<(Role, Documents), ConfigError> {
        documents("u", Format::CloudInit, "runcmd[0]", &argv(line), files, &mut Notices::default())
    }

    const INIT: &str = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nclusterName: c\n";

    #[test]
    fn kubeadm_init_line_reads_its_config_from_write_files() {
        let files = [file("/run/kubeadm/kubeadm.yaml", INIT)];
        let (role, docs) =
            run("kubeadm init --config /run/kubeadm/kubeadm.yaml --v 5 --ignore-preflight-errors=NumCPU,Mem --skip-phases=addon/kube-proxy", &files)
                .unwrap();
        assert!(matches!(role, Role::ControlPlane { .. }));
        assert_eq!(docs.cluster.unwrap().cluster_name, "c");
        let init = docs.init.unwrap();
        assert_eq!(init.node_registration.ignore_preflight_errors, ["NumCPU", "Mem"]);
        assert_eq!(init.skip_phases, ["addon/kube-proxy"]);
        // No --config: kubeadm's defaults.
        assert!(run("kubeadm init", &[]).unwrap().1.init.is_some());
        let e = run("kubeadm init --config /other.yaml", &files).unwrap_err().to_string();
        assert!(e.contains("runcmd[0]") && e.contains("no write_files entry"), "{e}");
        let only_join = [file("/j.yaml", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n")];
        let e = run("kubeadm init --config /j.yaml", &only_join).unwrap_err().to_string();
        assert!(e.contains("only a JoinConfiguration"), "{e}");
        // A bad document in the file is named with the file.
        let bad = [file("/b.yaml", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nbogus: 1\n")];
        let e = run("kubeadm init --config /b.yaml", &bad).unwrap_err().to_string();
        assert!(e.contains("write_files /b.yaml") && e.contains("bogus"), "{e}");
    }

    #[test]
    fn kubeadm_join_line_flags_become_the_join_configuration() {
        let (role, docs) = run(
            "kubeadm join 127.0.0.1:6443 --token abcdef.0123456789abcdef --cri-socket=unix:///var/run/crio/crio.sock \
             --discovery-token-unsafe-skip-ca-verification --node-name w-1",
            &[],
        )
        .unwrap();
        assert_eq!(role, Role::Join);
        let j = docs.join.unwrap();
        let bt = j.discovery.bootstrap_token.unwrap();
        assert_eq!((bt.api_server_endpoint.as_str(), bt.token.as_str()), ("127.0.0.1:6443", "abcdef.0123456789abcdef"));
        assert!(bt.unsafe_skip_ca_verification);
        assert_eq!(j.discovery.tls_bootstrap_token, "abcdef.0123456789abcdef");
        assert_eq!(
            (j.node_registration.cri_socket.as_str(), j.node_registration.name.as_str()),
            ("unix:///var/run/crio/crio.sock", "w-1")
        );
    }

    #[test]
    fn kubeadm_control_plane_lines_upload_and_join_with_the_certificate_key() {
        let key = "0f".repeat(32);
        let (role, docs) =
            run(&format!("kubeadm init --upload-certs --certificate-key {key} --pod-network-cidr=10.244.0.0/16"), &[])
                .unwrap();
        assert_eq!(role, Role::ControlPlane { upload_certs: true });
        assert_eq!(docs.init.unwrap().certificate_key, key);
        // --upload-certs may stand next to --config, as in kubeadm.
        let files = [file("/i.yaml", INIT)];
        let (role, _) = run("kubeadm init --config /i.yaml --upload-certs", &files).unwrap();
        assert_eq!(role, Role::ControlPlane { upload_certs: true });
        let (role, docs) = run(
            &format!(
                "kubeadm join lb:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash sha256:{} \
                 --control-plane --certificate-key {key} --apiserver-advertise-address 10.0.0.12 --apiserver-bind-port 6444",
                "1".repeat(64)
            ),
            &[],
        )
        .unwrap();
        assert_eq!(role, Role::Join);
        let cp = docs.join.unwrap().control_plane.unwrap();
        assert_eq!(
            (
                cp.certificate_key.as_str(),
                cp.local_api_endpoint.advertise_address.as_str(),
                cp.local_api_endpoint.bind_port
            ),
            (key.as_str(), "10.0.0.12", Some(6444))
        );
        let e = run(&format!("kubeadm join --config /j.yaml --certificate-key {key}"), &[]).unwrap_err().to_string();
        assert!(e.contains("can not mix '--config' with arguments [certificate-key]") && !e.contains(&key), "{e}");
    }

    #[test]
    fn kubeadm_lines_refused_as_kubeadm_refuses_and_never_echo_tokens() {
        let e = run("kubeadm join --config /j.yaml --token abcdef.0123456789abcdef", &[]).unwrap_err().to_string();
        assert!(e.contains("can not mix '--config' with arguments [token]"), "{e}");
        assert!(!e.contains("0123456789abcdef"), "{e}");
        let e = run("kubeadm join 127.0.0.1:6443 abcdef.0123456789abcdef", &[]).unwrap_err().to_string();
        assert!(!e.contains("0123456789abcdef"), "{e}");
        let (_, docs) = run("kubeadm join x:1 --token abcdef.0123456789abcdef --patches /p", &[]).unwrap();
        assert_eq!(docs.join.unwrap().patches.unwrap().directory, "/p", "--patches binds patches.directory");
        // kubeadm's configuration flags alone build the documents.
        let (_, docs) = run("kubeadm init --pod-network-cidr=10.244.0.0/16", &[]).unwrap();
        assert_eq!(docs.cluster.unwrap().networking.pod_subnet, "10.244.0.0/16");
        let e = run("kubeadm join --discovery-timeout 5m x:1 --token abcdef.0123456789abcdef", &[]).unwrap_err();
        assert!(e.to_string().contains("--discovery-timeout"), "{e}");
        let e = run("kubeadm init --root /x", &[]).unwrap_err();
        assert!(e.to_string().contains("--root"), "{e}");
    }
}
