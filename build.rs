//! Deflates the generated patch schema (src/patches/schema.tsv) into OUT_DIR: the binary then
//! carries about 8 KB instead of 64 KB of text, inflated once when a patch is applied.
//!
//! The shipped binary (release: panic=abort, stripped) also links without unwind tables and
//! with packed relative relocations (bench/README.md, note 4): with no unwinding and no symbols
//! the tables bought nothing (a panic's backtrace printed no frame), and RELR keeps the
//! position-independent (ASLR) load at a fraction of `.rela.dyn`'s size.

use std::io::Write;
use std::path::PathBuf;

/// Added to ld's default script, not replacing it: unwind tables and their language data go.
const NO_UNWIND_TABLES: &str = "SECTIONS { /DISCARD/ : { *(.eh_frame) *(.gcc_except_table .gcc_except_table.*) } }\n\
                                INSERT BEFORE .eh_frame_hdr;\n";

fn main() -> std::io::Result<()> {
    const SCHEMA: &str = "src/patches/schema.tsv";
    println!("cargo::rerun-if-changed={SCHEMA}");
    let text = std::fs::read(SCHEMA)?;
    let out = std::env::var_os("OUT_DIR").map(PathBuf::from).ok_or(std::io::ErrorKind::NotFound)?;
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(&text)?;
    std::fs::write(out.join("schema.tsv.deflate"), e.finish()?)?;

    let cfg = |k: &str| std::env::var(k).unwrap_or_default();
    // Release only: dev and test builds keep their tables for backtraces (cargo's `panic` cfg
    // here is the target's default, not the profile's, so the profile is what tells).
    if cfg("PROFILE") == "release" && cfg("CARGO_CFG_TARGET_OS") == "linux" && cfg("CARGO_CFG_TARGET_ENV") == "gnu" {
        let script = out.join("no-unwind-tables.ld");
        std::fs::write(&script, NO_UNWIND_TABLES)?;
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
        println!("cargo::rustc-link-arg-bins=-Wl,-T,{}", script.display());
    }
    Ok(())
}
