//! `cuzk waterfall`: a TIMELINE log to a waterfall chart and a summary.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(clap::Args)]
pub struct Args {
    /// A log with TIMELINE lines (cuzk's, or the seeds' daemon logs).
    pub log: PathBuf,
    /// Output path: writes OUT.svg and OUT.html.
    #[arg(short = 'o', long = "out")]
    pub out: PathBuf,
    /// Ignore GPU idle gaps shorter than this.
    #[arg(long, default_value_t = 0.0)]
    pub min_gap_ms: f64,
    /// Also write the summary as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn render(
    log: &std::path::Path,
    out: &std::path::Path,
    min_gap_ms: f64,
    json: Option<&PathBuf>,
) -> anyhow::Result<cuzk::waterfall::Summary> {
    let text =
        std::fs::read_to_string(log).with_context(|| format!("reading {}", log.display()))?;
    let w = cuzk::waterfall::from_log(&text, min_gap_ms);
    anyhow::ensure!(
        w.summary.events > 0,
        "{} has no TIMELINE lines",
        log.display()
    );
    let title = format!(
        "cuzk waterfall: {}",
        log.file_name()
            .map_or_else(|| log.display().to_string(), |n| n.to_string_lossy().into())
    );
    let (svg, html) = w.write(out, &title)?;
    print!("{}", w.summary.render());
    println!("wrote {} and {}", svg.display(), html.display());
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_string_pretty(&w.summary)?)?;
    }
    Ok(w.summary)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    render(&args.log, &args.out, args.min_gap_ms, args.json.as_ref())?;
    Ok(ExitCode::SUCCESS)
}
