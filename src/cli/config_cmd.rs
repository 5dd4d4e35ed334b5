//! `cuzk config show`: the effective configuration and where each value came from.

use std::path::Path;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Action {
    /// Print every key with its effective value and its origin (default,
    /// file or environment variable), then the effective graph.
    Show,
}

pub fn run(file: Option<&Path>, action: Action) -> anyhow::Result<ExitCode> {
    match action {
        Action::Show => {
            let loaded = super::load_config(file)?;
            print!("{}", loaded.show());
            let graph = cuzk::pipelines::graph(&loaded.config)?;
            println!("# The graph this config runs, with the config's overrides applied");
            println!("# (the declaration format of pipelines/graphs/*.toml):");
            for line in cuzk::pipelines::Declaration::of(&graph).to_toml().lines() {
                println!("#   {line}");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
