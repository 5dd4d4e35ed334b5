//! `cuzk info`: the kernels this binary carries, the devices found, and the
//! backend a job would use (with the reason when it is the CPU).

use std::path::Path;
use std::process::ExitCode;

fn gib(bytes: usize) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

pub fn run(config: Option<&Path>) -> anyhow::Result<ExitCode> {
    println!("cuzk {}", env!("CARGO_PKG_VERSION"));
    match cuzk_gpu::kernels() {
        Some(archs) => {
            println!("kernels: built for {archs} (NTT, G1/G2 MSM and batch addition on sppark)")
        }
        None => println!("kernels: none (built without nvcc; CPU backend only)"),
    }
    match cuzk_gpu::device::probe() {
        Ok(devices) => {
            println!("devices:");
            for d in devices {
                println!(
                    "  {}: {}, {} total, {} free, compute capability {}.{}, runs the kernels: {}",
                    d.ordinal,
                    d.name,
                    gib(d.total_mem),
                    gib(d.free_mem),
                    d.compute_capability.0,
                    d.compute_capability.1,
                    if d.runs_kernels() { "yes" } else { "no" }
                );
            }
        }
        Err(why) => println!("devices: none ({why})"),
    }
    let loaded = super::load_config(config)?;
    match cuzk::backend::Backend::select(&loaded.config) {
        Ok(b) => println!(
            "backend: {} on {} logical device(s): {}",
            b.name(),
            b.devices,
            b.reason
        ),
        Err(e) => println!("backend: none: {e}"),
    }
    println!(
        "cpu: {} cores",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    Ok(ExitCode::SUCCESS)
}
