//! The root directory of an ISO 9660 filesystem (ECMA-119), read in place from the device: a
//! NoCloud seed is two small files at the root, and mounting it costs a first boot a module load
//! and a mount (~0.2 s in a TCG VM). Names come from Rock Ridge (NM), else Joliet, else the plain
//! ISO name (lowercased, without `;1`), as Linux's isofs shows them. Anything this reader does not
//! handle (no primary volume descriptor, multi-extent files, odd block sizes, a huge root) is
//! `None`, and the caller mounts the filesystem instead.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Volume descriptors start at this 2048-byte sector.
const FIRST_DESCRIPTOR: u64 = 16;
const SECTOR: usize = 2048;
/// Descriptors looked at before giving up on finding the terminator.
const MAX_DESCRIPTORS: u64 = 64;
/// A seed's root directory is a sector; anything far larger is not a seed.
const MAX_ROOT_BYTES: u32 = 1 << 20;
const DIRECTORY: u8 = 0x02;
const MULTI_EXTENT: u8 = 0x80;

/// Where the filesystem's bytes are: a device, or (for tests and fuzzing) memory.
pub trait ReadAt {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

impl ReadAt for File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
}

impl ReadAt for [u8] {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        let src = start.checked_add(buf.len()).and_then(|end| self.get(start..end));
        buf.copy_from_slice(src.ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?);
        Ok(())
    }
}

/// A file in the root directory.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub size: u64,
    offset: u64,
    pub dir: bool,
}

/// The root directory of an ISO 9660 filesystem, by name.
pub struct Root<R: ReadAt + ?Sized = File> {
    pub entries: BTreeMap<String, Entry>,
    file: Box<R>,
}

impl Root {
    /// Reads the volume descriptors and the root directory of the filesystem on `dev`;
    /// `Ok(None)` when this reader cannot read it (the caller mounts it instead).
    pub fn open(dev: &Path) -> io::Result<Option<Root>> {
        Root::read_from(Box::new(File::open(dev)?))
    }
}

impl<R: ReadAt + ?Sized> Root<R> {
    /// [`Root::open`] on any bytes.
    pub fn read_from(file: Box<R>) -> io::Result<Option<Root<R>>> {
        let file_ref: &R = &file;
        let (mut primary, mut joliet) = (None, None);
        for i in 0..MAX_DESCRIPTORS {
            let mut d = vec![0u8; SECTOR];
            file_ref.read_exact_at(&mut d, (FIRST_DESCRIPTOR + i) * SECTOR as u64)?;
            if &d[1..6] != b"CD001" {
                return Ok(None);
            }
            match d[0] {
                1 if primary.is_none() => primary = Some(d),
                // A supplementary descriptor with a UCS-2 escape sequence is Joliet's.
                2 if [b"%/@", b"%/C", b"%/E"].iter().any(|e| d[88..91] == e[..]) => joliet = Some(d),
                255 => break,
                _ => {}
            }
        }
        let Some(primary) = primary else { return Ok(None) };
        let block = u64::from(u16::from_le_bytes([primary[128], primary[129]]));
        if !matches!(block, 512 | 1024 | 2048) {
            return Ok(None);
        }
        let Some(records) = read_root(file_ref, &primary, block)? else { return Ok(None) };
        let rock_ridge = records.iter().any(|r| r.rr_name.is_some());
        let records: Vec<Record> = match (rock_ridge, &joliet) {
            (false, Some(j)) => match read_root(file_ref, j, block)? {
                Some(r) => r.into_iter().map(|r| Record { name: joliet_name(&r.name), ..r }).collect(),
                None => return Ok(None),
            },
            _ => records
                .into_iter()
                .map(|r| Record { name: r.rr_name.clone().unwrap_or_else(|| plain_name(&r.name)), ..r })
                .collect(),
        };
        let mut entries = BTreeMap::new();
        for r in records {
            if r.flags & MULTI_EXTENT != 0 {
                return Ok(None);
            }
            let name = String::from_utf8_lossy(&r.name).into_owned();
            entries.insert(name, Entry { size: r.size, offset: r.extent * block, dir: r.flags & DIRECTORY != 0 });
        }
        Ok(Some(Root { entries, file }))
    }

    /// The contents of a root file, or `None` if there is no such file. Files over `cap` bytes
    /// are refused with `FileTooLarge` (the size comes from the untrusted directory record).
    pub fn read(&self, name: &str, cap: u64) -> io::Result<Option<Vec<u8>>> {
        let Some(e) = self.entries.get(name).filter(|e| !e.dir) else { return Ok(None) };
        if e.size > cap {
            return Err(io::Error::new(io::ErrorKind::FileTooLarge, format!("{name} is {} bytes, over {cap}", e.size)));
        }
        let len = usize::try_from(e.size).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, e.offset)?;
        Ok(Some(buf))
    }
}

/// A directory record as found: its raw name, the Rock Ridge name if it has one.
struct Record {
    name: Vec<u8>,
    rr_name: Option<Vec<u8>>,
    extent: u64,
    size: u64,
    flags: u8,
}

/// The records of the root directory that descriptor `d` points at (`.` and `..` left out).
fn read_root<R: ReadAt + ?Sized>(file: &R, d: &[u8], block: u64) -> io::Result<Option<Vec<Record>>> {
    let Some(root) = parse_record(&d[156..190], 0) else { return Ok(None) };
    let Ok(size) = u32::try_from(root.size) else { return Ok(None) };
    if size == 0 || size > MAX_ROOT_BYTES {
        return Ok(None);
    }
    let mut dir = vec![0u8; size as usize];
    file.read_exact_at(&mut dir, root.extent * block)?;
    // SUSP's SP entry, in the first record (`.`), says how many bytes every record's system use
    // area skips.
    let skip = sp_skip(&dir).unwrap_or(0);
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < dir.len() {
        let len = usize::from(dir[pos]);
        if len == 0 {
            // Records never cross a sector: the rest of this one is padding.
            pos = (pos / SECTOR + 1) * SECTOR;
            continue;
        }
        let Some(r) = dir.get(pos..pos + len).and_then(|r| parse_record(r, skip)) else { return Ok(None) };
        if !matches!(r.name.as_slice(), [0] | [1]) {
            out.push(r);
        }
        pos += len;
    }
    Ok(Some(out))
}

fn parse_record(r: &[u8], skip: usize) -> Option<Record> {
    let len = usize::from(*r.first()?);
    let r = r.get(..len)?;
    let name_len = usize::from(*r.get(32)?);
    let name = r.get(33..33 + name_len)?.to_vec();
    let su_start = 33 + name_len + usize::from(name_len % 2 == 0) + skip;
    let rr_name = r.get(su_start..).and_then(nm_name);
    Some(Record {
        name,
        rr_name,
        extent: u64::from(u32::from_le_bytes(r.get(2..6)?.try_into().ok()?)),
        size: u64::from(u32::from_le_bytes(r.get(10..14)?.try_into().ok()?)),
        flags: *r.get(25)?,
    })
}

/// SUSP entries of a system use area: (signature, data).
fn susp(mut su: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(*su.get(2)?);
        if len < 4 || len > su.len() || su.starts_with(b"ST") {
            return None;
        }
        let (entry, rest) = su.split_at(len);
        su = rest;
        Some((&entry[..2], &entry[4..]))
    })
}

/// Rock Ridge's name: the NM entries' parts joined (not those naming `.` or `..`).
fn nm_name(su: &[u8]) -> Option<Vec<u8>> {
    let mut name = Vec::new();
    for (sig, data) in susp(su) {
        if sig == b"NM" {
            let (&flags, part) = data.split_first()?;
            if flags & 0x06 == 0 {
                name.extend_from_slice(part);
            }
        }
    }
    (!name.is_empty()).then_some(name)
}

/// The skip length of the SP entry in the first record of a directory (`.`), if any.
fn sp_skip(dir: &[u8]) -> Option<usize> {
    let r = dir.get(..usize::from(*dir.first()?))?;
    let su = r.get(34..)?; // `.` has a one-byte name and no padding.
    susp(su)
        .find(|(sig, data)| *sig == b"SP" && data.starts_with(&[0xBE, 0xEF]))
        .and_then(|(_, d)| d.get(2).map(|s| usize::from(*s)))
}

/// Without the version (`;1`) and a bare trailing dot.
fn strip_version(n: &str) -> &str {
    let n = n.split(';').next().unwrap_or(n);
    n.strip_suffix('.').unwrap_or(n)
}

fn plain_name(raw: &[u8]) -> Vec<u8> {
    strip_version(&String::from_utf8_lossy(raw)).to_lowercase().into_bytes()
}

fn joliet_name(raw: &[u8]) -> Vec<u8> {
    let units = raw.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]]));
    let s: String = char::decode_utf16(units).map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER)).collect();
    strip_version(&s).as_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasource::test_needs::{Need, need};

    /// An ISO of `files` made by xorriso with `flags` (xorriso writes Rock Ridge unless told
    /// `--norock`).
    fn iso(dir: &Path, flags: &[&str], files: &[(&str, &[u8])]) -> std::path::PathBuf {
        let src = dir.join("src");
        std::fs::create_dir_all(&src).unwrap();
        for (n, b) in files {
            std::fs::write(src.join(n), b).unwrap();
        }
        let out = dir.join("seed.iso");
        let st = std::process::Command::new("xorriso")
            .args(["-as", "mkisofs", "-quiet", "-o"])
            .arg(&out)
            .args(["-V", "cidata"])
            .args(flags)
            .arg(&src)
            .status()
            .expect("xorriso (scripts/install-test-deps installs it)");
        assert!(st.success());
        out
    }

    const USER: &[u8] = b"#cloud-config\nruncmd: [kubeadm init]\n";
    const META: &[u8] = b"instance-id: iid-1\nlocal-hostname: cp-1\n";

    #[test]
    fn reads_seed_files_by_rock_ridge_joliet_or_both() {
        need!(Need::tool("xorriso"));
        for flags in [&["-J", "-r"][..], &["-r"], &["-J", "--norock"]] {
            let d = tempfile::tempdir().unwrap();
            let big: Vec<u8> = (0..5000u32).flat_map(|i| i.to_le_bytes()).collect();
            let path = iso(d.path(), flags, &[("user-data", USER), ("meta-data", META), ("network-config", &big)]);
            let root = Root::open(&path).unwrap().expect("a readable ISO 9660 root");
            assert_eq!(root.read("user-data", 1 << 20).unwrap().as_deref(), Some(USER), "{flags:?}");
            assert_eq!(root.read("meta-data", 1 << 20).unwrap().as_deref(), Some(META), "{flags:?}");
            assert_eq!(
                root.read("network-config", 1 << 20).unwrap(),
                Some(big),
                "{flags:?}: a file over several blocks"
            );
            assert_eq!(root.read("vendor-data", 1 << 20).unwrap(), None);
            assert_eq!(root.entries.keys().collect::<Vec<_>>(), ["meta-data", "network-config", "user-data"]);
            let e = root.read("network-config", 100).unwrap_err();
            assert!(e.to_string().contains("network-config is 20000 bytes, over 100"), "{e}");
            // The same bytes in memory (how the fuzz target reads them).
            let mem = Root::read_from(Box::<[u8]>::from(std::fs::read(&path).unwrap())).unwrap().unwrap();
            assert_eq!(mem.read("user-data", 1 << 20).unwrap().as_deref(), Some(USER), "{flags:?}");
            assert_eq!(mem.entries, root.entries);
        }
    }

    #[test]
    fn plain_iso_names_are_lowercased_without_their_version() {
        need!(Need::tool("xorriso"));
        let d = tempfile::tempdir().unwrap();
        let path = iso(d.path(), &["--norock"], &[("user-data", USER), ("meta.txt", META)]);
        let root = Root::open(&path).unwrap().expect("a readable ISO 9660 root");
        // Level 1 has no '-': the seed's names are not there as such, so the caller mounts.
        assert_eq!(root.read("user-data", 1 << 20).unwrap(), None);
        assert_eq!(root.read("meta.txt", 1 << 20).unwrap().as_deref(), Some(META));
    }

    #[test]
    fn what_is_not_iso_9660_is_none() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("zeros");
        std::fs::write(&path, vec![0u8; 40 * SECTOR]).unwrap();
        assert!(Root::open(&path).unwrap().is_none());
        std::fs::write(&path, b"short").unwrap();
        assert!(Root::open(&path).is_err(), "a device too short to hold the descriptors");
    }
}
