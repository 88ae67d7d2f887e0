//! The init phases that need the running control plane: they talk to this node's API server
//! with admin.conf's credentials and create-or-update kubeadm's objects (409 means done, so
//! reruns converge).

use log::info;
use serde_json::Value;

use super::InitContext;
use crate::config::types::BootstrapToken;
use crate::constants::{ADMIN_CONF, KUBERNETES_DIR, SUPER_ADMIN_CONF};
use crate::error::{Error, Result};
use crate::kube::{ApiError, Client};
use crate::kubeconfig::Kubeconfig;
use crate::objects;
use crate::paths::GENERATED_TOKEN;
use crate::retry::{Attempt, GaveUp};
use crate::timeouts::REQUEST;

fn client_for(ctx: &InitContext, file: &str) -> Result<Client> {
    let path = format!("{KUBERNETES_DIR}/{file}");
    let bytes =
        ctx.node.fs.read(&path)?.ok_or_else(|| {
            Error::bad_file(format!("{path} is missing; run `kubestrap init phase kubeconfig` first"))
        })?;
    let mut kc = Kubeconfig::parse(&bytes).map_err(|m| Error::bad_file(format!("{path} {m}")))?;
    // kubeadm 1.37 (initData.KubeConfig, EnsureAdminClusterRoleBinding): init talks only to the
    // local API server, so a load balancer that serves only once this API server is up works.
    // The file keeps controlPlaneEndpoint; the serving cert has the advertise address as a SAN.
    for c in &mut kc.clusters {
        c.cluster.server = ctx.cfg.local_endpoint.url();
    }
    let client = Client::from_kubeconfig(&kc, &|p| ctx.node.fs.read(p).ok().flatten(), REQUEST)
        .map_err(|m| Error::bad_file(format!("{path}: {m}")))?;
    Ok(match &ctx.dry_run_api {
        Some(r) => client.recording(r.clone()),
        None => client,
    })
}

/// admin.conf's client, made once per run: one TLS handshake for every API phase (each costs a
/// slow first-boot VM a tenth of a second or more).
fn admin_conn<'c>(ctx: &'c InitContext) -> Result<&'c Client> {
    if let Some(c) = ctx.admin_client.get() {
        return Ok(c);
    }
    let c = client_for(ctx, ADMIN_CONF)?;
    Ok(ctx.admin_client.get_or_init(|| c))
}

/// The admin client. admin.conf's group (kubeadm:cluster-admins) has no rights until its
/// ClusterRoleBinding exists; kubeadm creates that with super-admin.conf when admin.conf is
/// refused, and so do we (once per run, as kubeadm).
pub(super) fn admin<'c>(ctx: &'c InitContext) -> Result<&'c Client> {
    let admin = admin_conn(ctx)?;
    if ctx.admin_bound.get() {
        return Ok(admin);
    }
    let binding = objects::rbac::cluster_admins_binding();
    match admin.create(&binding) {
        Ok(_) => {}
        Err(e) if e.code() == Some(403) => {
            info!("[kubeconfig] Creating the kubeadm:cluster-admins ClusterRoleBinding with {SUPER_ADMIN_CONF}");
            client_for(ctx, SUPER_ADMIN_CONF)?.create(&binding)?;
            // The API server's RBAC cache learns of the binding a moment later, and admin.conf
            // is refused until then (kubeadm retries each write through that moment): wait until
            // admin.conf may act, shown by its create of the binding answering AlreadyExists.
            let what = "waiting for admin.conf's kubeadm:cluster-admins binding to take effect";
            ctx.poll(what, "kubeconfig", ctx.cfg.control_plane_health_timeout).run::<_, Error>(|| {
                match admin.create(&binding) {
                    Ok(_) => Attempt::Done(()),
                    Err(e) if e.code() == Some(403) => Attempt::Wait(e.to_string()),
                    Err(e) => Attempt::Fail(e.into()),
                }
            })?;
        }
        Err(e) => return Err(e.into()),
    }
    ctx.admin_bound.set(true);
    Ok(admin)
}

pub(super) fn apply_all(ctx: &InitContext, client: &Client, tag: &str, objs: &[Value]) -> Result<()> {
    for o in objs {
        ctx.apply(client, tag, o)?;
        info!("[{tag}] Applied {}", crate::kube::paths::describe(o));
    }
    Ok(())
}

/// Waits for the kubelet's healthz, then the API server's /livez, each bounded.
pub fn wait_control_plane(ctx: &InitContext) -> Result<()> {
    let healthz = objects::kubelet::healthz_url(&objects::kubelet::kubelet_configuration(&ctx.cfg));
    // kubeadm: timeouts.kubeletHealthCheck for the kubelet, controlPlaneComponentHealthCheck for the API server.
    let timeout = ctx.cfg.kubelet_health_timeout;
    if let Some(url) = healthz.as_ref().filter(|_| ctx.dry_run_api.is_some()) {
        info!("[dry-run] Would wait for a healthy kubelet at {url} (up to {timeout:?})");
    } else if let Some(url) = healthz {
        info!(
            "[kubelet-check] Waiting for a healthy kubelet at {url}. This can take up to {}",
            crate::config::values::go_duration(timeout)
        );
        let (t, since) = (ctx.node.clock.now(), crate::clock::boot_ms());
        let wait = ctx.poll("waiting for the kubelet", "kubelet-check", timeout);
        wait.run::<_, GaveUp>(|| match crate::kube::http_ok(&url, REQUEST) {
            Ok(()) => Attempt::Done(()),
            Err(e) => Attempt::Wait(e.to_string()),
        })?;
        info!("[kubelet-check] The kubelet is healthy after {:.3?}", ctx.node.clock.now() - t);
        if let Some(r) = ctx.node.report {
            r.span("kubelet healthy", since);
        }
    }
    wait_components(ctx)
}

/// kubeadm 1.34+'s WaitForAllControlPlaneComponents: the API server's /livez (through
/// admin.conf's client), the controller-manager's /healthz and the scheduler's /livez (HTTPS,
/// unverified), at the addresses and ports their manifests get, all within one timeout.
fn wait_components(ctx: &InitContext) -> Result<()> {
    let client = admin_conn(ctx)?;
    let timeout = ctx.cfg.control_plane_health_timeout;
    info!(
        "[control-plane-check] Waiting for healthy control plane components. This can take up to {}",
        crate::config::values::go_duration(timeout)
    );
    let comps = components(&ctx.cfg);
    for (name, url) in &comps {
        info!("[control-plane-check] Checking {name} at {url}");
    }
    let (t, since) = (ctx.node.clock.now(), crate::clock::boot_ms());
    let mut healthy = vec![false; comps.len()];
    let waited =
        ctx.poll("waiting for the control plane components", "control-plane-check", timeout).run::<_, GaveUp>(|| {
            let mut why = Vec::new();
            for (i, (name, url)) in comps.iter().enumerate() {
                if healthy[i] {
                    continue;
                }
                let answer = if i == 0 {
                    match client.request("GET", "/livez", None) {
                        Ok((200, _)) => Ok(()),
                        Ok((code, body)) => {
                            Err(format!("/livez answered HTTP {code}: {}", crate::kube::why_unhealthy(&body)))
                        }
                        Err(e) => Err(e.to_string()),
                    }
                } else if ctx.dry_run_api.is_some() {
                    // A dry run asks its recorder for the API server; nothing else is there to ask.
                    info!("[dry-run] Would wait for {name} at {url}");
                    Ok(())
                } else {
                    crate::kube::https_ok_unverified(url, REQUEST).map_err(|e| e.to_string())
                };
                match answer {
                    Ok(()) => {
                        healthy[i] = true;
                        info!("[control-plane-check] {name} is healthy after {:.3?}", ctx.node.clock.now() - t);
                        if let Some(r) = ctx.node.report {
                            r.span(&format!("{name} healthy"), since);
                        }
                    }
                    Err(e) => why.push(format!("{name}: {e}")),
                }
            }
            if why.is_empty() { Attempt::Done(()) } else { Attempt::Wait(why.join("; ")) }
        });
    if waited.is_err() {
        for (_, (name, _)) in comps.iter().enumerate().filter(|(i, _)| !healthy[*i]) {
            info!("[control-plane-check] {name} is not healthy after {:.3?}", ctx.node.clock.now() - t);
        }
    }
    Ok(waited?)
}

/// Each component's health URL as kubeadm builds it from the manifests: the API server at its
/// advertise address and secure port, the others at `bind-address` (default 127.0.0.1) and
/// `secure-port` (10257, 10259), the last value of each flag winning.
fn components(cfg: &crate::config::InitConfig) -> Vec<(&'static str, String)> {
    let c = &cfg.cluster;
    let last = |args: &[crate::config::types::Arg], name: &str| {
        crate::manifests::pod::last_arg(args, name).filter(|v| !v.is_empty()).map(str::to_string)
    };
    let join = |host: String, port: String| {
        if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
    };
    let api_host =
        last(&c.api_server.extra_args, "advertise-address").unwrap_or_else(|| cfg.advertise_address.to_string());
    let api_port = last(&c.api_server.extra_args, "secure-port").unwrap_or_else(|| cfg.bind_port.to_string());
    let local = |args: &[crate::config::types::Arg], port: u16| {
        let host = last(args, "bind-address").unwrap_or_else(|| "127.0.0.1".into());
        join(host, last(args, "secure-port").unwrap_or_else(|| port.to_string()))
    };
    vec![
        ("kube-apiserver", format!("https://{}/livez", join(api_host, api_port))),
        ("kube-controller-manager", format!("https://{}/healthz", local(&c.controller_manager.extra_args, 10257))),
        ("kube-scheduler", format!("https://{}/livez", local(&c.scheduler.extra_args, 10259))),
    ]
}

pub(crate) fn upload_config(ctx: &InitContext) -> Result<()> {
    let client = ctx.admin()?;
    info!(
        "[upload-config] Storing the configuration used in ConfigMap \"kubeadm-config\" in the \"kube-system\" Namespace"
    );
    let mut objs = vec![objects::configmaps::kubeadm_config(&ctx.cfg)?];
    objs.extend(objects::rbac::upload_config_rbac());
    objs.push(objects::configmaps::kubelet_config_map(&ctx.cfg)?);
    apply_all(ctx, client, "upload-config", &objs)
}

pub fn mark_control_plane(ctx: &InitContext) -> Result<()> {
    let client = ctx.admin()?;
    let path = format!("/api/v1/nodes/{}", ctx.cfg.node_name);
    info!("[mark-control-plane] Waiting for the Node {:?} to register", ctx.cfg.node_name);
    let wait =
        ctx.retry("waiting for the Node to register", "mark-control-plane", ctx.cfg.control_plane_health_timeout);
    let node = wait.run::<_, GaveUp>(|| match client.get(&path) {
        Ok(Some(n)) => Attempt::Done(n),
        Ok(None) => {
            Attempt::Wait(format!("Node {:?} does not exist yet (the kubelet registers it)", ctx.cfg.node_name))
        }
        Err(e) => Attempt::Wait(e.to_string()),
    })?;
    // kubeadm ≥ 1.35.1 retries the patch too (PatchNodeOnce within the API call timeout): an API
    // server that is slow or restarting is waited out, not taken for a failed node.
    let patch = objects::node::control_plane_patch_for_node(&ctx.cfg, &node);
    ctx.retry("labelling and tainting the Node", "mark-control-plane", ctx.cfg.api_call_timeout)
        .run(|| ApiError::attempt::<_, Error>(client.merge_patch(&path, &patch)))?;
    info!("[mark-control-plane] Marked the node {} as control-plane (labels and taints)", ctx.cfg.node_name);
    Ok(())
}

/// The tokens init creates: the configured ones, or kubeadm's default one. A token without a
/// value gets a generated one, kept (one per line) so a rerun uses the same.
pub fn tokens(ctx: &InitContext) -> Result<Vec<BootstrapToken>> {
    let mut list = ctx.cfg.init.bootstrap_tokens.clone();
    if list.is_empty() {
        list.push(BootstrapToken {
            token: String::new(),
            description: String::new(),
            ttl: Some("24h0m0s".into()),
            expires: None,
            usages: vec!["signing".into(), "authentication".into()],
            groups: vec![objects::BOOTSTRAP_GROUP.into()],
        });
    }
    let unnamed = list.iter().filter(|t| t.token.is_empty()).count();
    if unnamed == 0 {
        return Ok(list);
    }
    let mut kept: Vec<String> = match ctx.node.fs.read(&GENERATED_TOKEN)? {
        Some(b) => String::from_utf8_lossy(&b)
            .lines()
            .map(str::trim)
            .take_while(|t| crate::token::is_valid_token(t))
            .map(str::to_string)
            .collect(),
        None => Vec::new(),
    };
    if kept.len() < unnamed {
        while kept.len() < unnamed {
            kept.push(crate::token::generate()?);
        }
        ctx.node.fs.write(&GENERATED_TOKEN, kept.join("\n").as_bytes())?;
        ctx.node.fs.commit()?;
    }
    let mut fresh = kept.into_iter();
    for t in list.iter_mut().filter(|t| t.token.is_empty()) {
        t.token = fresh.next().unwrap_or_default();
    }
    Ok(list)
}

pub fn bootstrap_token(ctx: &InitContext) -> Result<()> {
    let client = ctx.admin()?;
    let now = time::OffsetDateTime::now_utc();
    for t in tokens(ctx)? {
        let secret = objects::tokens::token_secret(&t, now)?;
        ctx.apply(client, "bootstrap-token", &secret)?;
        info!(
            "[bootstrap-token] Stored bootstrap token {} (secret not shown)",
            t.token.split('.').next().unwrap_or_default()
        );
    }
    apply_all(ctx, client, "bootstrap-token", &objects::rbac::bootstrap_token_rbac())?;
    let ca = ctx
        .node
        .fs
        .read(crate::paths::cert(ctx.cfg.certs_dir(), "ca"))?
        .ok_or_else(|| Error::bad_file("ca.crt is missing"))?;
    let (cluster_info, _) = objects::configmaps::cluster_info(&ctx.cfg, &ca);
    info!("[bootstrap-token] Creating the \"cluster-info\" ConfigMap in the \"kube-public\" namespace");
    apply_all(ctx, client, "bootstrap-token", &[cluster_info])?;
    apply_all(ctx, client, "bootstrap-token", &objects::rbac::cluster_info_rbac())
}

/// What kubeadm prints at the end: how to use admin.conf and the exact join command. The token
/// goes to stdout because the user asked for it; it is never logged. A dry run logs the command
/// with the token withheld (stdout carries the plan).
pub(crate) fn show_join_command(ctx: &InitContext) -> Result<()> {
    let ca = ctx
        .node
        .fs
        .read(crate::paths::cert(ctx.cfg.certs_dir(), "ca"))?
        .ok_or_else(|| Error::bad_file("ca.crt is missing"))?;
    let hash = crate::pki::ca_hash(&ca)?;
    let dry_run = ctx.dry_run_api.is_some();
    let token = if ctx.skip_token_print || dry_run {
        "<value withheld>".to_string()
    } else {
        tokens(ctx)?.into_iter().next().map(|t| t.token).unwrap_or_default()
    };
    let ep = &ctx.cfg.endpoint;
    let endpoint =
        if ep.host.contains(':') { format!("[{}]:{}", ep.host, ep.port) } else { format!("{}:{}", ep.host, ep.port) };
    let join = format!("kubestrap join {endpoint} --token {token} \\\n\t--discovery-token-ca-cert-hash {hash}");
    if dry_run {
        let one_line = join.replace(" \\\n\t", " ");
        info!("[dry-run] Would print how to use admin.conf and the join command: {one_line}");
        return Ok(());
    }
    let mut out = String::from(
        "\nYour Kubernetes control-plane has initialized successfully!\n\n\
         To start using your cluster, you need to run the following as a regular user:\n\n  \
         mkdir -p $HOME/.kube\n  sudo cp -i /etc/kubernetes/admin.conf $HOME/.kube/config\n  sudo chown $(id -u):$(id -g) $HOME/.kube/config\n\n\
         Alternatively, if you are the root user, you can run:\n\n  export KUBECONFIG=/etc/kubernetes/admin.conf\n\n",
    );
    // As kubeadm: control-plane joins need a stable controlPlaneEndpoint.
    if !ctx.cfg.cluster.control_plane_endpoint.is_empty() {
        if ctx.upload.enabled {
            // kubeadm's --skip-certificate-key-print withholds it here too.
            let key = if ctx.upload.skip_key_print {
                "<value withheld>".to_string()
            } else {
                ctx.certificate_key()?.to_hex()
            };
            out.push_str(&format!(
                "You can now join any number of control-plane nodes running the following command on each as root:\n\n\
                 {join} \\\n\t--control-plane --certificate-key {key}\n\n\
                 Please note that the certificate-key gives access to cluster sensitive data, keep it secret!\n\
                 As a safeguard, uploaded-certs will be deleted in two hours; If necessary, you can use\n\
                 \"kubestrap init phase upload-certs --upload-certs\" to reload certs afterward.\n\n"
            ));
        } else {
            out.push_str(&format!(
                "You can now join any number of control-plane nodes by copying certificate authorities\n\
                 and service account keys on each node and then running the following as root:\n\n\
                 {join} \\\n\t--control-plane\n\n"
            ));
        }
    }
    out.push_str(&format!(
        "Then you can join any number of worker nodes by running the following on each as root:\n\n{join}\n"
    ));
    println!("{out}");
    Ok(())
}
