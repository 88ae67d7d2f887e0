//! The TLS listener: a thread per connection, keep-alive request loop, and
//! the shared state every connection and controller works on.

use crate::api::{self, Reply};
use crate::auth::{self, UserInfo};
use crate::csr_signer::Ca;
use crate::http;
use crate::store::{LoggedRequest, Store};
use crate::{controllers, watch};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::collections::HashMap;
use std::io::{self, BufReader};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// Idle keep-alive connections are dropped after this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

pub struct Shared {
    store: Mutex<Store>,
    changed: Condvar,
    pub ca: Option<Ca>,
    stopping: AtomicBool,
    pub watch_timeout: Duration,
    conns: Mutex<HashMap<u64, TcpStream>>,
    next_conn: AtomicU64,
}

impl Shared {
    pub fn new(store: Store, ca: Option<Ca>, watch_timeout: Duration) -> Shared {
        Shared {
            store: Mutex::new(store),
            changed: Condvar::new(),
            ca,
            stopping: AtomicBool::new(false),
            watch_timeout,
            conns: Mutex::new(HashMap::new()),
            next_conn: AtomicU64::new(0),
        }
    }

    /// Locks the store. A panic while holding the lock (a bug, or a test
    /// assertion in a callback) must not wedge every later request, so
    /// poisoning is ignored: the store is only mutated through methods that
    /// leave it consistent at every step.
    pub fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs the controllers after a write and wakes watchers.
    pub fn settle(&self, store: &mut Store) {
        controllers::run(store, self.ca.as_ref());
        self.notify();
    }

    /// Wakes watchers after a change.
    pub fn notify(&self) {
        self.changed.notify_all();
    }

    pub fn wait_change<'a>(&self, guard: MutexGuard<'a, Store>, timeout: Duration) -> MutexGuard<'a, Store> {
        match self.changed.wait_timeout(guard, timeout) {
            Ok((g, _)) => g,
            Err(poisoned) => poisoned.into_inner().0,
        }
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Stops accepting, closes open connections and wakes watchers.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        let conns = std::mem::take(&mut *self.conns.lock().unwrap_or_else(PoisonError::into_inner));
        for (_, c) in conns {
            let _ = c.shutdown(Shutdown::Both);
        }
        self.changed.notify_all();
    }
}

/// Binds `addr`, retrying briefly: after `down_for` we rebind a port we
/// held a moment ago.
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let mut last = None;
    for _ in 0..50 {
        match TcpListener::bind(addr) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
        thread::sleep(Duration::from_millis(100));
    }
    Err(last.unwrap_or_else(|| io::Error::other("bind failed")))
}

/// Wakes a thread blocked in `accept` on `addr` so it can see the stop flag.
pub fn poke(addr: SocketAddr) {
    let mut target = addr;
    if target.ip().is_unspecified() {
        target.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let _ = TcpStream::connect_timeout(&target, Duration::from_millis(500));
}

/// The accept loop. With `down_for`, the caller has already closed the
/// port (connections are refused); it is bound again once that has passed.
pub fn run_listener(
    shared: Arc<Shared>,
    listener: Option<TcpListener>,
    addr: SocketAddr,
    tls: Arc<ServerConfig>,
    down_for: Duration,
) {
    let listener = match listener {
        Some(l) => l,
        None => {
            let until = Instant::now() + down_for;
            while Instant::now() < until {
                if shared.is_stopping() {
                    return;
                }
                thread::sleep(Duration::from_millis(20).min(until.saturating_duration_since(Instant::now())));
            }
            match bind(addr) {
                Ok(l) => l,
                Err(e) => return log::error!("kube-double: rebinding {addr} after down_for: {e}"),
            }
        }
    };
    for conn in listener.incoming() {
        if shared.is_stopping() {
            return;
        }
        let Ok(tcp) = conn else { continue };
        let shared = shared.clone();
        let tls = tls.clone();
        thread::spawn(move || {
            let id = shared.next_conn.fetch_add(1, Ordering::SeqCst);
            if let Ok(clone) = tcp.try_clone() {
                shared.conns.lock().unwrap_or_else(PoisonError::into_inner).insert(id, clone);
            }
            if let Err(e) = serve(&shared, tcp, tls) {
                log::debug!("kube-double: connection ended: {e}");
            }
            shared.conns.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
        });
    }
}

fn serve(shared: &Shared, tcp: TcpStream, tls: Arc<ServerConfig>) -> io::Result<()> {
    tcp.set_read_timeout(Some(IDLE_TIMEOUT))?;
    tcp.set_nodelay(true)?;
    let conn = ServerConnection::new(tls).map_err(io::Error::other)?;
    let mut stream = StreamOwned::new(conn, tcp);
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock)?;
    }
    let cert_user: Option<UserInfo> = stream
        .conn
        .peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(|leaf| auth::from_client_cert(leaf.as_ref()));
    let mut reader = BufReader::new(stream);
    while !shared.is_stopping() {
        let req = match http::read_request(&mut reader) {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                let body = crate::status::ApiError::bad_request(e.to_string()).to_status().to_string();
                http::write_response(reader.get_mut(), 400, "application/json", body.as_bytes(), false)?;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let keep_alive = req.keep_alive();
        let reply = {
            let mut store = shared.lock();
            let (user, reply) = api::handle(shared, &mut store, &req, cert_user.as_ref());
            let status = match &reply {
                Reply::Json(code, _) | Reply::Text(code, _) => *code,
                Reply::Watch(_) => 200,
            };
            log::info!(
                "{} {}{}{} user={user:?} -> {status}",
                req.method,
                req.path,
                if req.raw_query.is_empty() { "" } else { "?" },
                req.raw_query
            );
            store.log.push(LoggedRequest {
                method: req.method.clone(),
                path: req.path.clone(),
                query: req.raw_query.clone(),
                user: user.clone(),
                status,
            });
            reply
        };
        let w = reader.get_mut();
        match reply {
            Reply::Json(code, body) => {
                let body = if req.method == "HEAD" { Vec::new() } else { body.to_string().into_bytes() };
                http::write_response(w, code, "application/json", &body, keep_alive)?
            }
            Reply::Text(code, text) => {
                http::write_response(w, code, "text/plain; charset=utf-8", text.as_bytes(), keep_alive)?
            }
            Reply::Watch(wr) => {
                // A watch ends by closing the stream's chunked body; the
                // connection stays usable like any other response.
                watch::stream(shared, w, wr)?;
            }
        }
        if !keep_alive {
            break;
        }
    }
    let mut stream = reader.into_inner();
    stream.conn.send_close_notify();
    let _ = stream.conn.complete_io(&mut stream.sock);
    Ok(())
}
