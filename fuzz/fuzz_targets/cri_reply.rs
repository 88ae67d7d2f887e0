#![no_main]
//! Seeds: tests/fuzz-corpus/cri-reply/
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = kubestrap::cri::parse_reply(data);
});
