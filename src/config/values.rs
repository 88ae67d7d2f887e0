//! Small value types the config is made of: CIDRs, Go durations, Kubernetes versions, DNS names,
//! and the two secrets (bootstrap token, from `crate::token`; certificate key), parsed once for
//! every caller.
//! Parsers return a [`ValueError`] naming the bad value; the caller adds the document and field
//! path (or the command-line flag).

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

/// A value that does not parse. The text names the offending value (or part of it) and says
/// what was expected; it reads after a field name (`timeouts.x: "1y" is not a duration ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// No `/` in what should be a CIDR.
    #[error("not a CIDR (expected ADDRESS/PREFIX, e.g. 10.96.0.0/12)")]
    NotCidr { value: String },
    #[error("{addr:?} is not an IP address")]
    NotIp { addr: String },
    #[error("prefix {prefix:?} is not a number from 0 to {max}")]
    BadPrefix { prefix: String, max: u8 },
    /// More than two CIDRs, or two of the same family.
    #[error("expected one CIDR, or two of different IP families (dual-stack)")]
    CidrFamilies { value: String },
    #[error("{value:?} is not a duration (examples: 24h, 1h30m, 90s, 500ms)")]
    NotDuration { value: String },
    #[error("{value:?} is longer than the largest duration (about 2562047h)")]
    DurationTooLong { value: String },
    #[error("{value:?} is not a Kubernetes version (expected e.g. v1.37.0, or a release label such as stable-1)")]
    NotVersion { value: String },
}

/// An IP network `addr/prefix`, normalised to its network address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    pub fn parse(s: &str) -> Result<Cidr, ValueError> {
        let (a, p) = s.split_once('/').ok_or_else(|| ValueError::NotCidr { value: s.to_string() })?;
        let addr: IpAddr = a.parse().map_err(|_| ValueError::NotIp { addr: a.to_string() })?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix: u8 =
            p.parse().ok().filter(|n| *n <= max).ok_or_else(|| ValueError::BadPrefix { prefix: p.to_string(), max })?;
        Ok(Cidr { addr: Cidr { addr, prefix }.network(), prefix })
    }

    /// The network address: the host bits cleared.
    fn network(&self) -> IpAddr {
        let bits = self.host_bits();
        let mask = if bits >= 128 { 0 } else { u128::MAX << bits };
        match self.addr {
            // The mask keeps at most the low 32 bits, so the value fits a u32.
            IpAddr::V4(v4) => IpAddr::V4((u32::from(v4) & (mask as u32)).into()),
            IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & mask).into()),
        }
    }

    pub(crate) fn host_bits(&self) -> u32 {
        let max = if self.addr.is_ipv4() { 32 } else { 128 };
        max - u32::from(self.prefix)
    }

    /// The n-th address of the network (0 is the network address), if it fits.
    pub fn nth(&self, n: u128) -> Option<IpAddr> {
        let bits = self.host_bits();
        if bits < 128 && n >= (1u128 << bits) {
            return None;
        }
        let mask = if bits >= 128 { 0 } else { u128::MAX << bits };
        match self.addr {
            IpAddr::V4(v4) => {
                let base = u128::from(u32::from(v4)) & (mask & 0xffff_ffff);
                u32::try_from(base + n).ok().map(|v| IpAddr::V4(v.into()))
            }
            IpAddr::V6(v6) => {
                let base = u128::from(v6) & mask;
                base.checked_add(n).map(|v| IpAddr::V6(v.into()))
            }
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Parses a comma-separated list of CIDRs (dual-stack allows one per family).
pub fn parse_cidr_list(s: &str) -> Result<Vec<Cidr>, ValueError> {
    let list: Vec<Cidr> = s.split(',').map(|p| Cidr::parse(p.trim())).collect::<Result<_, _>>()?;
    if list.len() > 2 || (list.len() == 2 && list[0].addr.is_ipv4() == list[1].addr.is_ipv4()) {
        return Err(ValueError::CidrFamilies { value: s.to_string() });
    }
    Ok(list)
}

/// Parses a Go duration string ("24h", "1h30m", "500ms", "8760h0m0s").
pub fn parse_duration(s: &str) -> Result<Duration, ValueError> {
    let bad = || ValueError::NotDuration { value: s.to_string() };
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() || s.starts_with('-') {
        return Err(bad());
    }
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let num: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total += num * scale;
    }
    // Go durations are int64 nanoseconds: about 292 years.
    if !total.is_finite() || total > 9.2e9 {
        return Err(ValueError::DurationTooLong { value: s.to_string() });
    }
    Ok(Duration::from_secs_f64(total))
}

/// A Kubernetes release version, `v1.37.0` or `1.37.0-rc.1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
    /// Everything after the patch number (`-rc.1`, `+build`), kept verbatim.
    pub suffix: String,
}

impl Version {
    pub fn parse(s: &str) -> Result<Version, ValueError> {
        let bad = || ValueError::NotVersion { value: s.to_string() };
        let body = s.strip_prefix('v').unwrap_or(s);
        let end = body.find(['-', '+']).unwrap_or(body.len());
        let (nums, suffix) = body.split_at(end);
        let parts: Vec<u32> = nums.split('.').map(|p| p.parse().map_err(|_| bad())).collect::<Result<_, _>>()?;
        let [major, minor, patch] = parts[..] else {
            return Err(bad());
        };
        let suffix_ok = suffix.chars().all(|c| c.is_ascii_alphanumeric() || "-+.".contains(c));
        if !suffix_ok || nums.split('.').any(|p| p.len() > 1 && p.starts_with('0')) {
            return Err(bad());
        }
        Ok(Version { major, minor, patch, suffix: suffix.to_string() })
    }

    /// The image tag: `+` is not allowed in tags, so kubeadm turns it into `_`.
    pub(crate) fn image_tag(&self) -> String {
        self.to_string().replace('+', "_")
    }

    /// The pre-release (`rc.1` of `v1.37.0-rc.1+abc`), empty for a release.
    pub fn pre_release(&self) -> &str {
        let s = self.suffix.strip_prefix('-').unwrap_or_default();
        s.split('+').next().unwrap_or_default()
    }

    /// Semantic-version order, as apimachinery's: build metadata ignored, a pre-release before
    /// its release, its dot-separated identifiers numerically where both are numbers.
    pub fn semver_cmp(&self, o: &Version) -> std::cmp::Ordering {
        use std::cmp::Ordering::*;
        let core = (self.major, self.minor, self.patch).cmp(&(o.major, o.minor, o.patch));
        core.then_with(|| match (self.pre_release(), o.pre_release()) {
            ("", "") => Equal,
            ("", _) => Greater,
            (_, "") => Less,
            (a, b) => {
                let (mut x, mut y) = (a.split('.'), b.split('.'));
                loop {
                    match (x.next(), y.next()) {
                        (None, None) => return Equal,
                        (None, _) => return Less,
                        (_, None) => return Greater,
                        (Some(p), Some(q)) => {
                            let c = match (p.parse::<u64>(), q.parse::<u64>()) {
                                (Ok(m), Ok(n)) => m.cmp(&n),
                                (Ok(_), Err(_)) => Less,
                                (Err(_), Ok(_)) => Greater,
                                _ => p.cmp(q),
                            };
                            if c != Equal {
                                return c;
                            }
                        }
                    }
                }
            }
        })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}{}", self.major, self.minor, self.patch, self.suffix)
    }
}

/// RFC 1123 subdomain: what Kubernetes accepts as a node name.
pub(crate) fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns1123_label_part)
}

fn is_dns1123_label_part(l: &str) -> bool {
    let b = l.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A DNS SAN kubeadm accepts: an RFC 1123 subdomain, or a wildcard `*.subdomain`.
pub(crate) fn is_dns_san(s: &str) -> bool {
    is_dns1123_subdomain(s) || s.strip_prefix("*.").is_some_and(is_dns1123_subdomain)
}

// The token lives in the leaf `token` module (so `token`, `discovery` need no config); the
// config layer parses it from here as before.
pub(crate) use crate::token::TOKEN_FORMAT_HIDDEN;
pub use crate::token::{BadToken, Token};

/// kubeadm's CertificateKeySize.
pub const CERTIFICATE_KEY_SIZE: usize = 32;

/// Why a string is not a certificate key. Never carries the key: it decrypts the shared CA keys.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadCertificateKey {
    /// kubeadm's own wording, so runbooks match.
    #[error("invalid certificate key size {0}, the key must be an AES key of size 32")]
    Size(usize),
    #[error("the certificate key is not hex: give the 64 hex characters printed by `init --upload-certs`")]
    NotHex,
}

/// A certificate key (the AES-256 key sealing the kubeadm-certs Secret); its Debug output never
/// shows the key. Sealing and generating live in `pki::copycerts`.
#[derive(Clone, PartialEq, Eq)]
pub struct CertificateKey(pub(crate) [u8; CERTIFICATE_KEY_SIZE]);

impl fmt::Debug for CertificateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CertificateKey(<redacted>)")
    }
}

impl CertificateKey {
    /// kubeadm's ValidateCertificateKey (minus "empty is allowed": callers decide that), on the
    /// key with surrounding whitespace dropped (a key pasted or read from a file).
    pub fn parse(hex: &str) -> Result<CertificateKey, BadCertificateKey> {
        Self::parse_exact(hex.trim())
    }

    /// As [`parse`](Self::parse), but whitespace counts as not hex (config fields and flags).
    pub(crate) fn parse_exact(hex: &str) -> Result<CertificateKey, BadCertificateKey> {
        if !hex.len().is_multiple_of(2) || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(BadCertificateKey::NotHex);
        }
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
            .collect::<Result<_, _>>()
            .map_err(|_| BadCertificateKey::NotHex)?;
        let arr: [u8; CERTIFICATE_KEY_SIZE] =
            bytes.try_into().map_err(|b: Vec<u8>| BadCertificateKey::Size(b.len()))?;
        Ok(CertificateKey(arr))
    }

    /// 64 lower-case hex characters: what `--certificate-key` takes.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A duration as Go's `time.Duration.String()` writes it (`4m0s`, `1h0m0s`, `1.5s`, `500ms`),
/// for messages that match kubeadm's.
pub fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    if nanos < 1_000_000_000 {
        let (unit, div) = if nanos < 1_000 {
            ("ns", 1)
        } else if nanos < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        return format!("{}{unit}", trim_fraction(nanos, div));
    }
    let secs = d.as_secs();
    let (h, m) = (secs / 3600, (secs / 60) % 60);
    let s = trim_fraction(u128::from(secs % 60) * 1_000_000_000 + u128::from(d.subsec_nanos()), 1_000_000_000);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, m) => format!("{m}m{s}s"),
        (h, m) => format!("{h}h{m}m{s}s"),
    }
}

/// `n / div` with the fraction's trailing zeros dropped (Go's fmtFrac).
fn trim_fraction(n: u128, div: u128) -> String {
    let (whole, frac) = (n / div, n % div);
    if frac == 0 {
        return whole.to_string();
    }
    let width = div.to_string().len() - 1;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_as_semver_with_pre_releases_first() {
        let v = |s: &str| Version::parse(s).expect(s);
        let ordered = [
            "v1.36.3",
            "v1.37.0-alpha.0",
            "v1.37.0-alpha.2",
            "v1.37.0-alpha.10",
            "v1.37.0-beta.0",
            "v1.37.0-rc.1",
            "v1.37.0",
            "v1.37.2",
        ];
        for w in ordered.windows(2) {
            assert_eq!(v(w[0]).semver_cmp(&v(w[1])), std::cmp::Ordering::Less, "{} < {}", w[0], w[1]);
            assert_eq!(v(w[1]).semver_cmp(&v(w[0])), std::cmp::Ordering::Greater);
        }
        assert_eq!(v("v1.37.2+abc").semver_cmp(&v("1.37.2")), std::cmp::Ordering::Equal, "build metadata ignored");
        assert_eq!(v("v1.37.0-rc.1+abc").pre_release(), "rc.1");
    }

    #[test]
    fn durations_print_as_go_prints_them() {
        let cases = [
            (240_000, "4m0s"),
            (3_600_000, "1h0m0s"),
            (30_000, "30s"),
            (1_500, "1.5s"),
            (500, "500ms"),
            (90_250, "1m30.25s"),
            (0, "0s"),
        ];
        for (ms, want) in cases {
            assert_eq!(go_duration(Duration::from_millis(ms)), want);
        }
        assert_eq!(go_duration(Duration::from_nanos(1_500)), "1.5µs");
    }

    #[test]
    fn cidrs() {
        let c = Cidr::parse("10.96.0.0/12").unwrap();
        assert_eq!(c.nth(1).unwrap().to_string(), "10.96.0.1");
        assert_eq!(c.nth(10).unwrap().to_string(), "10.96.0.10");
        assert_eq!(c.host_bits(), 20);
        assert_eq!(Cidr::parse("10.96.3.7/12").unwrap().to_string(), "10.96.0.0/12");
        let v6 = Cidr::parse("fd00:10:96::/108").unwrap();
        assert_eq!(v6.nth(10).unwrap().to_string(), "fd00:10:96::a");
        assert!(Cidr::parse("10.96.0.0").is_err());
        assert!(Cidr::parse("10.96.0.0/33").is_err());
        assert!(Cidr::parse("10.300.0.0/16").is_err());
        assert!(Cidr::parse("10.0.0.0/30").unwrap().nth(4).is_none());
        assert!(parse_cidr_list("10.0.0.0/16,10.1.0.0/16").is_err());
        assert_eq!(parse_cidr_list("10.0.0.0/16,fd00::/64").unwrap().len(), 2);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("24h").unwrap(), Duration::from_secs(86400));
        assert_eq!(parse_duration("8760h0m0s").unwrap(), Duration::from_secs(8760 * 3600));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
        for bad in ["", "24", "h", "-1h", "1d", "1h x", "99999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn versions() {
        let v = Version::parse("v1.37.0").unwrap();
        assert_eq!((v.major, v.minor, v.patch), (1, 37, 0));
        assert_eq!(Version::parse("1.36.2-rc.1+abc").unwrap().image_tag(), "v1.36.2-rc.1_abc");
        for bad in ["stable-1", "v1.37", "1.x.0", "v01.37.0", "v1.37.0 ", ""] {
            assert!(Version::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn errors_name_the_value() {
        let e = Cidr::parse("10.300.0.0/16").unwrap_err();
        assert_eq!(e, ValueError::NotIp { addr: "10.300.0.0".into() });
        assert_eq!(e.to_string(), "\"10.300.0.0\" is not an IP address");
        assert_eq!(Cidr::parse("10.0.0.0/40").unwrap_err().to_string(), "prefix \"40\" is not a number from 0 to 32");
        assert!(Cidr::parse("10.0.0.0").unwrap_err().to_string().starts_with("not a CIDR"));
        assert!(parse_cidr_list("10.0.0.0/8,10.1.0.0/16").unwrap_err().to_string().contains("dual-stack"));
        assert_eq!(
            parse_duration("1y").unwrap_err().to_string(),
            "\"1y\" is not a duration (examples: 24h, 1h30m, 90s, 500ms)"
        );
        assert!(parse_duration("99999999999h").unwrap_err().to_string().starts_with("\"99999999999h\" is longer"));
        let v = Version::parse("stable-0").unwrap_err().to_string();
        assert_eq!(
            v,
            "\"stable-0\" is not a Kubernetes version (expected e.g. v1.37.0, or a release label such as stable-1)"
        );
    }

    #[test]
    fn names() {
        assert!(is_dns1123_subdomain("cp-1.example.com"));
        assert!(!is_dns1123_subdomain("CP-1"));
        assert!(!is_dns1123_subdomain("-a"));
        assert!(!is_dns1123_subdomain("a..b"));
        assert!(is_dns_san("*.example.com"));
        assert!(!is_dns_san("a_b"));
    }
}
