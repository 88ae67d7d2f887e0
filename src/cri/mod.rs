//! The CRI probes: one gRPC call (`runtime.v1.RuntimeService/Version`, or `/RuntimeConfig` for
//! kubeadm's ContainerRuntimeVersion check) over HTTP/2 on the runtime's unix socket,
//! hand-framed (the requests are fixed). An answer is a DATA frame carrying a gRPC message; for
//! RuntimeConfig a trailers-only reply's `grpc-status` is read too (see `hpack`), because
//! Unimplemented (12) is what an older runtime says. A leaf: preflight and host use it.

mod hpack;
mod pods;

pub(crate) use pods::{list_over_unix_socket as pod_sandboxes, remove_over_unix_socket as remove_pod_sandbox};

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
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// gRPC's status code for a method the server does not have.
const UNIMPLEMENTED: u32 = 12;
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
pub(crate) fn version_request() -> Vec<u8> {
    request("/runtime.v1.RuntimeService/Version")
}

/// The bytes of a complete RuntimeConfig request on stream 1.
pub(crate) fn runtime_config_request() -> Vec<u8> {
    request("/runtime.v1.RuntimeService/RuntimeConfig")
}

/// The bytes of an ImageService call whose request is `{image: ImageSpec{image}}` (ImageStatus,
/// PullImage).
pub(crate) fn image_request(method: &str, image: &str) -> Vec<u8> {
    let mut spec = Vec::new();
    field(&mut spec, 1, image.as_bytes());
    let mut msg = Vec::new();
    field(&mut msg, 1, &spec);
    request_with(&format!("/runtime.v1.ImageService/{method}"), &msg)
}

/// A protobuf length-delimited field.
fn field(out: &mut Vec<u8>, number: u8, bytes: &[u8]) {
    out.push(number << 3 | 2);
    let mut n = bytes.len();
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(bytes);
}

/// A unary call with an empty request message (both calls take one) on stream 1.
fn request(path: &str) -> Vec<u8> {
    request_with(path, &[])
}

fn request_with(path: &str, message: &[u8]) -> Vec<u8> {
    let mut headers = Vec::new();
    for (n, v) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ] {
        literal(&mut headers, n, v);
    }
    let mut out = PREFACE.to_vec();
    out.extend(frame(SETTINGS, 0, 0, &[]));
    out.extend(frame(HEADERS, END_HEADERS, 1, &headers));
    // The gRPC prefix (not compressed, length) and the message; requests are far below the
    // 16 KiB frame limit.
    let mut data = vec![0];
    data.extend_from_slice(&(message.len() as u32).to_be_bytes());
    data.extend_from_slice(message);
    out.extend(frame(DATA, END_STREAM, 1, &data));
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

/// Why the CRI runtime did not answer a call. Names the socket.
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
pub(crate) fn version_over_unix_socket(socket: &Path, timeout: Duration) -> Result<String, CriError> {
    let at = || socket.to_path_buf();
    exchange(socket, timeout, &version_request(), |buf| match parse_reply(buf) {
        Reply::Answer(v) if v.is_empty() => Some(Ok("answered the CRI Version call".into())),
        Reply::Answer(v) => Some(Ok(v)),
        Reply::NoMessage => Some(Ok("answered over gRPC, but without Version data".into())),
        Reply::Refused(why) => Some(Err(CriError::Refused { socket: at(), why })),
        Reply::Incomplete => None,
    })
}

/// Connects, sends the RuntimeConfig call: `Ok(false)` when the runtime answers Unimplemented
/// (as kubeadm's `IsRuntimeConfigImplemented`), an error for any other failure.
pub(crate) fn runtime_config_over_unix_socket(socket: &Path, timeout: Duration) -> Result<bool, CriError> {
    let at = || socket.to_path_buf();
    exchange(socket, timeout, &runtime_config_request(), |buf| match parse_status(buf) {
        Status::Message | Status::Ended(Some(0), _) => Some(Ok(true)),
        Status::Ended(Some(UNIMPLEMENTED), _) => Some(Ok(false)),
        Status::Ended(Some(code), msg) => Some(Err(CriError::Refused {
            socket: at(),
            why: format!("failed to call RuntimeConfig gRPC method: gRPC status {code}: {msg}"),
        })),
        Status::Ended(None, _) => Some(Err(CriError::Refused {
            socket: at(),
            why: "the RuntimeConfig call ended without a gRPC status".into(),
        })),
        Status::Refused(why) => Some(Err(CriError::Refused { socket: at(), why })),
        Status::Incomplete => None,
    })
}

/// Asks the runtime whether it holds `image` (the kubelet's own question before a pull):
/// ImageStatusResponse carries an `image` field only when it does.
pub(crate) fn image_present_over_unix_socket(socket: &Path, image: &str, timeout: Duration) -> Result<bool, CriError> {
    let at = || socket.to_path_buf();
    exchange(socket, timeout, &image_request("ImageStatus", image), |buf| match parse_status(buf) {
        Status::Message => first_message_len(buf).map(|n| Ok(n > 0)),
        Status::Ended(Some(0), _) => Some(Ok(false)),
        Status::Ended(code, msg) => Some(Err(failed(at(), "ImageStatus", image, code, &msg))),
        Status::Refused(why) => Some(Err(CriError::Refused { socket: at(), why })),
        Status::Incomplete => None,
    })
}

/// Has the runtime pull `image` from its registry (kubeadm's preflight pull), waiting for it.
pub(crate) fn pull_image_over_unix_socket(socket: &Path, image: &str, timeout: Duration) -> Result<(), CriError> {
    let at = || socket.to_path_buf();
    exchange(socket, timeout, &image_request("PullImage", image), |buf| match parse_status(buf) {
        Status::Message | Status::Ended(Some(0), _) => Some(Ok(())),
        Status::Ended(code, msg) => Some(Err(failed(at(), "PullImage", image, code, &msg))),
        Status::Refused(why) => Some(Err(CriError::Refused { socket: at(), why })),
        Status::Incomplete => None,
    })
}

fn failed(socket: PathBuf, method: &str, image: &str, code: Option<u32>, msg: &str) -> CriError {
    let code = code.map_or_else(|| "?".to_string(), |c| c.to_string());
    CriError::Refused { socket, why: format!("{method} {image}: gRPC status {code}: {msg}") }
}

/// The length the gRPC prefix of stream 1's first message declares.
fn first_message_len(buf: &[u8]) -> Option<u32> {
    let mut i = 0;
    while buf.len() >= i + 9 {
        let len = (usize::from(buf[i]) << 16) | (usize::from(buf[i + 1]) << 8) | usize::from(buf[i + 2]);
        let stream = u32::from_be_bytes([buf[i + 5], buf[i + 6], buf[i + 7], buf[i + 8]]) & 0x7fff_ffff;
        let payload = buf.get(i + 9..i + 9 + len)?;
        if buf[i + 3] == DATA && stream == 1 && payload.len() >= 5 {
            return Some(u32::from_be_bytes([payload[1], payload[2], payload[3], payload[4]]));
        }
        i += 9 + len;
    }
    None
}

/// How a call on stream 1 ended, as far as the frames so far tell.
#[derive(Debug, PartialEq)]
pub enum Status {
    /// A gRPC message (DATA) arrived: the call succeeded.
    Message,
    /// The stream ended without a message: `grpc-status` (if readable) and `grpc-message`.
    Ended(Option<u32>, String),
    Incomplete,
    Refused(String),
}

/// Reads the server's frames for the end of stream 1, decoding its header blocks.
pub(crate) fn parse_status(buf: &[u8]) -> Status {
    let mut decoder = hpack::Decoder::default();
    let (mut block, mut ends) = (Vec::new(), false);
    let mut i = 0;
    while buf.len() >= i + 9 {
        let len = (usize::from(buf[i]) << 16) | (usize::from(buf[i + 1]) << 8) | usize::from(buf[i + 2]);
        let (kind, flags) = (buf[i + 3], buf[i + 4]);
        let stream = u32::from_be_bytes([buf[i + 5], buf[i + 6], buf[i + 7], buf[i + 8]]) & 0x7fff_ffff;
        if len > 1 << 24 || (i == 0 && kind != SETTINGS) {
            return Status::Refused("the socket does not speak HTTP/2 (gRPC)".into());
        }
        let Some(payload) = buf.get(i + 9..i + 9 + len) else { return Status::Incomplete };
        i += 9 + len;
        match kind {
            DATA if stream == 1 && payload.len() >= 5 => return Status::Message,
            RST_STREAM if stream == 1 => return Status::Refused("the runtime reset the call".into()),
            GOAWAY => return Status::Refused("the runtime closed the connection (GOAWAY)".into()),
            HEADERS | CONTINUATION if stream == 1 => {
                if kind == HEADERS {
                    let Some(fragment) = header_fragment(payload, flags) else {
                        return Status::Refused("malformed HEADERS frame".into());
                    };
                    block = fragment.to_vec();
                    ends = flags & END_STREAM != 0;
                } else {
                    block.extend_from_slice(payload);
                }
                if flags & END_HEADERS == 0 {
                    continue;
                }
                let Some(fields) = decoder.block(&block) else {
                    return Status::Refused("undecodable response headers".into());
                };
                if ends {
                    let get = |n: &str| fields.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
                    let code = get("grpc-status").and_then(|v| v.parse().ok());
                    return Status::Ended(code, get("grpc-message").unwrap_or_default());
                }
            }
            _ => {}
        }
    }
    Status::Incomplete
}

/// A HEADERS payload without its padding and priority fields.
fn header_fragment(payload: &[u8], flags: u8) -> Option<&[u8]> {
    let (mut start, mut end) = (0, payload.len());
    if flags & PADDED != 0 {
        start = 1;
        end = end.checked_sub(usize::from(*payload.first()?))?;
    }
    if flags & PRIORITY != 0 {
        start += 5;
    }
    payload.get(start..end)
}

/// Connects, sends `request`, acknowledges the server's control frames, and feeds everything
/// read to `done` until it decides (bounded by `timeout`).
fn exchange<T>(
    socket: &Path,
    timeout: Duration,
    request: &[u8],
    done: impl Fn(&[u8]) -> Option<Result<T, CriError>>,
) -> Result<T, CriError> {
    let at = || socket.to_path_buf();
    let mut s =
        std::os::unix::net::UnixStream::connect(socket).map_err(|source| CriError::Connect { socket: at(), source })?;
    let deadline = Instant::now() + timeout;
    s.set_write_timeout(Some(timeout)).map_err(|source| CriError::Timeout { socket: at(), source })?;
    s.write_all(request).map_err(|source| CriError::Send { socket: at(), source })?;
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
        if let Some(r) = done(&buf) {
            return r;
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

    /// A trailers-only reply as grpc-go sends it: `:status` indexed, new names Huffman-coded.
    fn trailers_only(status: &str) -> Vec<u8> {
        let mut block = vec![0x88];
        for (n, v) in [("content-type", "application/grpc"), ("grpc-status", status), ("grpc-message", "unknown")] {
            block.push(0x40);
            block.extend(super::hpack::huffman_literal(n));
            block.push(v.len() as u8);
            block.extend(v.as_bytes());
        }
        let mut buf = frame(SETTINGS, 0, 0, &[]);
        // Split over HEADERS and CONTINUATION, as a server may.
        buf.extend(frame(HEADERS, END_STREAM, 1, &block[..4]));
        buf.extend(frame(CONTINUATION, END_HEADERS, 1, &block[4..]));
        buf
    }

    #[test]
    fn runtime_config_status_is_read_from_the_trailers() {
        assert_eq!(parse_status(&trailers_only("12")), Status::Ended(Some(12), "unknown".into()));
        assert_eq!(parse_status(&trailers_only("14")), Status::Ended(Some(14), "unknown".into()));
        let cut = trailers_only("12");
        assert_eq!(parse_status(&cut[..cut.len() - 1]), Status::Incomplete);
        let mut ok = frame(SETTINGS, 0, 0, &[]);
        ok.extend(frame(HEADERS, END_HEADERS, 1, &[0x88]));
        ok.extend(frame(DATA, 0, 1, &[0, 0, 0, 0, 2, 0x0a, 0]));
        assert_eq!(parse_status(&ok), Status::Message);
        assert!(runtime_config_request().windows(13).any(|w| w == b"RuntimeConfig"));
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
