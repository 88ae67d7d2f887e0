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
            // kubeadm-style lines ("[preflight] ...", "\t[WARNING X]: ...") carry their own tag.
            let tag = if msg.starts_with('[') || msg.starts_with('\t') { "" } else { tag };
            if journal { writeln!(buf, "<{prio}>{msg}") } else { writeln!(buf, "{tag}{msg}") }
        })
        .init();
}
