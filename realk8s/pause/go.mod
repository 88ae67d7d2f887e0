// A pod sandbox process for the real kubelet in tests: no registry is reachable here, so
// registry.k8s.io/pause cannot be pulled and this stands in as that image.
module kubestrap.dev/realk8s/pause

go 1.26.0
