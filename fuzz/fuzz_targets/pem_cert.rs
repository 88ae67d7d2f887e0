#![no_main]
//! Seeds: tests/fuzz-corpus/pem-cert/
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = kubestrap::pki::check::CertFile::parse(data).map(|c| c.spki());
    let _ = kubestrap::pki::ca_hash(data);
});
