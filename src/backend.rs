//! Which backend runs the device stages, on which devices, and why.

use std::sync::Arc;

use cuzk_config::{Backend as Requested, Config};
use cuzk_gpu::device::{DeviceInfo, KernelRoute, driver_problem, probe};
use cuzk_stages::gpu::{GpuContext, GpuDevice};

/// The backends this binary can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    Cpu,
    Gpu,
}

/// The chosen backend, how many logical devices it drives, and the reason.
#[derive(Clone, Debug)]
pub struct Backend {
    pub choice: BackendChoice,
    /// Logical devices: each has its own workers and locks.
    pub devices: usize,
    /// For the GPU backend, the physical device behind each logical one.
    pub gpus: Vec<DeviceInfo>,
    /// Why this backend: shown by `cuzk info` and `cuzk prove`.
    pub reason: String,
}

impl Backend {
    pub fn name(&self) -> &'static str {
        match self.choice {
            BackendChoice::Cpu => "cpu",
            BackendChoice::Gpu => "gpu",
        }
    }

    /// Picks the backend the configuration asks for, or says why it cannot.
    pub fn select(config: &Config) -> Result<Self, String> {
        let cpu = |reason: String| Backend {
            choice: BackendChoice::Cpu,
            devices: config.gpu.logical_devices.max(1),
            gpus: vec![],
            reason,
        };
        if config.gpu.backend == Requested::Cpu {
            return Ok(cpu("gpu.backend = \"cpu\"".into()));
        }
        match Self::usable_gpus(config) {
            Ok(gpus) => {
                let logical = if config.gpu.logical_devices > 0 {
                    config.gpu.logical_devices
                } else {
                    gpus.len()
                };
                let names: Vec<String> = gpus
                    .iter()
                    .map(|g| format!("{} ({}, {})", g.ordinal, g.name, g.arch()))
                    .collect();
                for g in &gpus {
                    if let Some(KernelRoute::Jit(ptx)) = g.kernel_route() {
                        tracing::warn!(
                            "device {} ({}, {}): this binary has no machine code for it, so the driver JIT-compiles PTX {ptx}: it works, but starting each process costs minutes (on an H100, 80-106 s against 8.6 s for the GPU proof tests); build with CUZK_CUDA_ARCHS including {}",
                            g.ordinal,
                            g.name,
                            g.arch(),
                            g.arch()
                        );
                    }
                }
                Ok(Backend {
                    choice: BackendChoice::Gpu,
                    devices: logical,
                    reason: format!(
                        "GPU {} with kernels for {}",
                        names.join(", "),
                        cuzk_gpu::kernels().unwrap_or("")
                    ),
                    gpus: (0..logical).map(|i| gpus[i % gpus.len()].clone()).collect(),
                })
            }
            Err(why) if config.gpu.backend == Requested::Gpu => {
                Err(format!("gpu.backend = \"gpu\" but {why}"))
            }
            Err(why) => {
                // A GPU in the machine that the binary cannot use is a
                // 30-100x slowdown the operator must hear about; no GPU at
                // all is the ordinary CPU case.
                if probe().is_ok_and(|found| !found.is_empty()) {
                    tracing::warn!(
                        "a GPU is present but unusable: {why}; proving on the CPU, 30-100x slower. Fix the cause, or set gpu.backend = \"cpu\" to choose the CPU knowingly"
                    );
                }
                Ok(cpu(why))
            }
        }
    }

    /// The configured devices that can run this binary's kernels.
    fn usable_gpus(config: &Config) -> Result<Vec<DeviceInfo>, String> {
        if cuzk_gpu::kernels().is_none() {
            return Err("this binary carries no GPU kernels (built without nvcc)".into());
        }
        if let Some(why) = driver_problem() {
            return Err(why);
        }
        let found = probe()?;
        let chosen: Vec<DeviceInfo> = if config.gpu.devices.is_empty() {
            found.clone()
        } else {
            config
                .gpu
                .devices
                .iter()
                .map(|&d| {
                    found.iter().find(|g| g.ordinal == d).cloned().ok_or_else(|| {
                        format!("config error at `gpu.devices`: device {d} does not exist ({} found)", found.len())
                    })
                })
                .collect::<Result<_, _>>()?
        };
        let (usable, unusable): (Vec<_>, Vec<_>) =
            chosen.into_iter().partition(DeviceInfo::runs_kernels);
        if usable.is_empty() {
            let why: Vec<String> = unusable
                .iter()
                .map(|g| format!("device {} ({}) is {}", g.ordinal, g.name, g.arch()))
                .collect();
            return Err(format!(
                "no device runs the kernels, built for {}: {}; rebuild with CUZK_CUDA_ARCHS naming the card's architecture (kernels/build.rs)",
                cuzk_gpu::kernels().unwrap_or(""),
                why.join("; ")
            ));
        }
        Ok(usable)
    }

    /// The shared state of the GPU stages: one entry per logical device,
    /// logical devices on one GPU sharing its budget and resident SRS.
    pub fn gpu_context(&self, config: &Config) -> Arc<GpuContext> {
        let mut physical: Vec<Arc<GpuDevice>> = vec![];
        let devices = self
            .gpus
            .iter()
            .map(|g| {
                if let Some(d) = physical.iter().find(|d| d.ordinal == g.ordinal as i32) {
                    return d.clone();
                }
                let budget = match config.gpu.vram_budget.bytes() {
                    0 => g.free_mem / 10 * 9,
                    b => b as usize,
                };
                let d = GpuDevice::new(g.ordinal as i32, budget);
                physical.push(d.clone());
                d
            })
            .collect();
        let tables = cuzk_stages::gpu::TablePolicy {
            enabled: config.gpu.msm_tables,
            budget: config.gpu.msm_table_budget.bytes() as usize,
        };
        let mut gpu = GpuContext::new(devices, config.gpu.srs_resident, tables);
        gpu.pce_matrices = config.gpu.pce_matrices;
        gpu.stream_chunk = config.gpu.stream_chunk.bytes() as usize;
        gpu.dense = cuzk_gpu::fixed::DenseChoice::from_log(
            config.gpu.dense_msm_min_log,
            config.gpu.dense_msm_window,
        );
        gpu.partition_buffers = match config.gpu.partition_buffers {
            cuzk_config::PartitionBuffers::Auto => cuzk_stages::gpu::BufferLayout::Auto,
            cuzk_config::PartitionBuffers::Full => cuzk_stages::gpu::BufferLayout::Full,
            cuzk_config::PartitionBuffers::Compact => cuzk_stages::gpu::BufferLayout::Compact,
        };
        Arc::new(gpu)
    }
}

#[cfg(test)]
mod tests {
    /// The config's default dense-MSM choice is the one measured on a card
    /// and kept beside the kernels.
    #[test]
    fn the_configs_dense_msm_default_is_the_measured_one() {
        let gpu = cuzk_config::Config::default().gpu;
        assert_eq!(
            cuzk_gpu::fixed::DenseChoice::from_log(gpu.dense_msm_min_log, gpu.dense_msm_window),
            cuzk_gpu::fixed::DenseChoice::default()
        );
    }
}
