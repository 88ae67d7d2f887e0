#![no_main]
//! Seeds: tests/fuzz-corpus/strategic-merge/ (two JSON values, the original then the patch;
//! one value alone patches an empty object).
use kubestrap::patches::{Target, fuzzing};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut values = serde_json::Deserializer::from_slice(data).into_iter::<serde_json::Value>();
    let (Some(Ok(first)), second) = (values.next(), values.next()) else { return };
    let (original, patch) = match second {
        Some(Ok(p)) => (first, p),
        _ => (serde_json::json!({}), first),
    };
    for target in [Target::KubeApiserver, Target::KubeletConfiguration] {
        if let Ok(patched) = fuzzing::strategic_merge(target, original.clone(), patch.clone()) {
            let _ = fuzzing::reencode(target, &patched);
            if target == Target::KubeletConfiguration {
                // kubeadm writes a patched kubelet config back as YAML, undecoded.
                let _ = serde_yaml::to_value(&patched);
            }
        }
    }
});
