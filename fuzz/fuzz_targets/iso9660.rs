#![no_main]
//! Seeds: tests/fuzz-corpus/iso9660/ (NoCloud seeds made by xorriso: Rock Ridge + Joliet,
//! Joliet only, plain ISO 9660; cut after the last sector in use).
use kubestrap::datasource::iso9660::Root;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(root)) = Root::read_from(Box::<[u8]>::from(data)) {
        for name in root.entries.keys() {
            let _ = root.read(name, 1 << 20);
        }
    }
});
