//! The Go zero values kubeadm's KubeletConfiguration carries: it writes config.yaml and the
//! kubelet-config ConfigMap by marshalling the v1beta1 struct, and encoding/json never omits a
//! struct-typed field (metav1.Duration, the logging and memorySwap structs), `omitempty` or not;
//! `containerRuntimeEndpoint` has no `omitempty` at all. What kubeadm v1.37.2 writes for an
//! empty KubeletConfiguration (tests/parity compares it with the real one).

use serde_yaml::{Mapping, Value as Y};

use crate::objects::default_at;

/// A Go zero value as kubeadm writes it.
enum Zero {
    /// A metav1.Duration: "0s".
    Duration,
    /// A string; a resource.Quantity's is "0".
    Str(&'static str),
    Int,
    /// An empty struct: {}.
    Struct,
}
use Zero::*;

const ZERO: &[(&[&str], Zero)] = &[
    (&["authentication", "webhook", "cacheTTL"], Duration),
    (&["authorization", "webhook", "cacheAuthorizedTTL"], Duration),
    (&["authorization", "webhook", "cacheUnauthorizedTTL"], Duration),
    (&["containerRuntimeEndpoint"], Str("")),
    (&["cpuManagerReconcilePeriod"], Duration),
    (&["crashLoopBackOff"], Struct),
    (&["evictionPressureTransitionPeriod"], Duration),
    (&["fileCheckFrequency"], Duration),
    (&["httpCheckFrequency"], Duration),
    (&["imageMaximumGCAge"], Duration),
    (&["imageMinimumGCAge"], Duration),
    (&["logging", "flushFrequency"], Int),
    (&["logging", "options", "json", "infoBufferSize"], Str("0")),
    (&["logging", "options", "text", "infoBufferSize"], Str("0")),
    (&["logging", "verbosity"], Int),
    (&["memorySwap"], Struct),
    (&["nodeStatusReportFrequency"], Duration),
    (&["nodeStatusUpdateFrequency"], Duration),
    (&["runtimeRequestTimeout"], Duration),
    (&["shutdownGracePeriod"], Duration),
    (&["shutdownGracePeriodCriticalPods"], Duration),
    (&["streamingConnectionIdleTimeout"], Duration),
    (&["syncFrequency"], Duration),
    (&["volumeStatsAggPeriod"], Duration),
];

/// Sets each zero value where the user gave nothing.
pub fn fill(m: &mut Mapping) {
    for (path, zero) in ZERO {
        let value = match zero {
            Duration => "0s".into(),
            Str(s) => (*s).into(),
            Int => 0.into(),
            Struct => Y::Mapping(Mapping::new()),
        };
        default_at(m, path, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_values_fill_only_what_the_user_left_empty() {
        let mut m: Mapping = serde_yaml::from_str("syncFrequency: 1m\nlogging: {verbosity: 4}").unwrap();
        fill(&mut m);
        assert_eq!(m["syncFrequency"], "1m");
        assert_eq!(m["logging"]["verbosity"], 4);
        assert_eq!(m["logging"]["flushFrequency"], 0);
        assert_eq!(m["logging"]["options"]["json"]["infoBufferSize"], "0", "a Quantity: a string");
        assert_eq!(m["containerRuntimeEndpoint"], "");
        assert_eq!(m["memorySwap"], Y::Mapping(Mapping::new()));
    }
}
