//! Deflates the generated patch schema (src/patches/schema.tsv) into OUT_DIR: the binary then
//! carries about 8 KB instead of 64 KB of text, inflated once when a patch is applied.

use std::io::Write;
use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    const SCHEMA: &str = "src/patches/schema.tsv";
    println!("cargo::rerun-if-changed={SCHEMA}");
    let text = std::fs::read(SCHEMA)?;
    let out = std::env::var_os("OUT_DIR").map(PathBuf::from).ok_or(std::io::ErrorKind::NotFound)?;
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(&text)?;
    std::fs::write(out.join("schema.tsv.deflate"), e.finish()?)
}
