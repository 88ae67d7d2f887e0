//! The pod-sandbox calls `reset` needs, as kubeadm's ListKubeContainers/RemoveContainers make
//! them: `ListPodSandbox` (no filter: the runtime's CRI namespace holds only the kubelet's pods),
//! then `StopPodSandbox` and `RemovePodSandbox` for each. Same hand-framed unary calls as the
//! probes; the list answer is read whole (it may span DATA frames) and decoded by hand.

use std::path::Path;
use std::time::Duration;

use super::{CriError, DATA, Status, exchange, field, parse_status, request_with};

/// `runtime.v1.RuntimeService/<method>` with a `{pod_sandbox_id = 1}` request.
pub(crate) fn sandbox_request(method: &str, id: &str) -> Vec<u8> {
    let mut msg = Vec::new();
    field(&mut msg, 1, id.as_bytes());
    request_with(&format!("/runtime.v1.RuntimeService/{method}"), &msg)
}

fn list_request() -> Vec<u8> {
    request_with("/runtime.v1.RuntimeService/ListPodSandbox", &[])
}

/// The ids of every pod sandbox the runtime holds.
pub(crate) fn list_over_unix_socket(socket: &Path, timeout: Duration) -> Result<Vec<String>, CriError> {
    let at = || socket.to_path_buf();
    exchange(socket, timeout, &list_request(), |buf| match whole_message(buf) {
        Some(Ok(msg)) => Some(Ok(sandbox_ids(&msg))),
        Some(Err(())) => Some(Err(CriError::Refused { socket: at(), why: "a malformed ListPodSandbox answer".into() })),
        None => match parse_status(buf) {
            Status::Ended(Some(0), _) => Some(Ok(Vec::new())),
            Status::Ended(code, msg) => Some(Err(CriError::Refused {
                socket: at(),
                why: format!("ListPodSandbox: gRPC status {}: {msg}", code.map_or("?".into(), |c| c.to_string())),
            })),
            Status::Refused(why) => Some(Err(CriError::Refused { socket: at(), why })),
            Status::Message | Status::Incomplete => None,
        },
    })
}

/// StopPodSandbox then RemovePodSandbox for `id`.
pub(crate) fn remove_over_unix_socket(socket: &Path, id: &str, timeout: Duration) -> Result<(), CriError> {
    for method in ["StopPodSandbox", "RemovePodSandbox"] {
        let at = || socket.to_path_buf();
        exchange(socket, timeout, &sandbox_request(method, id), |buf| match parse_status(buf) {
            Status::Message | Status::Ended(Some(0), _) => Some(Ok(())),
            Status::Ended(code, msg) => Some(Err(CriError::Refused {
                socket: at(),
                why: format!("{method} {id}: gRPC status {}: {msg}", code.map_or("?".into(), |c| c.to_string())),
            })),
            Status::Refused(why) => Some(Err(CriError::Refused { socket: at(), why })),
            Status::Incomplete => None,
        })?;
    }
    Ok(())
}

/// Stream 1's gRPC message once all its bytes are in: the DATA payloads joined, the 5-byte
/// prefix read. `None` while incomplete or when no DATA came; `Err` for a malformed answer.
fn whole_message(buf: &[u8]) -> Option<Result<Vec<u8>, ()>> {
    let mut data = Vec::new();
    let mut i = 0;
    while buf.len() >= i + 9 {
        let len = (usize::from(buf[i]) << 16) | (usize::from(buf[i + 1]) << 8) | usize::from(buf[i + 2]);
        let stream = u32::from_be_bytes([buf[i + 5], buf[i + 6], buf[i + 7], buf[i + 8]]) & 0x7fff_ffff;
        let payload = buf.get(i + 9..i + 9 + len)?;
        if buf[i + 3] == DATA && stream == 1 {
            data.extend_from_slice(payload);
        }
        i += 9 + len;
    }
    if data.len() < 5 {
        return None;
    }
    if data[0] != 0 {
        return Some(Err(()));
    }
    let n = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
    (data.len() >= 5 + n).then(|| Ok(data[5..5 + n].to_vec()))
}

/// A protobuf varint at `msg[*i..]`.
fn varint(msg: &[u8], i: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *msg.get(*i)?;
        *i += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The length-delimited fields numbered `number` in `msg` (other fields skipped by wire type).
fn fields(msg: &[u8], number: u64) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < msg.len() {
        let Some(tag) = varint(msg, &mut i) else { break };
        let skip = match tag & 7 {
            0 => varint(msg, &mut i).map(|_| 0),
            1 => Some(8),
            5 => Some(4),
            2 => varint(msg, &mut i).map(|n| n as usize),
            _ => None,
        };
        let Some(n) = skip else { break };
        let Some(bytes) = msg.get(i..i + n) else { break };
        if tag & 7 == 2 && tag >> 3 == number {
            out.push(bytes);
        }
        i += n;
    }
    out
}

/// ListPodSandboxResponse{items = 1: PodSandbox{id = 1, ...}}: the ids.
fn sandbox_ids(msg: &[u8]) -> Vec<String> {
    fields(msg, 1)
        .into_iter()
        .filter_map(|item| fields(item, 1).first().map(|id| String::from_utf8_lossy(id).into_owned()))
        .collect()
}

// Used by the tests to build answers; kept next to the parser they check.
#[cfg(test)]
pub(crate) fn answer(message: &[u8]) -> Vec<u8> {
    use super::{END_HEADERS, END_STREAM, HEADERS, SETTINGS, frame};
    let mut data = vec![0];
    data.extend_from_slice(&(message.len() as u32).to_be_bytes());
    data.extend_from_slice(message);
    let mut buf = frame(SETTINGS, 0, 0, &[]);
    buf.extend(frame(HEADERS, END_HEADERS, 1, &[0x88]));
    let half = data.len() / 2;
    buf.extend(frame(DATA, 0, 1, &data[..half]));
    buf.extend(frame(DATA, END_STREAM, 1, &data[half..]));
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(id: &str, name: &str) -> Vec<u8> {
        let mut meta = Vec::new();
        field(&mut meta, 1, name.as_bytes());
        let mut s = Vec::new();
        field(&mut s, 1, id.as_bytes());
        field(&mut s, 2, &meta);
        s.extend_from_slice(&[0x18, 0x01]); // state = SANDBOX_NOTREADY (varint)
        s.extend_from_slice(&[0x20, 0xe8, 0x07]); // created_at (varint)
        s
    }

    #[test]
    fn a_list_split_over_data_frames_gives_every_id() {
        let mut msg = Vec::new();
        field(&mut msg, 1, &sandbox(&"a".repeat(64), "etcd-cp-1"));
        field(&mut msg, 1, &sandbox("b2", "kube-apiserver-cp-1"));
        let buf = answer(&msg);
        assert_eq!(whole_message(&buf[..buf.len() - 3]), None, "incomplete");
        let got = whole_message(&buf).unwrap().unwrap();
        assert_eq!(sandbox_ids(&got), vec!["a".repeat(64), "b2".into()]);
        assert!(sandbox_ids(&[]).is_empty());
    }

    #[test]
    fn requests_carry_the_method_and_id() {
        let r = sandbox_request("StopPodSandbox", "abc123");
        assert!(r.windows(14).any(|w| w == b"StopPodSandbox"));
        assert!(r.ends_with(&[0x0a, 6, b'a', b'b', b'c', b'1', b'2', b'3']));
    }
}
