//! `cuzk info`: the kernels this binary carries, the devices found, the
//! backend a job would use (with the reason when it is the CPU), and the
//! fixed-base MSM tables each `--params` file would get on the first device.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cuzk_stages::gpu::{
    MAX_TABLE_POINTS, QUERY_BYTES, TablePolicy, plan_tables, planned_bytes, points_bytes,
};
use cuzk_stages::srs::Srs;

#[derive(clap::Args)]
pub struct Args {
    /// Parameter files whose device memory to plan: the resident SRS, a
    /// partition's buffers, the pre-compiled matrices, the MSM tables.
    #[arg(long)]
    params: Vec<PathBuf>,
    /// Plan for a card with this much memory (e.g. 16GiB) instead of the
    /// first device's budget.
    #[arg(long)]
    vram: Option<cuzk::config::ByteSize>,
}

fn gib(bytes: usize) -> String {
    if bytes < 1 << 20 {
        return format!("{:.0} KiB", bytes as f64 / 1024.0);
    }
    if bytes < 10 << 20 {
        return format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64);
    }
    if bytes < 1 << 30 {
        return format!("{:.0} MiB", bytes as f64 / (1u64 << 20) as f64);
    }
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// `sm_75,sm_80,compute_120` as `sm_75, sm_80, PTX compute_120`.
fn carried(archs: &str) -> String {
    archs
        .split(',')
        .map(|a| match a.starts_with("compute_") {
            true => format!("PTX {a}"),
            false => a.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn run(config: Option<&Path>, args: Args) -> anyhow::Result<ExitCode> {
    println!("cuzk {}", env!("CARGO_PKG_VERSION"));
    match cuzk_gpu::kernels() {
        Some(archs) => {
            println!(
                "kernels: {} (CUDA {}; NTT and batch addition on sppark; \
                 fixed-base G1/G2 MSM over tables, ours; sppark's Pippenger for the rest)",
                carried(archs),
                cuzk_gpu::cuda_release()
            )
        }
        None => println!("kernels: none (built without nvcc; CPU backend only)"),
    }
    match cuzk_gpu::device::driver_cuda_version() {
        Some((major, minor)) => println!(
            "driver: supports CUDA {major}.{minor}{}",
            cuzk_gpu::device::driver_problem()
                .map(|why| format!(" (unusable: {why})"))
                .unwrap_or_default()
        ),
        None => println!("driver: none"),
    }
    let probed = cuzk_gpu::device::probe();
    match &probed {
        Ok(devices) => {
            println!("devices:");
            for d in devices {
                println!(
                    "  {}: {}, {} total, {} free, {}, runs the kernels: {}",
                    d.ordinal,
                    d.name,
                    gib(d.total_mem),
                    gib(d.free_mem),
                    d.arch(),
                    match d.kernel_route() {
                        Some(route) => format!("yes, {route}"),
                        None => format!("no (rebuild with CUZK_CUDA_ARCHS={})", d.arch()),
                    }
                );
            }
        }
        Err(why) => println!("devices: none ({why})"),
    }
    let loaded = super::load_config(config)?;
    let gpu = &loaded.config.gpu;
    let policy = TablePolicy {
        enabled: gpu.msm_tables,
        budget: gpu.msm_table_budget.bytes() as usize,
    };
    println!(
        "msm tables: {}",
        match (policy.enabled, policy.budget) {
            (false, _) => "off (gpu.msm_tables)".to_string(),
            (true, 0) => "on, half of the VRAM budget a resident SRS leaves".to_string(),
            (true, b) => format!("on, {} per SRS", gib(b)),
        }
    );
    // The first device's budget, as the engine would set it.
    let vram =
        match args.vram {
            Some(v) => Some(v.bytes() as usize),
            None => probed.ok().and_then(|d| d.into_iter().next()).map(|d| {
                match gpu.vram_budget.bytes() {
                    0 => d.free_mem / 10 * 9,
                    b => b as usize,
                }
            }),
        };
    for path in &args.params {
        let tables = plan(path, policy, vram)?;
        if let Some(budget) = vram {
            memory_plan(path, budget, tables, &loaded.config)?;
        }
    }
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

/// What a proof of `path`'s circuit holds in device memory, against `budget`.
fn memory_plan(
    path: &Path,
    budget: usize,
    tables: usize,
    config: &cuzk::config::Config,
) -> anyhow::Result<()> {
    let lengths = Srs::query_lengths(path)?;
    let domain = lengths[0] + 1;
    let shape = cuzk_stages::srs::SrsShape {
        domain,
        log_domain: domain.trailing_zeros(),
        inputs: 0,
        aux: lengths[1],
        a_len: lengths[2],
        b_len: lengths[3],
    };
    // The recording beside the parameters, if made (pce_gpu keeps it on the device).
    let recording = cuzk_stages::pce::PceCache::new(config.pce.dir.clone())
        .path_of(Srs::file_id(path)?, Some(path))
        .and_then(|p| std::fs::metadata(p).ok())
        .map(|m| m.len() as usize);
    print_memory_plan(lengths, &shape, recording, budget, tables, config);
    Ok(())
}

/// The device memory plan for a circuit of `shape` on a card with `budget`
/// bytes, before its parameters exist (`cuzk fil info --vram`): the MSM
/// tables as the engine would size them, the matrices not known yet.
pub fn plan_shape(
    shape: &cuzk_stages::srs::SrsShape,
    budget: usize,
    config: &cuzk::config::Config,
) {
    let lengths = [
        shape.domain - 1,
        shape.aux,
        shape.a_len,
        shape.b_len,
        shape.b_len,
    ];
    let srs = points_bytes(lengths);
    let tables = match (
        config.gpu.msm_tables,
        config.gpu.msm_table_budget.bytes() as usize,
    ) {
        (false, _) => 0,
        (true, 0) => planned_bytes(
            lengths,
            &plan_tables(lengths, budget.saturating_sub(srs) / 2),
        ),
        (true, b) => planned_bytes(lengths, &plan_tables(lengths, b)),
    };
    print_memory_plan(lengths, shape, None, budget, tables, config);
}

/// The device memory plan for a circuit of `shape` (an SRS whose queries
/// hold `lengths` points) against `budget`: what stays resident, a
/// partition's buffers full and compact, and the verdict.
pub fn print_memory_plan(
    lengths: [usize; 5],
    shape: &cuzk_stages::srs::SrsShape,
    recording: Option<usize>,
    budget: usize,
    tables: usize,
    config: &cuzk::config::Config,
) {
    let srs = points_bytes(lengths);
    let lease = cuzk_stages::gpu::partition_device_bytes(shape, false);
    let compact = cuzk_stages::gpu::partition_device_bytes(shape, true);
    println!("  device memory plan for a {} budget:", gib(budget));
    println!("    resident SRS          {}", gib(srs));
    println!(
        "    a partition's buffers {} (a, b, c over 2^{}, the assignment, index lists); compact {}",
        gib(lease),
        shape.log_domain,
        gib(compact)
    );
    match recording {
        Some(r) => println!(
            "    pre-compiled matrices {} (pce_gpu; on the host otherwise)",
            gib(r)
        ),
        None => println!(
            "    pre-compiled matrices not recorded yet (pce_gpu keeps them on the device once they are)"
        ),
    }
    if tables > 0 {
        println!(
            "    MSM tables            {} (built only where they fit beside the rest)",
            gib(tables)
        );
    }
    let fixed = srs + recording.unwrap_or(0) + tables;
    if fixed + lease <= budget {
        println!(
            "    => SRS resident, room for {} partition(s) on the device at once",
            (budget - fixed) / lease
        );
    } else if lease + srs <= budget {
        println!(
            "    => SRS resident without the matrices (a, b, c evaluated on the host), 1 partition at once"
        );
    } else if compact + srs <= budget {
        println!(
            "    => SRS resident, compact partition buffers (a, b, c evaluated on the host and passed through two buffers), 1 partition at once"
        );
    } else {
        let chunk = cuzk_stages::gpu::chunk_bytes(config.gpu.stream_chunk.bytes() as usize, budget);
        println!(
            "    streamed SRS chunks   {} (two of {} per partition; the SRS stays in page-locked host memory)",
            gib(2 * chunk),
            gib(chunk)
        );
        let (full, small) = (lease + 2 * chunk, compact + 2 * chunk);
        if full <= budget {
            println!(
                "    => the SRS does not fit: every MSM streams its points from host memory, room for {} partition(s) on the device at once",
                budget / full
            );
        } else if small <= budget {
            println!(
                "    => the SRS does not fit: every MSM streams its points from host memory; compact partition buffers (a, b, c evaluated on the host), room for {} partition(s) at once",
                budget / small
            );
        } else {
            println!(
                "    => this card cannot prove it: a partition's compact buffers and its chunks need {} of the {} budget",
                gib(small),
                gib(budget)
            );
        }
    }
}

/// The tables `path`'s queries would get beside its resident copy; their bytes.
fn plan(path: &Path, policy: TablePolicy, vram: Option<usize>) -> anyhow::Result<usize> {
    let lengths = Srs::query_lengths(path)?;
    let srs = points_bytes(lengths);
    println!("{}: SRS {} on the device", path.display(), gib(srs));
    let budget = match (policy.enabled, policy.budget, vram) {
        (false, _, _) => {
            println!("  no MSM tables (off)");
            return Ok(0);
        }
        (true, 0, None) => {
            println!("  no MSM tables (no usable GPU)");
            return Ok(0);
        }
        (true, 0, Some(v)) => v.saturating_sub(srs) / 2,
        (true, b, _) => b,
    };
    let plans = plan_tables(lengths, budget);
    for (i, name) in ["h", "l", "a", "b_g1", "b_g2"].iter().enumerate() {
        let n = lengths[i];
        match plans[i] {
            Some((window, copies)) => println!(
                "  {name:<5} {n:>11} points: window {window} bits x {copies} copies, {}",
                gib(cuzk_gpu::fixed::table_bytes(n, QUERY_BYTES[i], copies))
            ),
            None if n > MAX_TABLE_POINTS => {
                println!("  {name:<5} {n:>11} points: no table (sppark's MSM is faster above 2^25)")
            }
            None => println!("  {name:<5} {n:>11} points: no table (less than a copy fits)"),
        }
    }
    let bytes = planned_bytes(lengths, &plans);
    println!(
        "  MSM tables in all: {} of a {} budget",
        gib(bytes),
        gib(budget)
    );
    Ok(bytes)
}
