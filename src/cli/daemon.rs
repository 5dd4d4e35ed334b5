//! `cuzk daemon`: serve curio's `cuzk.v1` API until SIGTERM/SIGINT.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Context;
use cuzk::config::Loaded;

#[derive(clap::Args)]
pub struct Args {
    /// Listen here instead of `daemon.listen`: HOST:PORT or unix:///path.sock.
    #[arg(long)]
    pub listen: Option<String>,
    /// Serve the status page here instead of `daemon.status_listen`.
    #[arg(long)]
    pub status_listen: Option<SocketAddr>,
    /// Write TIMELINE events to this file too.
    #[arg(long)]
    pub timeline: Option<std::path::PathBuf>,
}

pub fn run(mut loaded: Loaded, args: Args) -> anyhow::Result<ExitCode> {
    if let Some(l) = args.listen {
        loaded.config.daemon.listen = l;
    }
    if let Some(s) = args.status_listen {
        loaded.config.daemon.status_listen = Some(s);
    }
    let cache = super::fil::use_cache(&loaded, None)?;
    let config = loaded.config;
    let session = super::Session::start(&config, args.timeline.as_deref())?;
    let options = session.engine_options(&config);
    session.rt.block_on(async move {
        let running = cuzk::daemon::start(config, options)
            .await
            .context("starting the daemon")?;
        eprintln!(
            "cuzk daemon: listening on {} (graph {}, backend {}); Filecoin parameters in {}{}",
            running.listen,
            running.core.engine.graph().name,
            running.core.engine.backend().name(),
            cache.display(),
            running
                .status
                .map_or(String::new(), |a| format!("; status page http://{a}/"))
        );
        running.until_signal().await
    })?;
    eprintln!("cuzk daemon: stopped");
    Ok(ExitCode::SUCCESS)
}
