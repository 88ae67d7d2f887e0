#![no_main]
//! Seeds: tests/fuzz-corpus/pem-key/
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = kubestrap::pki::keys::parse_pem(data);
});
