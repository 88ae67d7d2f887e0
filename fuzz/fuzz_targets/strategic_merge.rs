#![no_main]
//! Seeds: tests/fuzz-corpus/strategic-merge/ (two JSON values, the original then the patch;
//! one value alone patches an empty object).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| kubestrap::patches::fuzzing::strategic_merge(data));
