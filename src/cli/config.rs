//! `kubestrap config print|migrate|images`.

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
    Images(ConfigImages),
}

/// The container images kubeadm uses.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "images")]
pub struct ConfigImages {
    #[argh(subcommand)]
    pub command: ConfigImagesCommand,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum ConfigImagesCommand {
    List(ConfigImagesList),
}

/// Print the images kubeadm would pull for this configuration, one per line (kubeadm's order).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "list")]
pub struct ConfigImagesList {
    #[argh(option)]
    /// a kubeadm configuration file (its values win over the flags below, as in kubeadm)
    pub config: Option<PathBuf>,
    #[argh(option)]
    /// the control plane's Kubernetes version
    pub kubernetes_version: Option<String>,
    #[argh(option)]
    /// the registry to pull control plane images from (default "registry.k8s.io")
    pub image_repository: Option<String>,
    #[argh(option, short = 'o', default = "String::from(\"text\")")]
    /// output format: text, json or yaml (default text)
    pub output: String,
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
