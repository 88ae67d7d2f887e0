#![no_main]
//! Seeds: tests/fuzz-corpus/values/
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = std::str::from_utf8(data) {
        let _ = kubestrap::discovery::Token::parse(t);
        let _ = kubestrap::discovery::CaPin::parse(t);
        let _ = kubestrap::config::values::parse_duration(t);
        let _ = kubestrap::config::values::Version::parse(t);
        let _ = kubestrap::config::values::Cidr::parse(t).map(|c| c.nth(10));
    }
});
