#![no_main]
//! Seeds: tests/fuzz-corpus/kubeadm-config/
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let host = kubestrap::config::HostFacts { hostname: "node".into(), default_address: None };
    if let Some(Ok(docs)) = std::str::from_utf8(data).ok().map(|t| kubestrap::config::parse_documents("fuzz", t)) {
        let _ = kubestrap::config::resolve_init("fuzz", docs, &host);
    }
});
