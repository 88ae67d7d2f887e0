//! What went wrong talking to etcd: which endpoint, which call, and whether waiting can help.

use crate::kube::{ApiError, Transport};
use crate::retry::GaveUp;

/// gRPC status codes etcd's gateway puts in `"code"` (the ones we act on).
pub mod grpc {
    pub(crate) const INVALID_ARGUMENT: i64 = 3;
    pub const NOT_FOUND: i64 = 5;
    pub(crate) const PERMISSION_DENIED: i64 = 7;
    pub(crate) const UNIMPLEMENTED: i64 = 12;
    pub(crate) const UNAVAILABLE: i64 = 14;
    pub const UNAUTHENTICATED: i64 = 16;
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum EtcdError {
    /// No HTTP answer from this endpoint.
    #[error("etcd {call} at {endpoint}: {}: {detail}", why(kind))]
    Unreachable { endpoint: String, call: &'static str, kind: Transport, detail: String },
    /// etcd answered with an error (the gateway's JSON carries the gRPC code and message).
    #[error("etcd {call} at {endpoint}: {message} (gRPC code {code}, HTTP {http})")]
    Rejected { endpoint: String, call: &'static str, http: u16, code: i64, message: String },
    /// An answer we cannot read (not JSON, a missing field, or not etcd's v3 gateway at all).
    #[error("etcd {call} at {endpoint}: unreadable answer (HTTP {http}): {detail}; is this etcd 3.4 or newer?")]
    BadAnswer { endpoint: String, call: &'static str, http: u16, detail: String },
    #[error("no etcd endpoints to talk to: {why}")]
    NoEndpoints { why: String },
    /// A CA, client certificate or key file is missing; the certs phase writes them.
    #[error("{path} is missing; run the certs phase first (it writes the etcd client certificates)")]
    MissingFile { path: String },
    /// A CA, client certificate or key is present but unusable.
    #[error("{path} is unusable for the etcd client: {detail}")]
    BadCredentials { path: String, detail: String },
    #[error("invalid etcd peer URL {url:?}: {why}")]
    BadPeerUrl { url: String, why: &'static str },
    /// Promote without an add: nothing to promote.
    #[error("no etcd member has the peer URL {peer_url}; the learner must be added first")]
    NotAMember { peer_url: String },
    /// A started member of another name has our peer URL: a node that used this address was
    /// never removed. Reusing its identity with a fresh data dir would corrupt the cluster.
    #[error(
        "etcd member {id:x} ({name}) already has the peer URL {peer_url}; if that node is gone, remove it \
         (`etcdctl member remove {id:x}`, or `kubeadm reset` on it) and join again"
    )]
    PeerUrlTaken { peer_url: String, name: String, id: u64 },
    /// The etcd Pods of a PodList cannot give endpoints.
    #[error("etcd Pods: {0}")]
    Pods(String),
    /// The API server refused or failed listing the etcd Pods.
    #[error(transparent)]
    Api(ApiError),
    /// A retried call ran out of time.
    #[error(transparent)]
    GaveUp(#[from] GaveUp),
}

fn why(kind: &Transport) -> &'static str {
    match kind {
        Transport::Dns => "the host name does not resolve",
        Transport::Refused => "connection refused (is etcd up?)",
        Transport::Tls => {
            "TLS failed (wrong etcd CA or client certificate, or the server certificate does not name this address)"
        }
        Transport::Timeout => "timed out",
        Transport::Other => "cannot connect",
    }
}

impl EtcdError {
    /// An exchange with `endpoint` that got no etcd answer (an endpoint that is no URL included).
    pub(crate) fn from_api(endpoint: &str, call: &'static str, e: ApiError) -> EtcdError {
        let (kind, detail) = match e {
            ApiError::Transport { kind, detail, .. } => (kind, detail),
            other => (Transport::Other, other.to_string()),
        };
        EtcdError::Unreachable { endpoint: endpoint.to_string(), call, kind, detail }
    }

    fn rejected(&self) -> Option<(i64, &str)> {
        match self {
            EtcdError::Rejected { code, message, .. } => Some((*code, message.as_str())),
            _ => None,
        }
    }

    /// etcd allows one learner at a time (3.4; 3.5+ by default): another node is joining.
    pub(crate) fn is_too_many_learners(&self) -> bool {
        self.rejected().is_some_and(|(_, m)| m.contains("too many learner members"))
    }

    /// The learner has not caught up with the leader yet.
    pub(crate) fn is_learner_not_ready(&self) -> bool {
        self.rejected().is_some_and(|(_, m)| m.contains("can only promote a learner member which is in sync"))
    }

    /// Promote of a member that is already a voter.
    pub(crate) fn is_not_learner(&self) -> bool {
        self.rejected().is_some_and(|(_, m)| m.trim_end() == "etcdserver: can only promote a learner member")
    }

    /// The peer URL (or the member ID derived from it) is already in the cluster.
    pub(crate) fn is_already_member(&self) -> bool {
        self.rejected()
            .is_some_and(|(_, m)| m.contains("Peer URLs already exists") || m.contains("member ID already exist"))
    }

    pub fn is_member_not_found(&self) -> bool {
        self.rejected().is_some_and(|(c, m)| c == grpc::NOT_FOUND || m.contains("member not found"))
    }

    /// This endpoint cannot serve the call but another may: down, no leader, or a learner.
    pub(crate) fn try_next_endpoint(&self) -> bool {
        match self {
            EtcdError::Unreachable { .. } => true,
            EtcdError::Rejected { code, message, .. } => {
                *code == grpc::UNAVAILABLE || message.contains("rpc not supported for learner")
            }
            _ => false,
        }
    }

    /// Waiting can help: a member may come up, elect a leader, catch up, or another join may
    /// finish. TLS, credentials, bad input and refusals by etcd's auth cannot fix themselves.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            EtcdError::Unreachable { kind, .. } => *kind != Transport::Tls,
            EtcdError::Rejected { code, .. } => !matches!(
                *code,
                grpc::INVALID_ARGUMENT | grpc::PERMISSION_DENIED | grpc::UNIMPLEMENTED | grpc::UNAUTHENTICATED
            ),
            EtcdError::NoEndpoints { .. } | EtcdError::Pods(_) => true,
            EtcdError::Api(e) => e.is_transient(),
            EtcdError::BadAnswer { .. }
            | EtcdError::MissingFile { .. }
            | EtcdError::BadCredentials { .. }
            | EtcdError::BadPeerUrl { .. }
            | EtcdError::NotAMember { .. }
            | EtcdError::PeerUrlTaken { .. }
            | EtcdError::GaveUp(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(code: i64, message: &str) -> EtcdError {
        EtcdError::Rejected {
            endpoint: "https://10.0.0.11:2379".into(),
            call: "MemberAdd",
            http: 412,
            code,
            message: message.into(),
        }
    }

    #[test]
    fn etcd_answers_are_sorted_by_what_to_do() {
        let e = rejected(9, "etcdserver: too many learner members in cluster");
        assert!(e.is_too_many_learners() && e.is_transient() && !e.try_next_endpoint());
        assert_eq!(
            e.to_string(),
            "etcd MemberAdd at https://10.0.0.11:2379: etcdserver: too many learner members in cluster \
             (gRPC code 9, HTTP 412)"
        );
        let e = rejected(9, "etcdserver: can only promote a learner member which is in sync with leader");
        assert!(e.is_learner_not_ready() && !e.is_not_learner() && e.is_transient());
        let e = rejected(9, "etcdserver: can only promote a learner member");
        assert!(e.is_not_learner() && !e.is_learner_not_ready());
        assert!(rejected(9, "etcdserver: Peer URLs already exists").is_already_member());
        assert!(rejected(9, "etcdserver: member ID already exist").is_already_member());
        assert!(rejected(5, "etcdserver: member not found").is_member_not_found());
        assert!(rejected(14, "etcdserver: no leader").try_next_endpoint());
        assert!(rejected(2, "etcdserver: rpc not supported for learner").try_next_endpoint());
        assert!(!rejected(16, "etcdserver: invalid auth token").is_transient());
        let e = EtcdError::Unreachable {
            endpoint: "https://10.0.0.11:2379".into(),
            call: "MemberList",
            kind: Transport::Tls,
            detail: "invalid peer certificate: UnknownIssuer".into(),
        };
        assert!(!e.is_transient() && e.try_next_endpoint());
        assert!(e.to_string().starts_with("etcd MemberList at https://10.0.0.11:2379: TLS failed"), "{e}");
    }
}
