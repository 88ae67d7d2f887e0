//! A Kubernetes API server test double for kubestrap's tests.
//!
//! It serves HTTPS (rustls, ring) with the real server's authentication
//! (client certificates, bootstrap tokens, anonymous), RBAC evaluated from
//! stored objects, in-memory REST storage with 404/409/422 semantics, watch,
//! and the controllers kubeadm bootstrapping depends on: the bootstrap
//! signer, the CSR approver and the kubelet-client CSR signer. Test knobs
//! (`down_for`, `signer_delay`, `deny_csrs`, ...) inject faults.
//!
//! ```no_run
//! let cfg = kube_double::Config::from_pki_dir(std::path::Path::new("/etc/kubernetes/pki")).unwrap();
//! let server = kube_double::start(cfg).unwrap();
//! println!("listening on https://{}", server.addr());
//! ```

mod api;
mod approver;
mod auth;
mod controllers;
mod csr;
mod csr_signer;
mod gc;
mod http;
mod kubelet;
mod patch;
mod rbac;
mod resources;
mod select;
mod server;
mod signer;
mod status;
mod store;
mod tls;
mod tokens;
mod watch;

pub use signer::detached_jws;
pub use status::ApiError;
pub use store::{Knobs, LoggedRequest};

use server::Shared;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Where kubeadm expects the kubelet's healthz endpoint.
pub const DEFAULT_KUBELET_HEALTHZ: SocketAddr =
    SocketAddr::V4(std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 10248));

/// Everything `start` needs. `Default` gives an unusable config (no PEMs);
/// use `from_pki_dir` or fill the PEM fields.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to serve HTTPS; port 0 picks a free port (see `Handle::addr`).
    pub listen: SocketAddr,
    /// Serving certificate chain (apiserver.crt).
    pub serving_cert_pem: String,
    /// Serving key (apiserver.key): PKCS#8, PKCS#1 or SEC1 PEM.
    pub serving_key_pem: String,
    /// CA bundle client certificates are verified against (ca.crt). The
    /// first certificate is also the CSR signer's issuer.
    pub client_ca_pem: String,
    /// Cluster CA key (ca.key, PKCS#8 "PRIVATE KEY" PEM: rcgen's ring backend
    /// reads nothing else). Without it approved CSRs are never signed.
    pub ca_key_pem: Option<String>,
    /// Serve plain-HTTP `GET /healthz` here, like a kubelet (kubeadm polls
    /// `DEFAULT_KUBELET_HEALTHZ`). None: no kubelet stand-in.
    pub kubelet_healthz: Option<SocketAddr>,
    /// Refuse connections (nothing listens) for this long after `start`.
    pub down_for: Duration,
    /// How long cluster-info stays unsigned after it (or a token) changes.
    pub signer_delay: Duration,
    /// Run the CSR auto-approver.
    pub auto_approve: bool,
    /// Deny every pending kubelet client CSR (reason `TestDenied`) instead.
    pub deny_csrs: bool,
    /// Approve (and sign) only the three-usage set {digital signature, key
    /// encipherment, client auth}, like v1.24-era controllers.
    pub legacy_approver: bool,
    /// Watch timeout when the client sends no `timeoutSeconds`.
    pub watch_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            serving_cert_pem: String::new(),
            serving_key_pem: String::new(),
            client_ca_pem: String::new(),
            ca_key_pem: None,
            kubelet_healthz: None,
            down_for: Duration::ZERO,
            signer_delay: Duration::ZERO,
            auto_approve: true,
            deny_csrs: false,
            legacy_approver: false,
            watch_timeout: Duration::from_secs(60),
        }
    }
}

impl Config {
    /// Reads apiserver.crt, apiserver.key, ca.crt and (if present) ca.key
    /// from a kubeadm-layout PKI directory.
    pub fn from_pki_dir(dir: &Path) -> io::Result<Config> {
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name))
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.join(name).display())))
        };
        let ca_key_pem = match read("ca.key") {
            Ok(k) => Some(pkcs8_pem(&k)?),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        Ok(Config {
            serving_cert_pem: read("apiserver.crt")?,
            serving_key_pem: read("apiserver.key")?,
            client_ca_pem: read("ca.crt")?,
            ca_key_pem,
            ..Config::default()
        })
    }
}

/// A `RSA PRIVATE KEY` (PKCS#1) PEM as `PRIVATE KEY` (PKCS#8); anything else as it is.
fn pkcs8_pem(pem: &str) -> io::Result<String> {
    use rsa::pkcs1::DecodeRsaPrivateKey;
    use rsa::pkcs8::{EncodePrivateKey, LineEnding};
    if !pem.contains("-----BEGIN RSA PRIVATE KEY-----") {
        return Ok(pem.to_string());
    }
    let bad = |e: &dyn std::fmt::Display| io::Error::new(io::ErrorKind::InvalidData, format!("CA key: {e}"));
    let key = rsa::RsaPrivateKey::from_pkcs1_pem(pem).map_err(|e| bad(&e))?;
    Ok(key.to_pkcs8_pem(LineEnding::LF).map_err(|e| bad(&e))?.to_string())
}

/// A running server. Dropping it stops it.
pub struct Handle {
    shared: Arc<Shared>,
    addr: SocketAddr,
    kubelet_addr: Option<SocketAddr>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    client_ca_pem: String,
    /// Listeners added by `serve_also`: woken on stop like the first.
    extra_addrs: Mutex<Vec<SocketAddr>>,
}

/// Starts the server. Returns once the port is reserved (with `down_for`,
/// before it accepts connections).
pub fn start(cfg: Config) -> io::Result<Handle> {
    let tls = tls::server_config(&cfg.serving_cert_pem, &cfg.serving_key_pem, &cfg.client_ca_pem)?;
    let ca =
        cfg.ca_key_pem.as_ref().map(|key| csr_signer::Ca { cert_pem: cfg.client_ca_pem.clone(), key_pem: key.clone() });
    if let Some(ca) = &ca {
        // Fail at start, not silently at the first CSR.
        rcgen::KeyPair::from_pem(&ca.key_pem)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("CA key: {e}")))?;
    }
    let knobs = Knobs {
        auto_approve: cfg.auto_approve,
        deny_csrs: cfg.deny_csrs,
        legacy_approver: cfg.legacy_approver,
        signer_delay: cfg.signer_delay,
    };
    let shared = Arc::new(Shared::new(store::Store::new(knobs), ca, cfg.watch_timeout));
    let listener = TcpListener::bind(cfg.listen)?;
    let addr = listener.local_addr()?;
    let mut threads = Vec::new();
    {
        let shared = shared.clone();
        let down_for = cfg.down_for;
        // The port is reserved (so `addr` is known) and released at once:
        // while down, nothing listens and connections are refused.
        let listener = down_for.is_zero().then_some(listener);
        threads.push(thread::spawn(move || server::run_listener(shared, listener, addr, tls, down_for)));
    }
    let mut kubelet_addr = None;
    if let Some(healthz) = cfg.kubelet_healthz {
        let listener = TcpListener::bind(healthz)?;
        kubelet_addr = Some(listener.local_addr()?);
        let shared = shared.clone();
        threads.push(thread::spawn(move || kubelet::run_healthz(shared, listener)));
    }
    {
        // The tick for time-driven controller work: signer_delay and token
        // expiry change outcomes without any write.
        let shared = shared.clone();
        threads.push(thread::spawn(move || {
            while !shared.is_stopping() {
                thread::sleep(Duration::from_millis(50));
                let mut store = shared.lock();
                if controllers::run(&mut store, shared.ca.as_ref()) {
                    shared.notify();
                }
            }
        }));
    }
    Ok(Handle {
        shared,
        addr,
        kubelet_addr,
        threads: Mutex::new(threads),
        client_ca_pem: cfg.client_ca_pem,
        extra_addrs: Mutex::default(),
    })
}

impl Handle {
    /// The HTTPS address (the actual port when `listen` had port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://<addr>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The kubelet healthz stand-in's address, if configured.
    pub fn kubelet_addr(&self) -> Option<SocketAddr> {
        self.kubelet_addr
    }

    /// The stored object at an API path such as
    /// `/api/v1/namespaces/kube-public/configmaps/cluster-info`, bypassing
    /// authentication and authorisation.
    pub fn object(&self, api_path: &str) -> Option<serde_json::Value> {
        let (r, ns, name) = object_path(api_path).ok()?;
        self.shared.lock().try_get(r, &ns, &name?).cloned()
    }

    /// The objects of a collection path (`/api/v1/namespaces/x/secrets`,
    /// `/apis/certificates.k8s.io/v1/certificatesigningrequests`, or an
    /// all-namespace path like `/api/v1/secrets`).
    pub fn list(&self, api_path: &str) -> Vec<serde_json::Value> {
        let Ok((r, ns, None)) = object_path(api_path) else { return Vec::new() };
        self.shared.lock().list(r, &ns).cloned().collect()
    }

    /// Creates or replaces an object for test setup, bypassing auth. The
    /// resource comes from `apiVersion` + `kind`, the namespace from
    /// `metadata.namespace`. Controllers run afterwards as for API writes.
    pub fn put_object(&self, obj: serde_json::Value) -> Result<serde_json::Value, ApiError> {
        let r = resources::by_kind(obj["apiVersion"].as_str().unwrap_or(""), obj["kind"].as_str().unwrap_or(""))
            .ok_or_else(|| ApiError::bad_request("put_object: unknown apiVersion/kind"))?;
        let ns = if r.namespaced { store::meta_str(&obj, "namespace").to_string() } else { String::new() };
        let name = store::meta_str(&obj, "name").to_string();
        let mut store = self.shared.lock();
        let result = match store.try_get(r, &ns, &name) {
            Some(_) => {
                let mut obj = obj;
                // Test setup overwrites unconditionally.
                store::metadata_mut(&mut obj).remove("resourceVersion");
                store.replace(r, &ns, &name, obj)
            }
            None => store.create(r, &ns, obj),
        };
        self.shared.settle(&mut store);
        result
    }

    /// Deletes the object at an API path, bypassing auth.
    pub fn delete_object(&self, api_path: &str) -> Result<serde_json::Value, ApiError> {
        let (r, ns, name) = object_path(api_path)?;
        let name = name.ok_or_else(|| ApiError::bad_request("delete_object needs an object path"))?;
        let mut store = self.shared.lock();
        let result = store.delete(r, &ns, &name);
        self.shared.settle(&mut store);
        result
    }

    /// Polls `object(api_path)` until `pred` holds or `timeout` passes.
    pub fn wait_for(
        &self,
        api_path: &str,
        timeout: Duration,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> Option<serde_json::Value> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(obj) = self.object(api_path).filter(|o| pred(o)) {
                return Some(obj);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every request served so far, oldest first.
    pub fn request_log(&self) -> Vec<LoggedRequest> {
        self.shared.lock().log.clone()
    }

    pub fn clear_request_log(&self) {
        self.shared.lock().log.clear();
    }

    /// Current knob values.
    pub fn knobs(&self) -> Knobs {
        self.shared.lock().knobs.clone()
    }

    /// Changes knobs while running (e.g. turn auto-approval on later); the
    /// controllers re-run immediately.
    pub fn set_knobs(&self, f: impl FnOnce(&mut Knobs)) {
        let mut store = self.shared.lock();
        f(&mut store.knobs);
        self.shared.settle(&mut store);
    }

    /// A second API server of the same cluster (a joined control plane): serves the same store
    /// on `listen` with its own serving certificate. Returns the bound address. Takes `&self` so
    /// a test's kubelet thread can start a joining node's API server while the join runs.
    pub fn serve_also(&self, listen: SocketAddr, cert_pem: &str, key_pem: &str) -> io::Result<SocketAddr> {
        let tls = tls::server_config(cert_pem, key_pem, &self.client_ca_pem)?;
        let listener = TcpListener::bind(listen)?;
        let addr = listener.local_addr()?;
        let shared = self.shared.clone();
        lock(&self.threads)
            .push(thread::spawn(move || server::run_listener(shared, Some(listener), addr, tls, Duration::ZERO)));
        lock(&self.extra_addrs).push(addr);
        Ok(addr)
    }

    /// What a kubelet does for the static Pods it runs: one mirror Pod per manifest in `dir`,
    /// named `<pod>-<node>` in the manifest's namespace, with its labels, its annotations (kubeadm
    /// reads `kubeadm.kubernetes.io/etcd.advertise-client-urls` and the API server's endpoint
    /// from them), `kubernetes.io/config.mirror`, `spec.nodeName` and Ready status. Returns the
    /// mirror Pods' names.
    pub fn mirror_static_pods(&self, dir: &Path, node: &str) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        let mut entries: Vec<_> = std::fs::read_dir(dir)?.flatten().map(|e| e.path()).collect();
        entries.sort();
        for path in entries.into_iter().filter(|p| p.extension().is_some_and(|e| e == "yaml")) {
            let text = std::fs::read_to_string(&path)?;
            let mut pod: serde_json::Value = serde_yaml::from_str(&text)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))?;
            let name = format!("{}-{node}", pod["metadata"]["name"].as_str().unwrap_or("static"));
            pod["metadata"]["name"] = name.clone().into();
            if pod["metadata"]["namespace"].is_null() {
                pod["metadata"]["namespace"] = "kube-system".into();
            }
            pod["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "mirror".into();
            pod["metadata"]["annotations"]["kubernetes.io/config.source"] = "file".into();
            pod["spec"]["nodeName"] = node.into();
            pod["status"] =
                serde_json::json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
            self.put_object(pod).map_err(|e| io::Error::other(format!("{}: {e:?}", path.display())))?;
            names.push(name);
        }
        Ok(names)
    }

    /// What a kubelet does on registration: creates the Node `name` (or
    /// updates it) with the given labels and condition Ready=True.
    pub fn register_node(&self, name: &str, labels: &[(&str, &str)]) -> Result<serde_json::Value, ApiError> {
        let mut store = self.shared.lock();
        let result = kubelet::register_node(&mut store, name, labels);
        self.shared.settle(&mut store);
        result
    }

    /// Stops serving: closes the listeners and open connections.
    pub fn stop(&mut self) {
        if self.shared.is_stopping() {
            return;
        }
        self.shared.stop();
        server::poke(self.addr);
        for a in lock(&self.extra_addrs).iter() {
            server::poke(*a);
        }
        if let Some(k) = self.kubelet_addr {
            server::poke(k);
        }
        let threads: Vec<_> = lock(&self.threads).drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
    }

    /// Blocks until the server is stopped from elsewhere (used by the binary).
    pub fn wait(self) {
        let threads: Vec<_> = lock(&self.threads).drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A test double keeps serving after a panicking test thread: a poisoned lock is still usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// (resource, namespace, name) of an API path, for the test-side helpers.
fn object_path(api_path: &str) -> Result<(&'static resources::Resource, String, Option<String>), ApiError> {
    let resources::ApiPath::Resource(p) = resources::parse_path(api_path) else { return Err(ApiError::no_route()) };
    let r = resources::lookup(&p.group, &p.version, &p.plural).ok_or_else(ApiError::no_route)?;
    Ok((r, p.namespace, p.name))
}
