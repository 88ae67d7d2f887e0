//! Bootstrap token format and generation (kubeadm's `<id>.<secret>`).

use std::fmt;

use ring::rand::{SecureRandom, SystemRandom};

const ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// The accepted token form, appended to every [`BadToken`] message.
const TOKEN_FORM: &str = "a bootstrap token is <6 characters [a-z0-9]>.<16 characters [a-z0-9]>";

/// What a config field or credential says about a malformed token: never the value.
pub(crate) const TOKEN_FORMAT_HIDDEN: &str = "bad token format (value hidden): expected [a-z0-9]{6}.[a-z0-9]{16}";

/// Why a string is not a bootstrap token. Never carries the input: any part of it may be the
/// secret. Only the id is named, once it is known to be well-formed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadToken {
    #[error("the token contains whitespace (a stray newline?); {TOKEN_FORM}")]
    Whitespace,
    #[error("the token has no '.'; {TOKEN_FORM}")]
    NoDot,
    #[error("the token id (before the '.') is malformed; {TOKEN_FORM}")]
    BadId,
    #[error("the secret of token {id:?} (after the '.') is malformed ({chars} characters); {TOKEN_FORM}")]
    BadSecret { id: String, chars: usize },
}

/// A bootstrap token `<id>.<secret>`. The secret never shows in Debug output or errors.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    pub id: String,
    pub(crate) secret: String,
}

fn is_token_part(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

impl Token {
    /// Parses `[a-z0-9]{6}.[a-z0-9]{16}`. The error says what is wrong without echoing the
    /// input (any part of it may be the secret).
    pub fn parse(s: &str) -> Result<Token, BadToken> {
        if s.chars().any(char::is_whitespace) {
            return Err(BadToken::Whitespace);
        }
        let Some((id, secret)) = s.split_once('.') else {
            return Err(BadToken::NoDot);
        };
        if !is_token_part(id, 6) {
            return Err(BadToken::BadId);
        }
        if !is_token_part(secret, 16) {
            return Err(BadToken::BadSecret { id: id.to_string(), chars: secret.chars().count() });
        }
        Ok(Token { id: id.to_string(), secret: secret.to_string() })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The secret half. Use only to sign/verify or to build a bearer token; never log it.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// `<id>.<secret>`, the bearer token as sent to the API server. Never log it.
    pub fn bearer(&self) -> String {
        format!("{}.{}", self.id, self.secret)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token").field("id", &self.id).field("secret", &"<redacted>").finish()
    }
}

/// `[a-z0-9]{6}.[a-z0-9]{16}` (the one parser: [`Token::parse`]).
pub fn is_valid_token(t: &str) -> bool {
    Token::parse(t).is_ok()
}

/// `text` with every `<id>.<secret>` token that stands alone (not inside a longer run of letters
/// and digits) replaced by `with`: for logs, errors and kept files that must not hold a secret.
pub(crate) fn replace_tokens(text: &str, with: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if i + 23 <= b.len()
            && text.is_char_boundary(i)
            && text.is_char_boundary(i + 23)
            && is_valid_token(&text[i..i + 23])
            && (i == 0 || !b[i - 1].is_ascii_alphanumeric())
            && (i + 23 == b.len() || !b[i + 23].is_ascii_alphanumeric())
        {
            out.push_str(with);
            i += 23;
            continue;
        }
        let ch = text[i..].chars().next().unwrap_or('\u{fffd}');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// `system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]`.
pub(crate) fn is_valid_extra_group(g: &str) -> bool {
    let Some(rest) = g.strip_prefix("system:bootstrappers:") else {
        return false;
    };
    let b = rest.as_bytes();
    !b.is_empty()
        && b.len() <= 256
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b':' || *c == b'-')
        && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
}

/// Random characters from the token alphabet. Bytes >= 252 (= 7*36) are dropped so `% 36`
/// has no bias, as kubeadm does.
fn random_chars(n: usize) -> Result<String, ring::error::Unspecified> {
    let rng = SystemRandom::new();
    let mut out = String::with_capacity(n);
    let mut buf = [0u8; 64];
    while out.len() < n {
        rng.fill(&mut buf)?;
        for b in buf {
            if b < 252 && out.len() < n {
                out.push(char::from(ALPHABET[usize::from(b % 36)]));
            }
        }
    }
    Ok(out)
}

/// The system random generator failed: no token can be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the system random generator failed")]
pub struct RandomError;

/// A fresh token `<id>.<secret>`.
pub fn generate() -> Result<String, RandomError> {
    let id = random_chars(6).map_err(|_| RandomError)?;
    let secret = random_chars(16).map_err(|_| RandomError)?;
    Ok(format!("{id}.{secret}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format() {
        assert!(is_valid_token("abcdef.0123456789abcdef"));
        assert!(!is_valid_token("abcdef.0123456789abcde"));
        assert!(!is_valid_token("ABCDEF.0123456789abcdef"));
        assert!(!is_valid_token("abcdef0123456789abcdef"));
        assert!(is_valid_extra_group("system:bootstrappers:kubeadm:default-node-token"));
        assert!(!is_valid_extra_group("system:bootstrappers:"));
        assert!(!is_valid_extra_group("system:nodes"));
    }

    #[test]
    fn generated_tokens_are_valid_and_differ() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert!(is_valid_token(&a) && is_valid_token(&b));
        assert_ne!(a, b);
    }
}
