//! `cuzk setup`: generate parameters for a built-in workload.

use std::path::PathBuf;
use std::process::ExitCode;

use cuzk::params;
use cuzk::stages::Workload;

#[derive(clap::Args)]
pub struct Args {
    /// chain or sha256.
    #[arg(long, default_value = "chain")]
    workload: String,
    /// log2 of the constraint count (domain size).
    #[arg(long, default_value_t = 14)]
    log_size: u32,
    /// Directory to write the parameter file into.
    #[arg(long)]
    out: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let workload = Workload::parse(&args.workload)?;
    workload.check_log_size(args.log_size)?;
    let path = args.out.join(params::file_name(workload, args.log_size));
    let took = params::generate(workload, args.log_size, &path)?;
    let size = std::fs::metadata(&path)?.len();
    println!(
        "wrote {} ({}, {} at 2^{}) in {:.1} s",
        path.display(),
        cuzk::report::mib(size),
        workload.describe(args.log_size),
        args.log_size,
        took.as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
