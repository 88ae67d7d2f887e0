//! Memory and time bounds for the fuzz harness: a parser that grows without end or never
//! returns fails the run naming its input, instead of taking the machine down (a 481-byte patch
//! file once grew past 13 GB).
//!
//! Memory is counted per thread by the global allocator (each target runs on its own test
//! thread); an input that takes more than `SOFT_BYTES` fails its test, one that reaches
//! `HARD_BYTES` aborts the binary at once, after naming the input on stderr. Time: a watchdog
//! aborts the binary, naming the input, when one input runs longer than `INPUT_DEADLINE`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The most one input may allocate at its peak: a parser's working set is a few times its
/// input, and no input here is above a few MiB.
pub const SOFT_BYTES: usize = 512 << 20;
/// Where the allocator stops giving memory (the binary aborts).
const HARD_BYTES: usize = 2 << 30;
/// The longest one input may run (debug-built parsers; seeds take milliseconds).
pub const INPUT_DEADLINE: Duration = Duration::from_secs(30);

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
    /// The input this thread runs now: its name and bytes (0 lengths outside an input), and a
    /// file opened for it beforehand, so that the hard cap can save it without allocating.
    static NOW: Cell<(usize, usize, usize, usize, i32)> = const { Cell::new((0, 0, 0, 0, -1)) };
}

pub struct Counting;

// SAFETY: every call is passed to System unchanged; only counters are kept beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !take(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, as GlobalAlloc requires.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        give(layout.size());
        // SAFETY: ptr came from System.alloc with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() && !take(new_size - layout.size()) {
            return std::ptr::null_mut();
        }
        if new_size < layout.size() {
            give(layout.size() - new_size);
        }
        // SAFETY: as for alloc and dealloc.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Counts `n` more bytes on this thread; past the hard cap, saves and names the input and says
/// no (the allocation fails and the binary aborts).
fn take(n: usize) -> bool {
    // try_with: a thread's last frees run after its locals are gone; those go uncounted.
    let over = LIVE
        .try_with(|l| {
            let live = l.get().saturating_add(n);
            l.set(live);
            let _ = PEAK.try_with(|p| p.set(p.get().max(live)));
            live > HARD_BYTES
        })
        .unwrap_or(false);
    if over && let Ok((name, name_len, input, input_len, fd)) = NOW.try_with(Cell::get) {
        // SAFETY: set by `bounded` from a &str and a &[u8] that outlive the input's run.
        let (name, input) = unsafe {
            (
                std::slice::from_raw_parts(name as *const u8, name_len),
                std::slice::from_raw_parts(input as *const u8, input_len),
            )
        };
        if fd >= 0 {
            // SAFETY: the file `bounded` opened and keeps open while the input runs.
            let f = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            let _ = rustix::io::write(f, input);
        }
        // Unbuffered stderr and fixed text: nothing here allocates.
        let mut e = std::io::stderr().lock();
        let _ = e.write_all(b"fuzz: past the 2 GiB memory cap on input ");
        let _ = e.write_all(name);
        let _ = e.write_all(b" (saved under target/fuzz-crashes/)\n");
    }
    !over
}

fn give(n: usize) {
    let _ = LIVE.try_with(|l| l.set(l.get().saturating_sub(n)));
}

/// One input running now, for the watchdog: (id, name, start, the input's address and length).
type Running = (u64, String, Instant, usize, usize);
static RUNNING: Mutex<Vec<Running>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Where an input that failed its bounds is saved.
pub fn crash_file(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-crashes");
    let _ = std::fs::create_dir_all(&dir);
    dir.join(name.replace('/', "-"))
}

fn watchdog() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        std::thread::spawn(|| {
            loop {
                std::thread::sleep(Duration::from_millis(500));
                let running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
                if let Some((_, name, t, at, len)) = running.iter().find(|r| r.2.elapsed() > INPUT_DEADLINE) {
                    // SAFETY: the input stays borrowed by `bounded` while its entry is listed.
                    let input = unsafe { std::slice::from_raw_parts(*at as *const u8, *len) };
                    let file = crash_file(name);
                    let _ = std::fs::write(&file, input);
                    eprintln!(
                        "fuzz: input {name} ran past {INPUT_DEADLINE:?} ({:?}); saved as {}",
                        t.elapsed(),
                        file.display()
                    );
                    std::process::abort();
                }
            }
        });
    });
}

/// Runs `f` on one input under the bounds; `Err` says which it exceeded. `name` is how the
/// messages and the saved file name the input (`<target>/<seed file>`, or `<target>-mutated`).
/// `dump` is a file opened for that name (`crash_file`), kept open across a target's inputs.
pub fn bounded<R>(name: &str, input: &[u8], dump: &std::fs::File, f: impl FnOnce() -> R) -> Result<R, String> {
    use std::os::fd::AsRawFd;
    watchdog();
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let started = Instant::now();
    RUNNING.lock().unwrap_or_else(|e| e.into_inner()).push((
        id,
        name.to_string(),
        started,
        input.as_ptr() as usize,
        input.len(),
    ));
    NOW.with(|n| n.set((name.as_ptr() as usize, name.len(), input.as_ptr() as usize, input.len(), dump.as_raw_fd())));
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    let peak = PEAK.with(Cell::get) - base;
    NOW.with(|n| n.set((0, 0, 0, 0, -1)));
    RUNNING.lock().unwrap_or_else(|e| e.into_inner()).retain(|r| r.0 != id);
    if peak > SOFT_BYTES {
        return Err(format!("{name}: took {} MiB at its peak (at most {} MiB)", peak >> 20, SOFT_BYTES >> 20));
    }
    Ok(out)
}
