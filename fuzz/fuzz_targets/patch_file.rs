#![no_main]
//! Seeds: tests/fuzz-corpus/patch-file/ (the first line a file name, the rest its text).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (name, text) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    // As the directory reader sees them: names and content lossily decoded.
    let _ = kubestrap::patches::fuzzing::parse_name(&String::from_utf8_lossy(name));
    let _ = kubestrap::patches::fuzzing::documents(&String::from_utf8_lossy(text));
});
