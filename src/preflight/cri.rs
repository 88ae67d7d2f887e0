//! The CRI probe: one gRPC `runtime.v1.RuntimeService/Version` call over HTTP/2 on the runtime's
//! unix socket, hand-framed (the request is fixed, and we only need to see the reply's DATA).
//! We do not decode the reply's HPACK headers; an answer is a DATA frame carrying a gRPC
//! message, whose protobuf strings give the runtime name and version.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// HPACK "literal header field without indexing, new name", no Huffman coding.
fn literal(out: &mut Vec<u8>, name: &str, value: &str) {
    out.push(0x00);
    for s in [name, value] {
        // Invariant: every string here is shorter than 127 bytes (one-byte length prefix).
        out.push(s.len() as u8);
        out.extend_from_slice(s.as_bytes());
    }
}

/// The bytes of a complete Version request on stream 1.
pub fn version_request() -> Vec<u8> {
    let mut headers = Vec::new();
    for (n, v) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/runtime.v1.RuntimeService/Version"),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ] {
        literal(&mut headers, n, v);
    }
    let mut out = PREFACE.to_vec();
    out.extend(frame(SETTINGS, 0, 0, &[]));
    out.extend(frame(HEADERS, END_HEADERS, 1, &headers));
    // An empty VersionRequest message: gRPC prefix (not compressed, length 0).
    out.extend(frame(DATA, END_STREAM, 1, &[0, 0, 0, 0, 0]));
    out
}

/// What the runtime's reply frames said.
#[derive(Debug, PartialEq)]
pub enum Reply {
    /// A gRPC message arrived: the decoded "name version" (may be empty if unparseable).
    Answer(String),
    /// The stream ended without a message (e.g. the RPC is unimplemented there).
    NoMessage,
    /// Not enough bytes yet.
    Incomplete,
    /// The peer is not speaking HTTP/2 to us, or refused the stream.
    Refused(String),
}

/// Parses the server's frames collected so far.
pub fn parse_reply(buf: &[u8]) -> Reply {
    let mut i = 0;
    let mut saw_frame = false;
    while buf.len() >= i + 9 {
        let len = (usize::from(buf[i]) << 16) | (usize::from(buf[i + 1]) << 8) | usize::from(buf[i + 2]);
        let (kind, flags) = (buf[i + 3], buf[i + 4]);
        let stream = u32::from_be_bytes([buf[i + 5], buf[i + 6], buf[i + 7], buf[i + 8]]) & 0x7fff_ffff;
        if len > 1 << 24 || (!saw_frame && kind != SETTINGS) {
            return Reply::Refused("the socket does not speak HTTP/2 (gRPC)".into());
        }
        saw_frame = true;
        if buf.len() < i + 9 + len {
            return Reply::Incomplete;
        }
        let payload = &buf[i + 9..i + 9 + len];
        match kind {
            DATA if stream == 1 && payload.len() >= 5 => return Reply::Answer(decode_version(&payload[5..])),
            RST_STREAM if stream == 1 => return Reply::Refused("the runtime reset the Version call".into()),
            GOAWAY => return Reply::Refused("the runtime closed the connection (GOAWAY)".into()),
            HEADERS if stream == 1 && flags & END_STREAM != 0 => return Reply::NoMessage,
            _ => {}
        }
        i += 9 + len;
    }
    Reply::Incomplete
}

/// VersionResponse: version=1, runtime_name=2, runtime_version=3, runtime_api_version=4 (strings).
fn decode_version(msg: &[u8]) -> String {
    let mut fields: [String; 5] = Default::default();
    let mut i = 0;
    while i < msg.len() {
        let tag = msg[i];
        i += 1;
        if tag & 0x7 != 2 || i >= msg.len() {
            break;
        }
        let len = usize::from(msg[i]);
        i += 1;
        if msg[i - 1] & 0x80 != 0 || i + len > msg.len() {
            break;
        }
        let field = usize::from(tag >> 3);
        if field < fields.len() {
            fields[field] = String::from_utf8_lossy(&msg[i..i + len]).into_owned();
        }
        i += len;
    }
    format!("{} {}", fields[2], fields[3]).trim().to_string()
}

/// Why the CRI runtime did not answer the Version call. Names the socket.
#[derive(Debug, thiserror::Error)]
pub enum CriError {
    #[error("cannot connect to {}: {source}", .socket.display())]
    Connect { socket: PathBuf, source: std::io::Error },
    #[error("setting a timeout on the connection to {}: {source}", .socket.display())]
    Timeout { socket: PathBuf, source: std::io::Error },
    #[error("sending to {}: {source}", .socket.display())]
    Send { socket: PathBuf, source: std::io::Error },
    #[error("reading from {}: {source}", .socket.display())]
    Read { socket: PathBuf, source: std::io::Error },
    #[error("{} accepted the connection but did not answer within {timeout:?}", .socket.display())]
    NoAnswer { socket: PathBuf, timeout: Duration },
    #[error("{} closed the connection without answering", .socket.display())]
    Closed { socket: PathBuf },
    /// The peer answered, but not as a CRI runtime would (`why` from [`parse_reply`]).
    #[error("{}: {why}", .socket.display())]
    Refused { socket: PathBuf, why: String },
}

/// Connects, sends the Version call, and waits (bounded) for the reply.
pub fn version_over_unix_socket(socket: &Path, timeout: Duration) -> Result<String, CriError> {
    let at = || socket.to_path_buf();
    let mut s =
        std::os::unix::net::UnixStream::connect(socket).map_err(|source| CriError::Connect { socket: at(), source })?;
    let deadline = Instant::now() + timeout;
    s.set_write_timeout(Some(timeout)).map_err(|source| CriError::Timeout { socket: at(), source })?;
    s.write_all(&version_request()).map_err(|source| CriError::Send { socket: at(), source })?;
    let mut buf = Vec::new();
    let mut acked = 0;
    let mut chunk = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(CriError::NoAnswer { socket: at(), timeout });
        }
        s.set_read_timeout(Some(left)).map_err(|source| CriError::Timeout { socket: at(), source })?;
        let n = match s.read(&mut chunk) {
            Ok(0) => return Err(CriError::Closed { socket: at() }),
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(source) => return Err(CriError::Read { socket: at(), source }),
        };
        buf.extend_from_slice(&chunk[..n]);
        // Acknowledge the server's SETTINGS and PINGs so a strict server keeps talking.
        let (acks, next) = control_acks(&buf, acked);
        acked = next;
        if !acks.is_empty() {
            let _ = s.write_all(&acks);
        }
        match parse_reply(&buf) {
            Reply::Answer(v) if v.is_empty() => return Ok("answered the CRI Version call".into()),
            Reply::Answer(v) => return Ok(v),
            Reply::NoMessage => return Ok("answered over gRPC, but without Version data".into()),
            Reply::Refused(why) => return Err(CriError::Refused { socket: at(), why }),
            Reply::Incomplete => {}
        }
    }
}

/// The acknowledgements owed for every complete frame in `buf` from offset `from` on (frames can
/// arrive several to a read, or split across reads), and the offset of the first frame not yet
/// complete.
fn control_acks(buf: &[u8], from: usize) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut i = from;
    while buf.len() >= i + 9 {
        let len = (usize::from(buf[i]) << 16) | (usize::from(buf[i + 1]) << 8) | usize::from(buf[i + 2]);
        if buf.len() < i + 9 + len {
            break;
        }
        let (kind, flags, payload) = (buf[i + 3], buf[i + 4], &buf[i + 9..i + 9 + len]);
        if flags & ACK == 0 {
            match kind {
                SETTINGS => out.extend(frame(SETTINGS, ACK, 0, &[])),
                PING if len == 8 => out.extend(frame(PING, ACK, 0, payload)),
                _ => {}
            }
        }
        i += 9 + len;
    }
    (out, i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_starts_with_the_preface_and_frames_parse() {
        let r = version_request();
        assert!(r.starts_with(PREFACE));
        assert_eq!(r[PREFACE.len() + 3], SETTINGS);
    }

    #[test]
    fn parses_a_version_answer() {
        let msg = [0x12, 10, b'c', b'o', b'n', b't', b'a', b'i', b'n', b'e', b'r', b'd', 0x1a, 3, b'1', b'.', b'7'];
        let mut data = vec![0, 0, 0, 0, msg.len() as u8];
        data.extend_from_slice(&msg);
        let mut buf = frame(SETTINGS, 0, 0, &[]);
        buf.extend(frame(HEADERS, END_HEADERS, 1, &[0x88]));
        assert_eq!(parse_reply(&buf), Reply::Incomplete);
        buf.extend(frame(DATA, 0, 1, &data));
        assert_eq!(parse_reply(&buf), Reply::Answer("containerd 1.7".into()));
    }

    #[test]
    fn every_settings_and_ping_is_acknowledged_once_even_when_split() {
        let mut buf = frame(SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100]);
        buf.extend(frame(SETTINGS, ACK, 0, &[]));
        buf.extend(frame(PING, 0, 0, b"12345678"));
        let cut = buf.len() - 3;
        let (acks, at) = control_acks(&buf[..cut], 0);
        assert_eq!(acks, frame(SETTINGS, ACK, 0, &[]), "the split PING is not answered yet");
        let (acks, end) = control_acks(&buf, at);
        assert_eq!(acks, frame(PING, ACK, 0, b"12345678"));
        assert_eq!(end, buf.len());
        assert!(control_acks(&buf, end).0.is_empty(), "nothing is acknowledged twice");
    }

    #[test]
    fn non_http2_peer_is_refused() {
        assert!(matches!(parse_reply(b"HTTP/1.1 400 Bad Request\r\n\r\n"), Reply::Refused(_)));
    }

    #[test]
    fn errors_name_the_socket() {
        let d = tempfile::tempdir().unwrap();
        let sock = d.path().join("containerd.sock");
        let e = version_over_unix_socket(&sock, Duration::from_millis(100)).unwrap_err();
        assert!(matches!(e, CriError::Connect { .. }), "{e:?}");
        assert!(e.to_string().starts_with(&format!("cannot connect to {}: ", sock.display())), "{e}");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let e = version_over_unix_socket(&sock, Duration::from_millis(200)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{} accepted the connection but did not answer within 200ms", sock.display())
        );
    }
}
