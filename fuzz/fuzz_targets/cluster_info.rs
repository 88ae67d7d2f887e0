#![no_main]
//! Seeds: tests/fuzz-corpus/cluster-info/
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let token = kubestrap::discovery::Token::parse("abcdef.0123456789abcdef").expect("valid token");
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = kubestrap::discovery::validate_cluster_info(&v, &token, &[], true);
    }
});
