//! `kubestrap config print|migrate`.

use argh::FromArgs;
use std::path::PathBuf;

/// kubeadm's `config` commands: print the default documents, migrate a v1beta3 config to v1beta4.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "config")]
pub struct Config {
    #[argh(subcommand)]
    pub command: ConfigCommand,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum ConfigCommand {
    Print(ConfigPrint),
    Migrate(ConfigMigrate),
}

/// Print default configuration documents.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "print")]
pub struct ConfigPrint {
    #[argh(subcommand)]
    pub what: ConfigPrintWhat,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum ConfigPrintWhat {
    InitDefaults(PrintInitDefaults),
    JoinDefaults(PrintJoinDefaults),
}

/// Print the default init configuration (Init and ClusterConfiguration), usable for `init --config`.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "init-defaults")]
pub struct PrintInitDefaults {
    #[argh(option)]
    /// also print these component configs (comma-separated): KubeletConfiguration, KubeProxyConfiguration
    pub component_configs: Option<String>,
}

/// Print the default join configuration, usable for `join --config`.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "join-defaults")]
pub struct PrintJoinDefaults {
    #[argh(option)]
    /// also print these component configs (comma-separated): KubeletConfiguration, KubeProxyConfiguration
    pub component_configs: Option<String>,
}

/// Read a kubeadm config (v1beta3 or v1beta4) and write its v1beta4 equivalent.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "migrate")]
pub struct ConfigMigrate {
    #[argh(option)]
    /// the config file to convert (mandatory)
    pub old_config: Option<PathBuf>,
    #[argh(option)]
    /// write the result here (atomically) instead of to stdout
    pub new_config: Option<PathBuf>,
}
