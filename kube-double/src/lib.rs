//! Kubernetes API test double (work in progress).
