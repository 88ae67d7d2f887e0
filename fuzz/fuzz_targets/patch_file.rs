#![no_main]
//! Seeds: tests/fuzz-corpus/patch-file/ (the first line a file name, the rest its text).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kubestrap::patches::fuzzing::patch_file(data));
