//! An API client that polls the cluster's endpoint every 200 ms while the cluster changes under
//! it (`/readyz`, then a list of Nodes, as admin), and reports the longest time it went without
//! an answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::cluster::CP_ADDR;
use super::front::enter_named;
use super::net::Netns;

pub struct Report {
    pub polls: usize,
    pub failed: usize,
    /// From the first failed poll of a run of failures to the next answer.
    pub longest_gap: Duration,
    /// The first error of the longest gap.
    pub why: String,
}

pub struct Monitor {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Report>>,
}

/// One poll: Ok when the API server is ready and lists the Nodes.
fn poll(api: &kubestrap::kube::Client) -> Result<(), String> {
    match api.request("GET", "/readyz", None) {
        Ok((200, _)) => {}
        Ok((code, body)) => return Err(format!("/readyz {code}: {body}")),
        Err(e) => return Err(format!("/readyz: {e}")),
    }
    match api.get("/api/v1/nodes") {
        Ok(Some(list)) if list["items"].is_array() => Ok(()),
        Ok(other) => Err(format!("nodes: {other:?}")),
        Err(e) => Err(format!("nodes: {e}")),
    }
}

impl Monitor {
    /// Polls `https://<cp-1's address>:port` from `client`'s namespace with the admin
    /// kubeconfig `admin` (its credentials embedded).
    pub fn start(client: &Netns, admin: &[u8], port: u16) -> Monitor {
        let kc = kubestrap::kubeconfig::Kubeconfig::parse(admin).expect("admin.conf");
        let api = kubestrap::kube::Client::from_kubeconfig(&kc, &|_| None, Duration::from_secs(2))
            .expect("admin client")
            .at(&format!("https://{CP_ADDR}:{port}"));
        let (stop, ns) = (Arc::new(AtomicBool::new(false)), client.name.clone());
        let halt = stop.clone();
        let thread = std::thread::spawn(move || {
            enter_named(&ns);
            let mut r = Report { polls: 0, failed: 0, longest_gap: Duration::ZERO, why: String::new() };
            let mut open: Option<(Instant, String)> = None;
            while !halt.load(Ordering::SeqCst) {
                let t = Instant::now();
                r.polls += 1;
                match poll(&api) {
                    Ok(()) => {
                        if let Some((since, why)) = open.take().filter(|(since, _)| t - *since > r.longest_gap) {
                            (r.longest_gap, r.why) = (t - since, why);
                        }
                    }
                    Err(e) => {
                        r.failed += 1;
                        open.get_or_insert((t, e));
                    }
                }
                std::thread::sleep(Duration::from_millis(200).saturating_sub(t.elapsed()));
            }
            if let Some((since, why)) = open.filter(|(since, _)| since.elapsed() > r.longest_gap) {
                (r.longest_gap, r.why) = (since.elapsed(), why);
            }
            r
        });
        Monitor { stop, thread: Some(thread) }
    }

    pub fn stop(mut self) -> Report {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().expect("running").join().expect("the monitor")
    }
}
