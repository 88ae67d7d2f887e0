#![no_main]
//! Seeds: tests/fuzz-corpus/csr-status/
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = kubestrap::csr::certificate_from_status(&v);
    }
});
