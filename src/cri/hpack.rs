//! Just enough HPACK (RFC 7541) to read a gRPC status from a response's header blocks:
//! integers, literal and Huffman-coded strings, and the dynamic table's names. Static-table
//! entries are never `grpc-status`, so their text is not needed.

/// Entries in RFC 7541's static table (indexes 1..=61).
const STATIC_LEN: usize = 61;

/// The header fields decoded so far on one connection: the dynamic table, newest first.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    dynamic: Vec<(String, String)>,
}

impl Decoder {
    /// Decodes one header block; fields whose name is in the static table come back with an
    /// empty name. `None` on a malformed block.
    pub fn block(&mut self, mut b: &[u8]) -> Option<Vec<(String, String)>> {
        let mut out = Vec::new();
        while let Some(&first) = b.first() {
            if first & 0x80 != 0 {
                let (i, rest) = int(b, 7)?;
                out.push(self.entry(i)?);
                b = rest;
            } else if first & 0xe0 == 0x20 {
                // A table size update: we keep every entry (a probe reads a few small blocks).
                b = int(b, 5)?.1;
            } else {
                let (index, prefix) = if first & 0x40 != 0 { (true, 6) } else { (false, 4) };
                let (i, rest) = int(b, prefix)?;
                let (name, rest) = if i == 0 { string(rest)? } else { (self.entry(i)?.0, rest) };
                let (value, rest) = string(rest)?;
                if index {
                    self.dynamic.insert(0, (name.clone(), value.clone()));
                }
                out.push((name, value));
                b = rest;
            }
        }
        Some(out)
    }

    fn entry(&self, i: usize) -> Option<(String, String)> {
        match i {
            0 => None,
            1..=STATIC_LEN => Some((String::new(), String::new())),
            _ => self.dynamic.get(i - STATIC_LEN - 1).cloned(),
        }
    }
}

/// An integer with an `n`-bit prefix, and the bytes after it.
fn int(b: &[u8], n: u32) -> Option<(usize, &[u8])> {
    let max = (1usize << n) - 1;
    let mut v = usize::from(*b.first()?) & max;
    let mut i = 1;
    if v == max {
        let mut shift = 0;
        loop {
            let byte = *b.get(i)?;
            i += 1;
            v = v.checked_add(usize::from(byte & 0x7f).checked_shl(shift)?)?;
            shift += 7;
            if byte & 0x80 == 0 || shift > 28 {
                break;
            }
        }
    }
    Some((v, &b[i..]))
}

/// A string literal (raw or Huffman-coded), and the bytes after it.
fn string(b: &[u8]) -> Option<(String, &[u8])> {
    let huffman = *b.first()? & 0x80 != 0;
    let (len, rest) = int(b, 7)?;
    let raw = rest.get(..len)?;
    let s = if huffman { huffman_decode(raw)? } else { raw.to_vec() };
    Some((String::from_utf8_lossy(&s).into_owned(), &rest[len..]))
}

fn huffman_decode(b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let (mut code, mut len) = (0u32, 0u8);
    for bit in b.iter().flat_map(|byte| (0..8).rev().map(move |i| (byte >> i) & 1)) {
        code = (code << 1) | u32::from(bit);
        len += 1;
        if let Some(sym) = HUFFMAN.iter().position(|&(c, l)| l == len && c == code) {
            out.push(u8::try_from(sym).ok()?);
            (code, len) = (0, 0);
        } else if len > 30 {
            return None;
        }
    }
    // What is left must be padding: at most 7 bits, all ones (the EOS prefix).
    (len < 8 && code == (1u32 << len) - 1).then_some(out)
}

/// A Huffman-coded string literal (for tests: what Go's encoder sends for header names).
#[cfg(test)]
pub fn huffman_literal(s: &str) -> Vec<u8> {
    let (mut bits, mut n, mut out) = (0u64, 0u32, Vec::new());
    for b in s.bytes() {
        let (code, len) = HUFFMAN[usize::from(b)];
        bits = (bits << len) | u64::from(code);
        n += u32::from(len);
        while n >= 8 {
            out.push((bits >> (n - 8)) as u8);
            n -= 8;
        }
    }
    if n > 0 {
        out.push(((bits << (8 - n)) as u8) | ((1u8 << (8 - n)) - 1));
    }
    let mut lit = vec![0x80 | out.len() as u8];
    lit.extend(out);
    lit
}

/// RFC 7541 Appendix B: (code, bit length) for bytes 0..=255.
#[rustfmt::skip]
const HUFFMAN: [(u32, u8); 256] = [
    (0x1ff8, 13), (0x7fffd8, 23), (0xfffffe2, 28), (0xfffffe3, 28), (0xfffffe4, 28), (0xfffffe5, 28),
    (0xfffffe6, 28), (0xfffffe7, 28), (0xfffffe8, 28), (0xffffea, 24), (0x3ffffffc, 30), (0xfffffe9, 28),
    (0xfffffea, 28), (0x3ffffffd, 30), (0xfffffeb, 28), (0xfffffec, 28), (0xfffffed, 28), (0xfffffee, 28),
    (0xfffffef, 28), (0xffffff0, 28), (0xffffff1, 28), (0xffffff2, 28), (0x3ffffffe, 30), (0xffffff3, 28),
    (0xffffff4, 28), (0xffffff5, 28), (0xffffff6, 28), (0xffffff7, 28), (0xffffff8, 28), (0xffffff9, 28),
    (0xffffffa, 28), (0xffffffb, 28), (0x14, 6), (0x3f8, 10), (0x3f9, 10), (0xffa, 12),
    (0x1ff9, 13), (0x15, 6), (0xf8, 8), (0x7fa, 11), (0x3fa, 10), (0x3fb, 10),
    (0xf9, 8), (0x7fb, 11), (0xfa, 8), (0x16, 6), (0x17, 6), (0x18, 6),
    (0x0, 5), (0x1, 5), (0x2, 5), (0x19, 6), (0x1a, 6), (0x1b, 6),
    (0x1c, 6), (0x1d, 6), (0x1e, 6), (0x1f, 6), (0x5c, 7), (0xfb, 8),
    (0x7ffc, 15), (0x20, 6), (0xffb, 12), (0x3fc, 10), (0x1ffa, 13), (0x21, 6),
    (0x5d, 7), (0x5e, 7), (0x5f, 7), (0x60, 7), (0x61, 7), (0x62, 7),
    (0x63, 7), (0x64, 7), (0x65, 7), (0x66, 7), (0x67, 7), (0x68, 7),
    (0x69, 7), (0x6a, 7), (0x6b, 7), (0x6c, 7), (0x6d, 7), (0x6e, 7),
    (0x6f, 7), (0x70, 7), (0x71, 7), (0x72, 7), (0xfc, 8), (0x73, 7),
    (0xfd, 8), (0x1ffb, 13), (0x7fff0, 19), (0x1ffc, 13), (0x3ffc, 14), (0x22, 6),
    (0x7ffd, 15), (0x3, 5), (0x23, 6), (0x4, 5), (0x24, 6), (0x5, 5),
    (0x25, 6), (0x26, 6), (0x27, 6), (0x6, 5), (0x74, 7), (0x75, 7),
    (0x28, 6), (0x29, 6), (0x2a, 6), (0x7, 5), (0x2b, 6), (0x76, 7),
    (0x2c, 6), (0x8, 5), (0x9, 5), (0x2d, 6), (0x77, 7), (0x78, 7),
    (0x79, 7), (0x7a, 7), (0x7b, 7), (0x7ffe, 15), (0x7fc, 11), (0x3ffd, 14),
    (0x1ffd, 13), (0xffffffc, 28), (0xfffe6, 20), (0x3fffd2, 22), (0xfffe7, 20), (0xfffe8, 20),
    (0x3fffd3, 22), (0x3fffd4, 22), (0x3fffd5, 22), (0x7fffd9, 23), (0x3fffd6, 22), (0x7fffda, 23),
    (0x7fffdb, 23), (0x7fffdc, 23), (0x7fffdd, 23), (0x7fffde, 23), (0xffffeb, 24), (0x7fffdf, 23),
    (0xffffec, 24), (0xffffed, 24), (0x3fffd7, 22), (0x7fffe0, 23), (0xffffee, 24), (0x7fffe1, 23),
    (0x7fffe2, 23), (0x7fffe3, 23), (0x7fffe4, 23), (0x1fffdc, 21), (0x3fffd8, 22), (0x7fffe5, 23),
    (0x3fffd9, 22), (0x7fffe6, 23), (0x7fffe7, 23), (0xffffef, 24), (0x3fffda, 22), (0x1fffdd, 21),
    (0xfffe9, 20), (0x3fffdb, 22), (0x3fffdc, 22), (0x7fffe8, 23), (0x7fffe9, 23), (0x1fffde, 21),
    (0x7fffea, 23), (0x3fffdd, 22), (0x3fffde, 22), (0xfffff0, 24), (0x1fffdf, 21), (0x3fffdf, 22),
    (0x7fffeb, 23), (0x7fffec, 23), (0x1fffe0, 21), (0x1fffe1, 21), (0x3fffe0, 22), (0x1fffe2, 21),
    (0x7fffed, 23), (0x3fffe1, 22), (0x7fffee, 23), (0x7fffef, 23), (0xfffea, 20), (0x3fffe2, 22),
    (0x3fffe3, 22), (0x3fffe4, 22), (0x7ffff0, 23), (0x3fffe5, 22), (0x3fffe6, 22), (0x7ffff1, 23),
    (0x3ffffe0, 26), (0x3ffffe1, 26), (0xfffeb, 20), (0x7fff1, 19), (0x3fffe7, 22), (0x7ffff2, 23),
    (0x3fffe8, 22), (0x1ffffec, 25), (0x3ffffe2, 26), (0x3ffffe3, 26), (0x3ffffe4, 26), (0x7ffffde, 27),
    (0x7ffffdf, 27), (0x3ffffe5, 26), (0xfffff1, 24), (0x1ffffed, 25), (0x7fff2, 19), (0x1fffe3, 21),
    (0x3ffffe6, 26), (0x7ffffe0, 27), (0x7ffffe1, 27), (0x3ffffe7, 26), (0x7ffffe2, 27), (0xfffff2, 24),
    (0x1fffe4, 21), (0x1fffe5, 21), (0x3ffffe8, 26), (0x3ffffe9, 26), (0xffffffd, 28), (0x7ffffe3, 27),
    (0x7ffffe4, 27), (0x7ffffe5, 27), (0xfffec, 20), (0xfffff3, 24), (0xfffed, 20), (0x1fffe6, 21),
    (0x3fffe9, 22), (0x1fffe7, 21), (0x1fffe8, 21), (0x7ffff3, 23), (0x3fffea, 22), (0x3fffeb, 22),
    (0x1ffffee, 25), (0x1ffffef, 25), (0xfffff4, 24), (0xfffff5, 24), (0x3ffffea, 26), (0x7ffff4, 23),
    (0x3ffffeb, 26), (0x7ffffe6, 27), (0x3ffffec, 26), (0x3ffffed, 26), (0x7ffffe7, 27), (0x7ffffe8, 27),
    (0x7ffffe9, 27), (0x7ffffea, 27), (0x7ffffeb, 27), (0xffffffe, 28), (0x7ffffec, 27), (0x7ffffed, 27),
    (0x7ffffee, 27), (0x7ffffef, 27), (0x7fffff0, 27), (0x3ffffee, 26),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_rfc_7541_examples() {
        // C.4.1: "www.example.com", Huffman-coded.
        let b = [0x8c, 0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff];
        assert_eq!(string(&b).unwrap().0, "www.example.com");
        // C.1.2: 1337 with a 5-bit prefix.
        assert_eq!(int(&[0x1f, 0x9a, 0x0a], 5).unwrap().0, 1337);
        // C.2.1: a literal with incremental indexing, then the same field from the dynamic table.
        let mut d = Decoder::default();
        let mut block = vec![0x40, 0x0a];
        block.extend(b"custom-key");
        block.push(0x0d);
        block.extend(b"custom-header");
        let f = d.block(&block).unwrap();
        assert_eq!(f, [("custom-key".into(), "custom-header".into())]);
        assert_eq!(d.block(&[0xbe]).unwrap(), f);
        assert!(d.block(&[0xbf]).is_none(), "no such entry");
    }
}
