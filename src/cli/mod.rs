//! Subcommands of the `cuzk` binary.

mod bench;
mod compare;
mod config_cmd;
mod prove;
mod setup;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cuzk::config::Loaded;

#[derive(Parser)]
#[command(name = "cuzk", version, about = "A staged GPU Groth16 proving engine")]
pub struct Cli {
    /// Configuration file (TOML); CUZK_SECTION__KEY environment variables override it.
    #[arg(long, global = true, env = "CUZK_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Prove a built-in workload, verify every proof, print per-stage times.
    Prove(prove::Args),
    /// Run -c proofs with -j in flight; s/proof, latency percentiles, time per stage.
    Bench(bench::Args),
    /// Run the same workload under several configs, interleaved; the relative performance table.
    Compare(compare::Args),
    /// Generate parameters for a built-in workload.
    Setup(setup::Args),
    /// Show the effective configuration.
    Config {
        #[command(subcommand)]
        action: config_cmd::Action,
    },
}

/// Loads the configuration from `--config` and the environment.
fn load_config(path: Option<&std::path::Path>) -> anyhow::Result<Loaded> {
    Ok(cuzk::config::load(path)?)
}

/// Logs go to stderr, human-readable or JSON as configured; RUST_LOG wins.
fn init_logging(config: &cuzk::config::Config) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&config.logging.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match config.logging.format {
        cuzk::config::LogFormat::Human => builder.try_init(),
        cuzk::config::LogFormat::Json => builder.json().try_init(),
    };
}

fn tokio_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("cuzk-async")
        .enable_all()
        .build()?)
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let config = cli.config.as_deref();
    match cli.command {
        Command::Prove(args) => prove::run(load_config(config)?, args),
        Command::Bench(args) => bench::run(load_config(config)?, args),
        Command::Compare(args) => compare::run(args),
        Command::Setup(args) => setup::run(args),
        Command::Config { action } => config_cmd::run(config, action),
    }
}
