//! A deliberately small HTTP/1.1 implementation: request parsing with
//! Content-Length or chunked bodies, keep-alive, and fixed-length or chunked
//! responses. Enough for Kubernetes clients; nothing more.

use std::io::{self, BufRead, BufReader, Read, Write};

const MAX_HEADER_BYTES: usize = 64 * 1024;
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone, Default)]
pub struct Request {
    pub method: String,
    /// Percent-decoded path without the query string.
    pub path: String,
    pub raw_query: String,
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    http10: bool,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn query_param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn keep_alive(&self) -> bool {
        match self.header("connection") {
            Some(c) if c.eq_ignore_ascii_case("close") => false,
            Some(c) if c.eq_ignore_ascii_case("keep-alive") => true,
            _ => !self.http10,
        }
    }
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

fn percent_decode(s: &str, plus_is_space: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if plus_is_space => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn read_line<R: BufRead>(r: &mut R, budget: &mut usize) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    let n = r.by_ref().take(*budget as u64 + 1).read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if n > *budget {
        return Err(bad("request header too large"));
    }
    *budget -= n;
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    String::from_utf8(line).map(Some).map_err(|_| bad("header is not UTF-8"))
}

/// Reads one request; Ok(None) when the peer closed the connection cleanly
/// between requests.
pub fn read_request<S: Read + Write>(r: &mut BufReader<S>) -> io::Result<Option<Request>> {
    let mut budget = MAX_HEADER_BYTES;
    // Tolerate stray empty lines between requests (RFC 9112 section 2.2).
    let request_line = loop {
        match read_line(r, &mut budget)? {
            None => return Ok(None),
            Some(l) if l.is_empty() => continue,
            Some(l) => break l,
        }
    };
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad("malformed request line"));
    };
    let mut req = Request { method: method.to_string(), http10: version == "HTTP/1.0", ..Request::default() };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    req.path = percent_decode(path, false);
    req.raw_query = query.to_string();
    req.query = query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k, true), percent_decode(v, true))
        })
        .collect();
    loop {
        let Some(line) = read_line(r, &mut budget)? else { return Err(bad("EOF in headers")) };
        if line.is_empty() {
            break;
        }
        let Some((k, v)) = line.split_once(':') else { return Err(bad("malformed header")) };
        req.headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    // curl and some other clients wait for this before sending a body.
    if req.header("expect").is_some_and(|e| e.eq_ignore_ascii_case("100-continue")) {
        r.get_mut().write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        r.get_mut().flush()?;
    }
    let chunked = req.header("transfer-encoding").is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
    if chunked {
        req.body = read_chunked_body(r)?;
    } else if let Some(len) = req.header("content-length") {
        let len: usize = len.parse().map_err(|_| bad("bad Content-Length"))?;
        if len > MAX_BODY_BYTES {
            return Err(bad("body too large"));
        }
        req.body = vec![0; len];
        r.read_exact(&mut req.body)?;
    }
    Ok(Some(req))
}

fn read_chunked_body<R: BufRead>(r: &mut R) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut budget = 1024;
        let Some(size_line) = read_line(r, &mut budget)? else { return Err(bad("EOF in chunked body")) };
        let size_hex = size_line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16).map_err(|_| bad("bad chunk size"))?;
        if size == 0 {
            // Trailers, then the final empty line.
            loop {
                let mut budget = MAX_HEADER_BYTES;
                match read_line(r, &mut budget)? {
                    Some(l) if !l.is_empty() => continue,
                    _ => return Ok(body),
                }
            }
        }
        if body.len() + size > MAX_BODY_BYTES {
            return Err(bad("body too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..])?;
        let mut crlf = [0u8; 2];
        r.read_exact(&mut crlf)?;
    }
}

pub fn reason_phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        410 => "Gone",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        500 => "Internal Server Error",
        _ => "",
    }
}

pub fn write_response<W: Write>(
    w: &mut W,
    code: u16,
    content_type: &str,
    body: &[u8],
    keep_alive: bool,
) -> io::Result<()> {
    let connection = if keep_alive { "keep-alive" } else { "close" };
    let head = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Cache-Control: no-cache, private\r\nConnection: {connection}\r\n\r\n",
        reason_phrase(code),
        body.len()
    );
    // One write for head and body keeps it to one TLS record for small
    // responses.
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    w.write_all(&out)?;
    w.flush()
}

/// A chunked (streaming) response, used by watch.
pub struct Chunked<'a, W: Write> {
    w: &'a mut W,
}

impl<'a, W: Write> Chunked<'a, W> {
    pub fn start(w: &'a mut W, content_type: &str) -> io::Result<Self> {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\
             Cache-Control: no-cache, private\r\n\r\n"
        );
        w.write_all(head.as_bytes())?;
        w.flush()?;
        Ok(Chunked { w })
    }

    pub fn send(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let mut out = format!("{:x}\r\n", data.len()).into_bytes();
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
        self.w.write_all(&out)?;
        self.w.flush()
    }

    pub fn finish(self) -> io::Result<()> {
        self.w.write_all(b"0\r\n\r\n")?;
        self.w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn parses_requests() {
        let raw = b"GET /api/v1/namespaces/a%3Ab/configmaps?labelSelector=a%3Db&watch=true HTTP/1.1\r\nHost: x\r\n\r\n\
POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}\
PUT /y HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
        let mut r = BufReader::new(Cursor::new(raw.to_vec()));
        let a = read_request(&mut r).unwrap().unwrap();
        assert_eq!(a.path, "/api/v1/namespaces/a:b/configmaps");
        assert_eq!(a.query_param("labelSelector"), Some("a=b"));
        assert!(a.keep_alive());
        let b = read_request(&mut r).unwrap().unwrap();
        assert_eq!(b.body, b"{}");
        let c = read_request(&mut r).unwrap().unwrap();
        assert_eq!(c.body, b"{}");
        assert!(!c.keep_alive());
        assert!(read_request(&mut r).unwrap().is_none());
        let mut r = BufReader::new(Cursor::new(
            b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n".to_vec(),
        ));
        read_request(&mut r).unwrap().unwrap();
        assert!(String::from_utf8_lossy(r.get_ref().get_ref()).ends_with("HTTP/1.1 100 Continue\r\n\r\n"));
    }

    #[test]
    fn percent() {
        assert_eq!(percent_decode("a%2", false), "a%2");
        assert_eq!(percent_decode("a%41+", true), "aA ");
        assert_eq!(percent_decode("%zz", false), "%zz");
    }
}
