#![no_main]
//! Seeds: tests/fuzz-corpus/kubeconfig/
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(k) = kubestrap::kubeconfig::Kubeconfig::parse(data) {
        let _ = k.current();
    }
});
