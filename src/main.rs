//! Dispatch only: parse arguments, set up logging, run, map errors to exit codes.

fn main() {
    let cli: kubestrap::cli::Cli = argh::from_env();
    kubestrap::logging::init(cli.verbose);
    if let Err(e) = kubestrap::commands::run(cli) {
        log::error!("{e}");
        let hint = match e.kind {
            kubestrap::error::Kind::Config => "fix the configuration and run again; nothing was written",
            kubestrap::error::Kind::State => "the file named above was left untouched",
            kubestrap::error::Kind::Usage => "see `kubestrap help`",
            kubestrap::error::Kind::Preflight => "fix the errors above, or ignore them with --ignore-preflight-errors",
            _ => "the run can be repeated safely: finished steps are reused",
        };
        eprintln!("kubestrap: {hint}");
        std::process::exit(e.kind.exit_code());
    }
}
