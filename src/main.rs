//! Dispatch only: parse arguments, set up logging, run, map errors to exit codes.

use std::io::Write;

use kubestrap::error::{Error, Kind};

fn main() {
    let argv: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    let cli = match kubestrap::cli::parse(&argv) {
        Ok(kubestrap::cli::Parsed::Run(cli)) => cli,
        Ok(kubestrap::cli::Parsed::Help(text)) => {
            // A closed stdout (`| head`) is not an error worth a panic.
            let _ = writeln!(std::io::stdout(), "{text}");
            return;
        }
        Err(e) => {
            kubestrap::logging::init(false);
            fail(e.into())
        }
    };
    kubestrap::logging::init(cli.verbose);
    // Two /proc reads: only when the line will be shown.
    if log::log_enabled!(log::Level::Debug)
        && let Some(d) = kubestrap::logging::since_start()
    {
        log::debug!("main reached {d:?} after the process started (±10 ms)");
    }
    if let Err(e) = kubestrap::commands::run(*cli) {
        fail(e)
    }
}

fn fail(e: Error) -> ! {
    log::error!("{e}");
    let hint = match e.kind {
        Kind::Config => "fix the configuration and run again; nothing was written",
        Kind::State => "the file named above was left untouched",
        Kind::Usage => "see `kubestrap help`",
        Kind::Preflight => "fix the errors above, or ignore them with --ignore-preflight-errors",
        Kind::Conflict => "nothing was written: point the user-data at the right cluster",
        Kind::Skew => {
            "the node keeps its old configuration: boot the image of its version, or upgrade the cluster first"
        }
        _ => "the run can be repeated safely: finished steps are reused",
    };
    eprintln!("kubestrap: {hint}");
    std::process::exit(e.kind.exit_code());
}
