//! Logging: no timestamps (journald adds them); under systemd each line gets a `<N>` priority
//! prefix so `journalctl -p warning` works. Never log a token secret or a key.

use std::io::Write;

pub fn init(verbose: bool) {
    let journal = std::env::var_os("JOURNAL_STREAM").is_some();
    let level = if verbose { log::LevelFilter::Debug } else { log::LevelFilter::Info };
    env_logger::Builder::new()
        .filter_level(level)
        .parse_env("KUBESTRAP_LOG")
        .format(move |buf, rec| {
            let (prio, tag) = match rec.level() {
                log::Level::Error => (3, "ERROR: "),
                log::Level::Warn => (4, "WARNING: "),
                log::Level::Info => (6, ""),
                _ => (7, ""),
            };
            let msg = rec.args().to_string();
            remember(&msg);
            // kubeadm-style lines ("[preflight] ...", "\t[WARNING X]: ...") carry their own tag.
            let tag = if msg.starts_with('[') || msg.starts_with('\t') { "" } else { tag };
            if journal { writeln!(buf, "<{prio}>{msg}") } else { writeln!(buf, "{tag}{msg}") }
        })
        .init();
}

/// How many of the last log lines the failure file carries.
pub(crate) const TAIL_LINES: usize = 40;

static TAIL: std::sync::Mutex<std::collections::VecDeque<String>> =
    std::sync::Mutex::new(std::collections::VecDeque::new());

/// Keeps a logged line for [`tail`]: the last [`TAIL_LINES`] lines of this run, for the failure
/// file a fleet manager reads (the journal has them all).
pub(crate) fn remember(line: &str) {
    // A poisoned lock only loses the tail: the log line itself is written regardless.
    if let Ok(mut t) = TAIL.lock() {
        if t.len() == TAIL_LINES {
            t.pop_front();
        }
        t.push_back(line.to_string());
    }
}

/// The last lines logged by this process, oldest first.
pub(crate) fn tail() -> Vec<String> {
    TAIL.lock().map(|t| t.iter().cloned().collect()).unwrap_or_default()
}

/// How long ago the kernel started this process (starttime in /proc/self/stat against
/// /proc/uptime, both since boot at 10 ms resolution): at debug, what exec and the unit's set-up
/// cost before main ran.
pub fn since_start() -> Option<std::time::Duration> {
    // USER_HZ, the unit of /proc's clock-tick fields: 100 in Linux's ABI on every architecture
    // kubestrap builds for.
    const USER_HZ: u64 = 100;
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces); starttime is field 22.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let ticks: u64 = rest.split(' ').nth(19)?.parse().ok()?;
    let uptime = std::fs::read_to_string("/proc/uptime").ok()?;
    let up: f64 = uptime.split(' ').next()?.parse().ok()?;
    let started = std::time::Duration::from_millis(ticks * 1000 / USER_HZ);
    std::time::Duration::from_secs_f64(up).checked_sub(started)
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_started_moments_ago() {
        let d = super::since_start().expect("/proc/self/stat and /proc/uptime readable");
        assert!(d < std::time::Duration::from_secs(600), "{d:?}");
    }
}
