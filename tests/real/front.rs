//! Fronts for the real API servers in a node's namespace, which gets cp-1's address (the
//! cluster's endpoint) on its loopback, so every connection the node opens to the API server
//! (discovery's endpoint and cluster-info's server alike) reaches the front: a fault-injecting
//! one for joins run in-process on a fake clock, which refuses, hangs up on or forwards each
//! connection as told; and a load balancer over a pool of control planes the test drains and
//! fills, as a cloud's or kube-vip's would be.

use std::fs::File;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sched::{CloneFlags, setns};

use super::cluster::CP_ADDR;
use super::net::Netns;
use crate::common::sh;

/// What the front does with a connection.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Mode {
    /// No listener: the node sees "connection refused".
    Refuse = 0,
    /// Accepts and closes at once (an API server restarting, an overloaded load balancer).
    HangUp = 1,
    /// Forwards to the real API server.
    Forward = 2,
}

/// The front's controls, shareable with a fake clock's hook.
#[derive(Clone)]
pub struct Switch {
    wanted: Arc<AtomicU8>,
    applied: Arc<AtomicU8>,
}

impl Switch {
    /// Sets the mode and returns once the front acts on it (its listener bound or closed), so
    /// the next connection the node opens meets the new mode.
    pub fn set(&self, mode: Mode) {
        self.wanted.store(mode as u8, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.applied.load(Ordering::SeqCst) != mode as u8 {
            assert!(Instant::now() < deadline, "the front did not switch to {mode:?}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

pub struct Front {
    pub switch: Switch,
    _halt: Halt,
}

/// Set when its owner goes, which ends the owner's accept loop.
struct Halt(Arc<AtomicBool>);

impl Drop for Halt {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Moves the calling thread (and the threads it spawns) into `netns`'s network namespace.
pub fn enter(netns: &Netns) {
    enter_named(&netns.name);
}

/// [`enter`] by the namespace's name.
pub fn enter_named(name: &str) {
    let path = format!("/run/netns/{name}");
    let f = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    setns(f, CloneFlags::CLONE_NEWNET).unwrap_or_else(|e| panic!("setns {path}: {e}"));
}

/// Runs `f` on a thread in `netns`, as a process started there would run.
pub fn in_netns<T: Send>(netns: &Netns, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            enter(netns);
            f()
        })
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
    })
}

/// cp-1's address on `node`'s loopback, so the node's connections to the endpoint stay local;
/// the endpoint with `port`.
fn take_endpoint(node: &Netns, port: u16) -> SocketAddr {
    let (code, out, err) = sh(&format!("ip -n {} addr add {CP_ADDR}/32 dev lo", node.name));
    assert_eq!(code, 0, "cp-1's address on {}'s loopback: {out}{err}", node.name);
    format!("{CP_ADDR}:{port}").parse().expect("address")
}

/// From `after` on, accepts on `addr` in namespace `ns` until `halt` is set, handing each
/// connection to `on`.
fn serve(
    ns: &Netns,
    addr: SocketAddr,
    after: Duration,
    halt: Arc<AtomicBool>,
    mut on: impl FnMut(TcpStream) + Send + 'static,
) {
    let ns = ns.name.clone();
    std::thread::spawn(move || {
        std::thread::sleep(after);
        enter_named(&ns);
        let l = TcpListener::bind(addr).unwrap_or_else(|e| panic!("listening on {addr}: {e}"));
        l.set_nonblocking(true).expect("nonblocking listener");
        while !halt.load(Ordering::SeqCst) {
            match l.accept() {
                Ok((conn, _)) => {
                    conn.set_nonblocking(false).expect("blocking stream");
                    on(conn);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => panic!("accepting on {addr}: {e}"),
            }
        }
    });
}

impl Front {
    /// A front in `node`'s namespace for the API server at cp-1's address and `port`, whose
    /// upstream connections are made in `upstream` (cp-1's namespace).
    pub fn start(node: &Netns, upstream: &Netns, port: u16, mode: Mode) -> Front {
        let addr = take_endpoint(node, port);
        let switch = Switch { wanted: Arc::new(AtomicU8::new(mode as u8)), applied: Arc::new(AtomicU8::new(u8::MAX)) };
        let stop = Arc::new(AtomicBool::new(false));

        // Upstream: connects from cp-1's namespace and pipes both ways.
        let (tx, rx) = mpsc::channel::<TcpStream>();
        let up_ns = upstream.name.clone();
        std::thread::spawn(move || {
            enter_named(&up_ns);
            for conn in rx {
                if let Ok(back) = TcpStream::connect(addr) {
                    splice(&conn, &back);
                }
            }
        });

        // The node's side: listens (or not) on cp-1's address as the mode says.
        let (node_ns, sw, halt) = (node.name.clone(), switch.clone(), stop.clone());
        std::thread::spawn(move || {
            enter_named(&node_ns);
            let mut listener: Option<TcpListener> = None;
            while !halt.load(Ordering::SeqCst) {
                let mode = sw.wanted.load(Ordering::SeqCst);
                if mode == Mode::Refuse as u8 {
                    listener = None;
                } else if listener.is_none() {
                    let l = TcpListener::bind(addr).unwrap_or_else(|e| panic!("front on {addr}: {e}"));
                    l.set_nonblocking(true).expect("nonblocking listener");
                    listener = Some(l);
                }
                sw.applied.store(mode, Ordering::SeqCst);
                match listener.as_ref().map(TcpListener::accept) {
                    Some(Ok((conn, _))) => {
                        conn.set_nonblocking(false).expect("blocking stream");
                        if mode == Mode::Forward as u8 {
                            let _ = tx.send(conn);
                        }
                    }
                    Some(Err(e)) if e.kind() != io::ErrorKind::WouldBlock => panic!("front accept: {e}"),
                    _ => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        switch.set(mode);
        Front { switch, _halt: Halt(stop) }
    }
}

/// A TCP load balancer on the endpoint in a client's namespace: each connection goes to the next
/// control plane of the pool that accepts it (connected from another namespace on the LAN).
pub struct Balancer {
    pool: Arc<std::sync::Mutex<Vec<String>>>,
    _halt: Halt,
}

impl Balancer {
    /// A balancer in `client`'s namespace for the API servers at `pool`'s addresses and `port`,
    /// connecting from `upstream`'s namespace.
    pub fn start(client: &Netns, upstream: &Netns, port: u16, pool: &[String]) -> Balancer {
        let addr = take_endpoint(client, port);
        let (pool, halt) = (Arc::new(std::sync::Mutex::new(pool.to_vec())), Arc::new(AtomicBool::new(false)));
        let (tx, rx) = mpsc::channel::<TcpStream>();
        let (up_ns, backends) = (upstream.name.clone(), pool.clone());
        std::thread::spawn(move || {
            enter_named(&up_ns);
            let mut next = 0usize;
            for conn in rx {
                let backends = backends.lock().unwrap_or_else(|e| e.into_inner()).clone();
                for k in 0..backends.len() {
                    let to: SocketAddr = match format!("{}:{port}", backends[(next + k) % backends.len()]).parse() {
                        Ok(a) => a,
                        Err(_) => continue,
                    };
                    if let Ok(back) = TcpStream::connect_timeout(&to, Duration::from_secs(1)) {
                        next = (next + k + 1) % backends.len();
                        splice(&conn, &back);
                        break;
                    }
                }
            }
        });
        serve(client, addr, Duration::ZERO, halt.clone(), move |conn| {
            let _ = tx.send(conn);
        });
        Balancer { pool, _halt: Halt(halt) }
    }

    /// The control planes new connections go to (a drained one keeps the ones it has).
    pub fn set_pool(&self, pool: &[String]) {
        *self.pool.lock().unwrap_or_else(|e| e.into_inner()) = pool.to_vec();
    }
}

/// `conn` and `back` joined, both ways.
fn splice(conn: &TcpStream, back: &TcpStream) {
    pipe(conn, back);
    pipe(back, conn);
}

/// Copies `from` to `to` on a thread until `from` ends, then ends `to`'s writing side.
fn pipe(from: &TcpStream, to: &TcpStream) {
    let (mut from, mut to) = (from.try_clone().expect("clone"), to.try_clone().expect("clone"));
    std::thread::spawn(move || {
        let _ = io::copy(&mut from, &mut to);
        let _ = to.shutdown(Shutdown::Write);
    });
}

/// The faults a lossy front injects: every connection refused for `refuse_for` from its start,
/// then, per connection, drawn from `seed`: reset at once, delayed before it is forwarded, or
/// cut mid-stream (the server's answer stopped after a few hundred bytes), else forwarded.
#[derive(Clone, Copy, Debug)]
pub struct Faults {
    pub refuse_for: Duration,
    pub reset: f64,
    pub delay: f64,
    pub delay_by: Duration,
    pub cut: f64,
    pub seed: u64,
}

/// What a lossy front did, connection by connection.
#[derive(Default, Debug)]
pub struct Injected {
    pub refused_window: Duration,
    pub reset: AtomicU64,
    pub delayed: AtomicU64,
    pub cut: AtomicU64,
    pub forwarded: AtomicU64,
}

impl std::fmt::Display for Injected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = |a: &AtomicU64| a.load(Ordering::SeqCst);
        write!(
            f,
            "refused for {:?}, then {} reset, {} delayed, {} cut mid-stream, {} forwarded",
            self.refused_window,
            n(&self.reset),
            n(&self.delayed),
            n(&self.cut),
            n(&self.forwarded)
        )
    }
}

/// A lossy front, running until dropped.
pub struct Lossy {
    _halt: Halt,
}

/// A lossy front in `node`'s namespace (cp-1's address on its loopback, as [`Front::start`])
/// with `faults`, connecting from `upstream`'s; the counts of what it did.
pub fn start_lossy(node: &Netns, upstream: &Netns, port: u16, faults: Faults) -> (Lossy, Arc<Injected>) {
    let addr = take_endpoint(node, port);
    let injected = Arc::new(Injected { refused_window: faults.refuse_for, ..Default::default() });
    let halt = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<(TcpStream, Option<Duration>, Option<u64>)>();
    let up_ns = upstream.name.clone();
    std::thread::spawn(move || {
        enter_named(&up_ns);
        for (conn, delay, cut) in rx {
            std::thread::spawn(move || {
                if let Some(d) = delay {
                    std::thread::sleep(d);
                }
                let Ok(back) = TcpStream::connect(addr) else { return };
                let Some(limit) = cut else { return splice(&conn, &back) };
                pipe(&conn, &back);
                let (mut from, mut to) = (back.try_clone().expect("clone"), conn.try_clone().expect("clone"));
                let _ = io::copy(&mut io::Read::take(&mut from, limit), &mut to);
                let _ = conn.shutdown(Shutdown::Both);
                let _ = back.shutdown(Shutdown::Both);
            });
        }
    });
    let mut rng = faults.seed | 1;
    let mut draw = move || {
        // xorshift64: a fixed sequence per seed.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng >> 11) as f64 / (1u64 << 53) as f64
    };
    // Nothing listens (connections refused) until the refusal window ends.
    let counts = injected.clone();
    serve(node, addr, faults.refuse_for, halt.clone(), move |conn| {
        let x = draw();
        if x < faults.reset {
            counts.reset.fetch_add(1, Ordering::SeqCst);
            reset(conn);
        } else if x < faults.reset + faults.delay {
            counts.delayed.fetch_add(1, Ordering::SeqCst);
            let _ = tx.send((conn, Some(faults.delay_by), None));
        } else if x < faults.reset + faults.delay + faults.cut {
            counts.cut.fetch_add(1, Ordering::SeqCst);
            let limit = 200 + (draw() * 1800.0) as u64;
            let _ = tx.send((conn, None, Some(limit)));
        } else {
            counts.forwarded.fetch_add(1, Ordering::SeqCst);
            let _ = tx.send((conn, None, None));
        }
    });
    (Lossy { _halt: Halt(halt) }, injected)
}

/// Closes `conn` with a TCP reset (SO_LINGER 0), as a middlebox dropping it does.
fn reset(conn: TcpStream) {
    let linger = nix::libc::linger { l_onoff: 1, l_linger: 0 };
    let _ = nix::sys::socket::setsockopt(&conn, nix::sys::socket::sockopt::Linger, &linger);
    drop(conn);
}
