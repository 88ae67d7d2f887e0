#![no_main]
//! Seeds: tests/fuzz-corpus/user-data/
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let g = kubestrap::datasource::Gathered {
        source: "fuzz".into(),
        user_data: Some(data.to_vec()),
        meta: kubestrap::datasource::MetaData { local_hostname: Some("node-1".into()), ..Default::default() },
        credentials: Default::default(),
        notices: Vec::new(),
        hostname: "node-1".into(),
    };
    let _ = kubestrap::userdata::plan(&g);
});
