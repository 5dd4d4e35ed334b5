//! Subcommands of the `cuzk` binary.

mod bench;
mod client;
mod compare;
mod config_cmd;
mod daemon;
mod fil;
mod graph;
mod info;
mod prove;
mod setup;
mod soak;
mod tls_args;
mod waterfall;

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
    /// The GPU kernels in this binary, the devices found, the backend a job
    /// would use, and the MSM tables a parameter file would get.
    Info(info::Args),
    /// Turn a TIMELINE log into a waterfall chart (SVG + HTML) and a bottleneck summary.
    Waterfall(waterfall::Args),
    /// Show the effective configuration.
    Config {
        #[command(subcommand)]
        action: config_cmd::Action,
    },
    /// Serve curio's cuzk.v1 gRPC API (Curio's `[Cuzk] Address`) until SIGTERM/SIGINT.
    Daemon(daemon::Args),
    /// Call a running daemon: prove, submit, await, cancel, status, metrics, preload, evict.
    Client(client::Args),
    /// Run a daemon of our own under Filecoin's duty cycle (WinningPoSt on a
    /// clock, WindowPoSt bursts, a PoRep backlog, SIGKILL and restart), every
    /// proof checked against its request: latency, invalid, lost, RSS drift.
    Soak(soak::Args),
    /// Filecoin proofs: fixtures, parameters, circuit counts, proving.
    Fil {
        #[command(subcommand)]
        action: fil::Action,
    },
    /// List, check and draw graph declarations (the interlock variants).
    Graph {
        #[command(subcommand)]
        action: graph::Action,
    },
}

/// Loads the configuration from `--config` and the environment.
fn load_config(path: Option<&std::path::Path>) -> anyhow::Result<Loaded> {
    Ok(cuzk::config::load(path)?)
}

/// What a command that runs the engine sets up around it: the async
/// runtime, logs and trace export, metrics, timeline, in that order.
pub struct Session {
    pub rt: tokio::runtime::Runtime,
    telemetry: Option<cuzk::telemetry::Telemetry>,
    /// Where TIMELINE lines go, if anywhere.
    pub timeline: Option<std::sync::Arc<cuzk::runtime::TimelineWriter>>,
}

impl Session {
    /// `timeline` (a `--timeline FILE` flag) overrides `[timeline]` in the config.
    pub fn start(
        config: &cuzk::config::Config,
        timeline: Option<&std::path::Path>,
    ) -> anyhow::Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("cuzk-async")
            .enable_all()
            .build()?;
        let guard = rt.enter();
        let telemetry = cuzk::telemetry::init(config)?;
        if let Some(addr) = config.metrics.listen {
            cuzk::metrics::serve(addr)?;
            tracing::info!(%addr, "serving Prometheus metrics at /metrics");
        }
        let path = timeline.map(std::path::Path::to_path_buf).or_else(|| {
            config
                .timeline
                .enabled
                .then(|| config.timeline.path.clone())
                .flatten()
        });
        let timeline = match (&path, config.timeline.enabled) {
            (Some(p), _) => Some(
                cuzk::runtime::TimelineWriter::file(p)
                    .map_err(|e| anyhow::anyhow!("opening timeline file {}: {e}", p.display()))?,
            ),
            (None, true) => Some(cuzk::runtime::TimelineWriter::stderr()),
            (None, false) => None,
        }
        .map(std::sync::Arc::new);
        drop(guard);
        Ok(Self {
            rt,
            telemetry: Some(telemetry),
            timeline,
        })
    }

    /// Observers for the engine: the timeline, and spans when exporting traces.
    pub fn engine_options(&self, config: &cuzk::config::Config) -> cuzk::EngineOptions {
        let mut options = cuzk::EngineOptions::default();
        if let Some(t) = &self.timeline {
            options.observers.push(t.clone());
        }
        if config.tracing.otlp {
            options
                .observers
                .push(std::sync::Arc::new(cuzk::runtime::SpanObserver::new()));
        }
        options
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Flush spans while the runtime that drives the exporter still runs.
        if let Some(t) = self.telemetry.take() {
            t.shutdown();
        }
    }
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let config = cli.config.as_deref();
    match cli.command {
        Command::Prove(args) => prove::run(load_config(config)?, args),
        Command::Bench(args) => bench::run(load_config(config)?, args),
        Command::Compare(args) => compare::run(args, config),
        Command::Setup(args) => {
            cuzk::telemetry::init_logs(&load_config(config)?.config)?;
            setup::run(args)
        }
        Command::Info(args) => info::run(config, args),
        Command::Waterfall(args) => waterfall::run(args),
        Command::Config { action } => config_cmd::run(config, action),
        Command::Graph { action } => graph::run(config, action),
        Command::Fil { action } => fil::run(load_config(config)?, action),
        Command::Daemon(args) => daemon::run(load_config(config)?, args),
        Command::Client(args) => client::run(args),
        Command::Soak(args) => soak::run(config, args),
    }
}
