//! One Ignition resource (a file's `contents`, an `append` entry, a config reference) → its
//! bytes: RFC 2397 `data:` URLs only, optionally gzip-compressed, with `verification.hash`
//! checked. Remote sources are refused with advice: kubestrap plans before anything runs and
//! fetches nothing beyond the user-data.

use base64::Engine;
use ring::digest;
use serde_json::Value;

use super::super::write_files::gunzip;

/// Why a resource could not be read; the caller adds the field path.
pub(super) type Refusal = String;

/// The bytes of the resource object `v` (`{source, compression, verification}`); a missing or
/// null source is empty contents, as in Ignition.
pub(super) fn read(v: &Value) -> Result<Vec<u8>, (&'static str, Refusal)> {
    let Value::Object(m) = v else { return Err(("", "must be an object with a source".into())) };
    let raw = match m.get("source") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => source(s).map_err(|e| ("source", e))?,
        Some(_) => return Err(("source", "must be a string (a data: URL)".into())),
    };
    let raw = match m.get("compression").and_then(Value::as_str) {
        None | Some("") => raw,
        Some("gzip") => gunzip(&raw).map_err(|e| ("compression", e))?,
        Some(other) => {
            return Err(("compression", format!("{other:?} is not gzip, the one compression Ignition knows")));
        }
    };
    if let Some(hash) = m.get("verification").and_then(|v| v.get("hash")) {
        let hash = hash.as_str().ok_or(("verification.hash", "must be a string".to_string()))?;
        verify(hash, &raw).map_err(|e| ("verification.hash", e))?;
    }
    Ok(raw)
}

/// A source URL's bytes: a `data:` URL decoded, anything else refused naming what it is.
pub(super) fn source(url: &str) -> Result<Vec<u8>, Refusal> {
    if let Some(rest) = url.strip_prefix("data:") {
        return data_url(rest);
    }
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase()).unwrap_or_default();
    Err(match scheme.as_str() {
        "s3" => "is an S3 object, where Cluster API Provider AWS stores the Ignition config by default; kubestrap \
                 does not fetch it: set the AWSMachineTemplate's `ignition.storageType: UnencryptedUserData` so the \
                 whole config is in the user-data"
            .into(),
        "http" | "https" | "tftp" | "gs" | "arn" => format!(
            "is a remote {scheme}:// source, which kubestrap does not fetch (it plans the node before the network \
             is trusted): inline it as a data: URL (Butane does this with `inline:` or `local:`)"
        ),
        _ => "is not a data: URL; kubestrap reads only inline data: sources (RFC 2397)".into(),
    })
}

/// RFC 2397 after `data:`: `[<mediatype>][;base64],<data>`, the data percent-encoded.
fn data_url(rest: &str) -> Result<Vec<u8>, Refusal> {
    let (header, data) = rest.split_once(',').ok_or("is a data: URL without the ',' before its data")?;
    let bytes = percent_decode(data)?;
    let base64 = header.rsplit(';').next().is_some_and(|p| p.trim().eq_ignore_ascii_case("base64"));
    if !base64 {
        return Ok(bytes);
    }
    // Line breaks may sit in long inline data; base64 never holds whitespace itself.
    let clean: Vec<u8> = bytes.into_iter().filter(|b| !b.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(&clean)
        .map_err(|e| format!("is a ;base64 data: URL whose data is not base64 ({e})"))
}

/// `%XX` → the byte; everything else as is (`+` is not a space in a URL path).
fn percent_decode(s: &str) -> Result<Vec<u8>, Refusal> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            let byte = hex.and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or_else(|| {
                format!(
                    "is a data: URL with a bad percent escape at byte {i} (a '%' must be followed by two hex digits)"
                )
            })?;
            out.push(byte);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// `sha512-<hex>` or `sha256-<hex>`; Ignition's hash describes the decompressed bytes when a
/// compression is given.
pub(super) fn verify(hash: &str, bytes: &[u8]) -> Result<(), Refusal> {
    let (algo, want) = hash.split_once('-').ok_or_else(|| format!("{hash:?} is not <algorithm>-<hex>"))?;
    let got = match algo {
        "sha512" => hex(digest::digest(&digest::SHA512, bytes).as_ref()),
        "sha256" => hex(digest::digest(&digest::SHA256, bytes).as_ref()),
        other => return Err(format!("{other:?} is not a hash kubestrap checks (sha512, sha256)")),
    };
    if got.eq_ignore_ascii_case(want) {
        Ok(())
    } else {
        Err(format!("does not match the contents ({algo} is {got}); refusing them"))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
