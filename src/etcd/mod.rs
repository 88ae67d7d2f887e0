//! Stacked etcd: joining this node's etcd member to an existing cluster (kubeadm's etcd join
//! with learners), over a small etcd v3 client.
//!
//! The client speaks etcd's gRPC-JSON gateway (`POST /v3/cluster/member/...`,
//! `/v3/maintenance/status`; etcd 3.4 and newer serve it on the client port) through
//! `kube::Client`, the project's one HTTP/TLS stack (ureq + rustls/ring), with client-certificate
//! mTLS. A gRPC client would add HTTP/2, protobuf and an async runtime to a static binary for
//! the five calls a join makes.

pub mod client;
pub mod endpoints;
pub mod error;
pub mod join;

pub use client::{APISERVER_ETCD_CLIENT, Client, Credentials, HEALTHCHECK_CLIENT, Member, Status};
pub use endpoints::{ADVERTISE_CLIENT_URLS_ANNOTATION, ETCD_PODS, endpoints_from_cluster, endpoints_from_pods};
pub use error::EtcdError;
pub use join::{
    Announced, InitialCluster, NewMember, add_as_learner, client_url, connect, connect_recording, initial_cluster,
    peer_url, promote, wait_available,
};
