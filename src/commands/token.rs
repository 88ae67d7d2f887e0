//! `kubestrap token generate|create|list|delete`, through an admin kubeconfig.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::{self, TokenCommand};
use crate::config::types::BootstrapToken;
use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::kube::{Client, Created};

const SECRETS: &str = "/api/v1/namespaces/kube-system/secrets";

pub fn run(t: cli::Token) -> Result<()> {
    match t.command {
        TokenCommand::Generate(_) => {
            println!("{}", crate::token::generate()?);
            Ok(())
        }
        TokenCommand::Create(c) => create(c),
        TokenCommand::List(l) => list(&admin(l.kubeconfig.as_deref(), &l.root)?),
        TokenCommand::Delete(d) => delete(&admin(d.kubeconfig.as_deref(), &d.root)?, &d.tokens),
    }
}

/// A client from an admin kubeconfig (default: the node's admin.conf under `root`).
pub fn admin(kubeconfig: Option<&Path>, root: &Path) -> Result<Client> {
    let path: PathBuf =
        kubeconfig.map(Path::to_path_buf).unwrap_or_else(|| NodeFs::new(root).real(crate::paths::ADMIN_CONF.as_str()));
    let bytes = std::fs::read(&path).map_err(|e| Error::bad_file(format!("reading {}: {e}", path.display())))?;
    let kc =
        crate::kubeconfig::Kubeconfig::parse(&bytes).map_err(|m| Error::bad_file(format!("{} {m}", path.display())))?;
    let fs = NodeFs::new(root);
    Client::from_kubeconfig(&kc, &|p| fs.read(p).ok().flatten(), Duration::from_secs(10))
        .map_err(|m| Error::bad_file(format!("{}: {m}", path.display())))
}

fn create(c: cli::TokenCreate) -> Result<()> {
    let client = admin(c.kubeconfig.as_deref(), &c.root)?;
    let value = match c.token {
        Some(t) => t,
        None => crate::token::generate()?,
    };
    if !crate::token::is_valid_token(&value) {
        return Err(Error::bad_flag("the token must match [a-z0-9]{6}.[a-z0-9]{16} (value hidden)"));
    }
    crate::config::values::parse_duration(&c.ttl).map_err(|m| Error::bad_flag(format!("--ttl: {m}")))?;
    let bt = BootstrapToken {
        token: value.clone(),
        description: c.description.unwrap_or_default(),
        ttl: Some(c.ttl),
        expires: None,
        usages: non_empty(cli::split_list(c.usages.as_deref()), &["signing", "authentication"]),
        groups: non_empty(cli::split_list(c.groups.as_deref()), &["system:bootstrappers:kubeadm:default-node-token"]),
    };
    for g in &bt.groups {
        if !crate::token::is_valid_extra_group(g) {
            return Err(Error::bad_flag(format!(
                "--groups: {g:?} must match system:bootstrappers:[a-z0-9:-]{{0,255}}[a-z0-9]"
            )));
        }
    }
    let secret = crate::objects::tokens::token_secret(&bt, time::OffsetDateTime::now_utc())
        .map_err(|e| Error::bad_flag(e.to_string()))?;
    match client.create(&secret)? {
        Created::New(_) => {}
        // kubeadm token create fails if the token exists (failIfExists=true).
        Created::Exists => return Err(Error::bad_flag("a token with this id already exists; pick another token")),
    }
    if c.print_join_command {
        let ca = client_ca_hash(&c.root)?;
        let endpoint = client.base().trim_start_matches("https://").to_string();
        println!("kubestrap join {endpoint} --token {value} --discovery-token-ca-cert-hash {ca}");
    } else {
        println!("{value}");
    }
    Ok(())
}

fn client_ca_hash(root: &Path) -> Result<String> {
    let path = NodeFs::new(root).real(&crate::paths::default_ca_cert());
    let pem = std::fs::read(&path).map_err(|e| Error::bad_file(format!("reading {}: {e}", path.display())))?;
    crate::pki::ca_hash(&pem).map_err(|m| Error::bad_file(format!("{} {m}", path.display())))
}

fn non_empty(v: Vec<String>, default: &[&str]) -> Vec<String> {
    if v.is_empty() { default.iter().map(|s| s.to_string()).collect() } else { v }
}

fn list(client: &Client) -> Result<()> {
    let now = time::OffsetDateTime::now_utc();
    println!("{:<8} {:<10} {:<22} {:<26} {:<40} DESCRIPTION", "TOKEN", "TTL", "EXPIRES", "USAGES", "EXTRA GROUPS");
    for s in client.list(SECRETS)? {
        if s["type"] != "bootstrap.kubernetes.io/token" {
            continue;
        }
        let Ok(t) = crate::objects::tokens::parse_token_secret(&s) else { continue };
        let (ttl, expires) = match t.expiration {
            Some(e) if e <= now => ("<expired>".to_string(), crate::pki::check::rfc3339(e)),
            Some(e) => (format!("{}h", ((e - now).whole_minutes() + 59) / 60), crate::pki::check::rfc3339(e)),
            None => ("<forever>".to_string(), "<never>".to_string()),
        };
        println!(
            "{:<8} {:<10} {:<22} {:<26} {:<40} {}",
            t.id,
            ttl,
            expires,
            t.usages.join(","),
            t.groups.join(","),
            t.description
        );
    }
    Ok(())
}

fn delete(client: &Client, tokens: &[String]) -> Result<()> {
    if tokens.is_empty() {
        return Err(Error::bad_flag("name the token ids (or tokens) to delete"));
    }
    for t in tokens {
        let id = t.split('.').next().unwrap_or_default();
        if id.len() != 6 || !id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
            return Err(Error::bad_flag(format!("{id:?} is not a token id ([a-z0-9]{{6}})")));
        }
        if client.delete(&format!("{SECRETS}/bootstrap-token-{id}"))? {
            println!("bootstrap token {id:?} deleted");
        } else {
            return Err(Error::bad_flag(format!("bootstrap token {id:?} does not exist")));
        }
    }
    Ok(())
}
