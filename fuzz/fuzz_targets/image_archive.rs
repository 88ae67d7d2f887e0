#![no_main]
//! Seeds: tests/fuzz-corpus/image-archive/
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = kubestrap::images::archive::names_in(std::io::Cursor::new(data), std::path::Path::new("fuzz.tar"));
});
