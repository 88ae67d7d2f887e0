//! What may replace or fill user-data fields from elsewhere: the `kubestrap.token` and
//! `kubestrap.ca-cert-hash` credentials (so a secret need not sit in readable user-data),
//! shorthand values merged into embedded kubeadm documents, and the node name from meta-data.
//! Token values are never put into an error or a notice.

use serde_yaml::Value;

use super::cloud_config::Shorthand;
use super::{Machine, Notices};
use crate::config::ConfigError;
use crate::config::values::{CertificateKey, TOKEN_FORMAT_HIDDEN, Token, is_dns1123_subdomain};
use crate::datasource::{CRED_CA_CERT_HASH, CRED_CERTIFICATE_KEY, CRED_TOKEN, Gathered};

/// The token and CA hashes after applying credentials.
pub(super) struct Overrides {
    /// The effective token, if any (credential over user-data). Never printed.
    pub token: Option<String>,
    /// Where the token came from, for errors.
    pub token_origin: String,
    /// The token is the `kubestrap.token` credential's: it may replace the user-data's.
    pub token_from_credential: bool,
    /// CA hashes from the credential, if given (they replace user-data's).
    pub ca_hashes: Option<Vec<String>>,
    /// The certificate key (credential over user-data), checked. Never printed.
    pub certificate_key: Option<String>,
}

impl Overrides {
    pub fn read(src: &str, g: &Gathered, sh: &Shorthand, notices: &mut Notices) -> Result<Overrides, ConfigError> {
        let mut token = match &sh.token {
            None => None,
            Some(Value::String(s)) => Some(s.trim().to_string()),
            Some(_) => {
                return Err(ConfigError::doc(src, "kubestrap", "token", "must be a string (value hidden)".into()));
            }
        };
        let mut token_origin = "kubestrap.token in the user-data".to_string();
        let token_from_credential = g.credentials.contains_key(CRED_TOKEN);
        if let Some(c) = g.credentials.get(CRED_TOKEN) {
            let origin = format!("credential {CRED_TOKEN}");
            let t = std::str::from_utf8(c)
                .map_err(|_| ConfigError::file(&origin, "is not UTF-8 text (value hidden)".into()))?
                .trim()
                .to_string();
            if token.is_some() {
                notices.push(format!("credential {CRED_TOKEN} overrides kubestrap.token from the user-data"));
            }
            token = Some(t);
            token_origin = origin;
        }
        if let Some(t) = &token
            && Token::parse(t).is_err()
        {
            let msg = format!("{TOKEN_FORMAT_HIDDEN}, e.g. from `kubestrap token generate`");
            return Err(if token_from_credential {
                ConfigError::file(&token_origin, msg)
            } else {
                ConfigError::doc(src, "kubestrap", "token", msg)
            });
        }
        let ca_hashes = match g.credentials.get(CRED_CA_CERT_HASH) {
            None => None,
            Some(c) => {
                let origin = format!("credential {CRED_CA_CERT_HASH}");
                let s = std::str::from_utf8(c).map_err(|_| ConfigError::file(&origin, "is not UTF-8 text".into()))?;
                let list: Vec<String> = s
                    .split(|c: char| c.is_whitespace() || c == ',')
                    .filter(|h| !h.is_empty())
                    .map(String::from)
                    .collect();
                if list.is_empty() {
                    return Err(ConfigError::file(&origin, "is empty; expected sha256:<64 hex>".into()));
                }
                for h in &list {
                    crate::discovery::CaPin::parse(h).map_err(|m| ConfigError::file(&origin, m.to_string()))?;
                }
                Some(list)
            }
        };
        let certificate_key = certificate_key(src, g, sh, notices)?;
        Ok(Overrides { token, token_origin, token_from_credential, ca_hashes, certificate_key })
    }
}

/// `kubestrap.certificateKey`, or the `kubestrap.certificate-key` credential, which wins.
fn certificate_key(
    src: &str,
    g: &Gathered,
    sh: &Shorthand,
    notices: &mut Notices,
) -> Result<Option<String>, ConfigError> {
    let check = |k: String, bad: &dyn Fn(String) -> ConfigError| {
        CertificateKey::parse(&k).map(|_| k).map_err(|e| bad(format!("{e} (value hidden)")))
    };
    let given = match &sh.certificate_key {
        None => None,
        Some(Value::String(s)) => {
            Some(check(s.trim().to_string(), &|m| ConfigError::doc(src, "kubestrap", "certificateKey", m))?)
        }
        Some(_) => {
            return Err(ConfigError::doc(src, "kubestrap", "certificateKey", "must be a string (value hidden)".into()));
        }
    };
    let Some(c) = g.credentials.get(CRED_CERTIFICATE_KEY) else { return Ok(given) };
    let origin = format!("credential {CRED_CERTIFICATE_KEY}");
    let text =
        std::str::from_utf8(c).map_err(|_| ConfigError::file(&origin, "is not UTF-8 text (value hidden)".into()))?;
    if given.is_some() {
        notices.push(format!("{origin} overrides kubestrap.certificateKey from the user-data"));
    }
    Ok(Some(check(text.trim().to_string(), &|m| ConfigError::file(&origin, m))?))
}

/// Sets a string field from the shorthand unless embedded kubeadm config already gave another value.
pub(super) fn set_field(
    src: &str,
    key: &str,
    value: &Option<String>,
    target: &mut String,
    doc_path: &str,
) -> Result<(), ConfigError> {
    let Some(v) = value else { return Ok(()) };
    if target.is_empty() || target == v {
        *target = v.clone();
        Ok(())
    } else {
        Err(ConfigError::doc(
            src,
            "kubestrap",
            key,
            format!("{v:?} disagrees with {doc_path} {target:?} in kubestrap.kubeadm; set it in one place"),
        ))
    }
}

/// Node name: as given, else meta-data's local-hostname (lowercased); validated as RFC 1123.
pub(super) fn node_name(src: &str, name: &mut String, machine: Machine, doc: &str) -> Result<(), ConfigError> {
    if name.is_empty() {
        if let Some(h) = machine.local_hostname.map(str::trim).filter(|h| !h.is_empty()) {
            let lower = h.to_lowercase();
            if !is_dns1123_subdomain(&lower) {
                return Err(ConfigError::file(
                    &format!("meta-data ({})", machine.source),
                    format!(
                        "local-hostname {h:?} is not a valid node name (lowercase RFC 1123 subdomain: a-z, 0-9, '-', '.'); set kubestrap.nodeName"
                    ),
                ));
            }
            *name = lower;
        }
        return Ok(());
    }
    if !is_dns1123_subdomain(name) {
        return Err(ConfigError::doc(
            src,
            doc,
            "nodeRegistration.name",
            format!("{name:?} is not a valid node name (lowercase RFC 1123 subdomain: a-z, 0-9, '-', '.')"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use crate::datasource::{CRED_CA_CERT_HASH, CRED_TOKEN, CRED_USER_DATA};
    use crate::userdata::{NodePlan, plan_detailed};

    #[test]
    fn userdata_credentials_override_user_data_fields() {
        let mut g = gathered(&worker_cloud_config());
        g.credentials.insert(CRED_TOKEN.into(), format!("{TOKEN2}\n").into_bytes());
        g.credentials.insert(CRED_CA_CERT_HASH.into(), format!("{HASH2}\n").into_bytes());
        let p = plan_detailed(&g).unwrap();
        assert!(p.notices.iter().any(|n| n.contains("overrides kubestrap.token")), "{:?}", p.notices);
        assert!(p.notices.iter().all(|n| !n.contains(TOKEN) && !n.contains(TOKEN2)), "{:?}", p.notices);
        let bt = join_of(p).discovery.bootstrap_token.unwrap();
        assert_eq!(bt.token, TOKEN2);
        assert_eq!(bt.ca_cert_hashes, vec![HASH2.to_string()]);

        // kubeadm documents too, and a worker without any token in user-data.
        let ud = "#cloud-config\nkubestrap:\n  role: worker\n  controlPlaneEndpoint: 10.0.0.10:6443\n";
        let mut g = gathered(ud);
        g.credentials.insert(CRED_TOKEN.into(), TOKEN2.as_bytes().to_vec());
        g.credentials.insert(CRED_CA_CERT_HASH.into(), format!("{HASH} {HASH2}").into_bytes());
        let bt = join_of(plan_detailed(&g).unwrap()).discovery.bootstrap_token.unwrap();
        assert_eq!((bt.token.as_str(), bt.ca_cert_hashes.len()), (TOKEN2, 2));

        let mut g = gathered(KUBEADM_INIT);
        g.credentials.insert(CRED_TOKEN.into(), TOKEN2.as_bytes().to_vec());
        let docs = init_docs(plan_detailed(&g).unwrap());
        assert_eq!(docs.init.unwrap().bootstrap_tokens[0].token, TOKEN2);

        // kubestrap.user-data replaces the user-data itself.
        let mut g = gathered(KUBEADM_INIT);
        g.credentials.insert(CRED_USER_DATA.into(), worker_cloud_config().into_bytes());
        let p = plan_detailed(&g).unwrap();
        assert!(p.notices.iter().any(|n| n.contains("replaces the user-data from nocloud")), "{:?}", p.notices);
        assert!(matches!(p.plan, NodePlan::Join { .. }));
    }

    #[test]
    fn userdata_token_never_appears_in_errors() {
        let secret = "abcdef.0123456789abcdeX";
        let ud = worker_cloud_config().replace(TOKEN, secret);
        let e = plan_detailed(&gathered(&ud)).unwrap_err().to_string();
        assert!(e.contains("value hidden") && !e.contains("0123456789"), "{e}");
        let e = plan_detailed(&gathered("#cloud-config\nkubestrap:\n  role: worker\n  token: 123456.0123456789\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("token") && !e.contains("0123456789"), "{e}");
        let mut g = gathered(&worker_cloud_config());
        g.credentials.insert(CRED_TOKEN.into(), b"BAD.TOKEN-secretvalue".to_vec());
        let e = plan_detailed(&g).unwrap_err();
        assert_eq!(e.source, "credential kubestrap.token");
        assert!(!e.to_string().contains("secretvalue"), "{e}");
    }

    #[test]
    fn userdata_node_name_from_meta_data_unless_set() {
        let mut g = gathered(&cp_cloud_config());
        g.meta.local_hostname = Some("CP-0".into());
        let docs = init_docs(plan_detailed(&g).unwrap());
        assert_eq!(docs.init.unwrap().node_registration.name, "cp-0");

        g.user_data = Some(format!("{}  nodeName: explicit\n", cp_cloud_config()).into_bytes());
        let docs = init_docs(plan_detailed(&g).unwrap());
        assert_eq!(docs.init.unwrap().node_registration.name, "explicit");

        g.user_data = Some(cp_cloud_config().into_bytes());
        g.meta.local_hostname = Some("bad_name".into());
        let e = plan_detailed(&g).unwrap_err();
        assert_eq!(e.source, "meta-data (nocloud)");
        assert!(e.to_string().contains("\"bad_name\""), "{e}");

        g.user_data = Some(format!("{}  nodeName: Bad_Name\n", cp_cloud_config()).into_bytes());
        assert!(plan_detailed(&g).unwrap_err().to_string().contains("nodeRegistration.name"));
    }
}
