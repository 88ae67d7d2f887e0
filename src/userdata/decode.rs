//! Raw user-data bytes → text: bounded gzip, UTF-8, the format it is in, and the refusal of
//! private keys. Nothing here knows YAML; it decides only what the bytes are allowed to be.

use std::io::Read;

use super::{Parsed, Shape};
use crate::config::{ConfigError, parse_documents};

/// The largest user-data accepted, before and after gzip decompression (bounds zip bombs).
pub const MAX_USER_DATA_BYTES: usize = 1 << 20;
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The user-data as text, ready for a YAML parser: decompressed, BOM stripped, not empty and not
/// one of the cloud-init formats kubestrap does not run.
pub(super) fn to_text(src: &str, raw: &[u8]) -> Result<String, ConfigError> {
    let text = decode(src, raw)?;
    let text = text.strip_prefix('\u{feff}').map(str::to_string).unwrap_or(text);
    if text.trim().is_empty() {
        return Err(ConfigError::file(src, "is empty".into()));
    }
    check_format(src, &text)?;
    Ok(text)
}

/// `#cloud-config` (the shorthand) rather than kubeadm documents: cloud-init's rule, the first
/// line exactly.
pub(super) fn is_cloud_config(text: &str) -> bool {
    text.trim_start().lines().next().is_some_and(|l| l.trim_end() == "#cloud-config")
}

/// Un-gzips (bounded) and checks UTF-8.
fn decode(src: &str, raw: &[u8]) -> Result<String, ConfigError> {
    if raw.len() > MAX_USER_DATA_BYTES {
        return Err(ConfigError::file(src, format!("is {} bytes; the limit is {MAX_USER_DATA_BYTES}", raw.len())));
    }
    let bytes = if raw.starts_with(&GZIP_MAGIC) {
        let mut out = Vec::new();
        // One byte past the cap is enough to know the cap was passed, without inflating a bomb.
        flate2::read::GzDecoder::new(raw)
            .take(MAX_USER_DATA_BYTES as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| ConfigError::file(src, format!("is gzip-compressed but does not decompress: {e}")))?;
        if out.len() > MAX_USER_DATA_BYTES {
            return Err(ConfigError::file(
                src,
                format!("decompresses to more than {MAX_USER_DATA_BYTES} bytes (the limit); refusing it"),
            ));
        }
        out
    } else {
        raw.to_vec()
    };
    String::from_utf8(bytes).map_err(|e| {
        ConfigError::file(src, format!("is not UTF-8 text (byte {}) nor gzip", e.utf8_error().valid_up_to()))
    })
}

/// Other cloud-init user-data formats: say so instead of a YAML error.
fn check_format(src: &str, text: &str) -> Result<(), ConfigError> {
    let first = text.trim_start().lines().next().unwrap_or_default();
    let kind = if first.starts_with("#!") {
        "a shell script"
    } else if first.starts_with("#cloud-config-archive") {
        "a cloud-config archive"
    } else if first.starts_with("#include") {
        "an #include list"
    } else if first.starts_with("#cloud-boothook") || first.starts_with("#part-handler") {
        "a cloud-init boothook/part-handler"
    } else if first.starts_with("## template:") && !super::jinja::is_template(text.trim_start()) {
        "a template other than `## template: jinja`"
    } else if first.to_ascii_lowercase().starts_with("content-type:") || first.starts_with("MIME-Version:") {
        "MIME multipart"
    } else {
        return Ok(());
    };
    Err(ConfigError::file(
        src,
        format!(
            "is {kind}, which kubestrap does not run; use kubeadm config documents or #cloud-config with a kubestrap: key"
        ),
    ))
}

/// Finds a PEM private key anywhere in the text (also inside JSON/YAML strings); the 1-based line.
pub(super) fn private_key_line(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find("-----BEGIN ") {
        let start = from + i;
        let rest = &text[start + "-----BEGIN ".len()..];
        if let Some(end) = rest.find("-----")
            && rest[..end].ends_with("PRIVATE KEY")
            && end <= 64
        {
            return Some(text[..start].matches('\n').count() + 1);
        }
        from = start + 1;
    }
    None
}

/// Plain kubeadm documents: no private key in them, and nothing beside them.
pub(super) fn read(src: &str, text: &str, from_credential: bool) -> Result<Parsed, ConfigError> {
    refuse_private_keys(src, text, from_credential, false)?;
    Ok(Parsed { docs: parse_documents(src, text)?, shape: Shape::Documents })
}

/// Refuses user-data carrying a private key: on many clouds user-data is readable by every
/// process (IMDS, the seed disk), so a key there has leaked.
pub(super) fn refuse_private_keys(
    src: &str,
    text: &str,
    from_credential: bool,
    allowed: bool,
) -> Result<(), ConfigError> {
    // Credentials are readable by root only, so the reason for refusing does not apply to them.
    if from_credential || allowed {
        return Ok(());
    }
    match private_key_line(text) {
        Some(line) => Err(ConfigError::file(
            src,
            format!(
                "carries a private key (a -----BEGIN ... PRIVATE KEY----- block at line {line}); refusing it because \
                 user-data is readable by every process on many clouds (IMDS, the seed disk). Pass keys as systemd \
                 credentials or bake them into the image, or set kubestrap: {{allowPrivateKeys: true}} to accept the risk"
            ),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use crate::datasource::CRED_USER_DATA;
    use crate::userdata::{NodePlan, plan_detailed};

    #[test]
    fn userdata_gzip_of_both_formats() {
        let mut g = gathered("");
        g.user_data = Some(gz(worker_cloud_config().as_bytes()));
        assert!(matches!(plan_detailed(&g).unwrap().plan, NodePlan::Join { .. }));
        g.user_data = Some(gz(KUBEADM_INIT.as_bytes()));
        assert!(matches!(plan_detailed(&g).unwrap().plan, NodePlan::Init { .. }));
        g.user_data = Some(vec![0x1f, 0x8b, 0, 1, 2, 3]);
        assert!(plan_detailed(&g).unwrap_err().to_string().contains("does not decompress"));
    }

    #[test]
    fn userdata_gzip_bomb_is_capped() {
        // 8 MiB of comment lines compress to a few KiB.
        let mut big = worker_cloud_config().into_bytes();
        big.extend(std::iter::repeat_n(b"# padding padding padding padding\n".as_slice(), 8 << 15).flatten());
        let packed = gz(&big);
        assert!(packed.len() < 200_000, "{}", packed.len());
        let mut g = gathered("");
        g.user_data = Some(packed);
        let e = plan_detailed(&g).unwrap_err().to_string();
        assert!(e.contains("decompresses to more than 1048576 bytes"), "{e}");
        // Just under the cap is fine.
        let mut ok = worker_cloud_config().into_bytes();
        ok.resize(MAX_USER_DATA_BYTES - 10, b'\n');
        g.user_data = Some(gz(&ok));
        plan_detailed(&g).unwrap();
    }

    #[test]
    fn userdata_private_keys_refused_unless_allowed() {
        let key = "-----BEGIN EC PRIVATE KEY-----\n    MHcCAQEE\n    -----END EC PRIVATE KEY-----\n";
        let ud = format!("{}write_files:\n- path: /etc/k.key\n  content: |\n    {key}", worker_cloud_config());
        let e = plan_detailed(&gathered(&ud)).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("private key") && m.contains("line 10") && m.contains("allowPrivateKeys"), "{m}");
        assert!(!m.contains("MHcCAQEE"), "{m}");
        // A key inside a JSON-style one-line string is found too.
        assert_eq!(private_key_line("a\nb: \"-----BEGIN PRIVATE KEY-----\\nMII\""), Some(2));
        assert_eq!(private_key_line("-----BEGIN CERTIFICATE-----\n"), None);
        // Opt-in.
        let ud = ud.replace("  role: worker\n", "  role: worker\n  allowPrivateKeys: true\n");
        let p = plan_detailed(&gathered(&ud)).unwrap();
        assert!(p.notices.iter().any(|n| n.contains("private key, accepted")), "{:?}", p.notices);
        // kubeadm documents cannot opt in.
        let kd = format!("{}{}", kubeadm_join(), key.lines().map(|l| format!("# {}\n", l.trim())).collect::<String>());
        assert!(plan_detailed(&gathered(&kd)).unwrap_err().to_string().contains("private key"));
        // A credential is not world-readable: accepted.
        let mut g = gathered("");
        g.credentials.insert(CRED_USER_DATA.into(), kd.into_bytes());
        plan_detailed(&g).unwrap();
    }

    #[test]
    fn userdata_other_formats_and_bad_bytes_are_named() {
        assert!(plan_detailed(&gathered("#!/bin/sh\necho hi\n")).unwrap_err().to_string().contains("shell script"));
        assert!(plan_detailed(&gathered("  \n")).unwrap_err().to_string().contains("is empty"));
        let mut g = gathered("");
        g.user_data = Some(vec![0xff, 0xfe, 0x00]);
        assert!(plan_detailed(&g).unwrap_err().to_string().contains("not UTF-8"));
    }
}
