//! `cuzk setup`: generate parameters for a built-in workload.

use std::path::PathBuf;
use std::process::ExitCode;

use cuzk::params;
use cuzk::stages::Workload;
use cuzk::stages::setup::Device;

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
    /// Where the generators' multiples are computed: auto (a usable GPU,
    /// else the CPU), gpu or cpu. The parameters are the same either way.
    #[arg(long, default_value = "auto")]
    device: String,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let workload = Workload::parse(&args.workload)?;
    workload.check_log_size(args.log_size)?;
    let path = args.out.join(params::file_name(workload, args.log_size));
    let device = Device::parse(&args.device).map_err(anyhow::Error::msg)?;
    let took = params::generate(workload, args.log_size, &path, device)?;
    let size = std::fs::metadata(&path)?.len();
    println!(
        "wrote {} ({}, {} at 2^{}) in {:.1} s on {device} (test parameters from this machine's randomness)",
        path.display(),
        cuzk::report::mib(size),
        workload.describe(args.log_size),
        args.log_size,
        took.as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
