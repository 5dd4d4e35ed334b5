//! cuzk-stages: the Groth16 proving stages, the SRS they read and the
//! built-in workloads.
//!
//! A partition ([`PartitionWork`]) flows through:
//!
//! ```text
//! synth ──▶ prep_msm ──▶ gpu_ntt_msm ──▶ b_g2_msm ──▶ assemble
//! ```
//!
//! Each stage is an [`cuzk_engine::Stage`]: it transforms the partition in
//! place and knows nothing about channels, workers or locks.

pub mod assemble;
pub mod b_g2;
pub mod circuit;
pub mod cs;
pub mod gpu;
pub mod ntt_msm;
pub mod partition;
pub mod prep;
pub mod query;
pub mod scalars;
pub mod srs;
pub mod synth;
pub use cuzk_workloads as workloads;

use std::sync::Arc;

use cuzk_engine::StageRegistry;

pub use circuit::ProvableCircuit;
pub use partition::PartitionWork;
pub use srs::{Srs, SrsError, SrsShape};
pub use workloads::Workload;

/// Stage names graph declarations refer to.
pub mod names {
    pub const SYNTH: &str = "synth";
    pub const PREP_MSM: &str = "prep_msm";
    pub const GPU_NTT_MSM: &str = "gpu_ntt_msm";
    /// The first half of gpu_ntt_msm: allocate device memory and upload.
    pub const GPU_STAGE_IN: &str = "gpu_stage_in";
    /// The second half: run the kernels and download the results.
    pub const GPU_COMPUTE: &str = "gpu_compute";
    pub const B_G2_MSM: &str = "b_g2_msm";
    pub const ASSEMBLE: &str = "assemble";
}

/// Every stage, with the GPU implementation of the device stages.
pub fn gpu_stages(ctx: Arc<gpu::GpuContext>) -> StageRegistry<PartitionWork> {
    let mut r = cpu_stages();
    r.register(names::GPU_NTT_MSM, Arc::new(gpu::GpuNttMsm(ctx.clone())))
        .register(names::GPU_STAGE_IN, Arc::new(gpu::GpuStageIn(ctx.clone())))
        .register(names::GPU_COMPUTE, Arc::new(gpu::GpuCompute(ctx.clone())));
    if ctx.b_g2_on_gpu {
        r.register(names::B_G2_MSM, Arc::new(gpu::GpuBG2Msm));
    }
    r
}

/// Every stage, with the CPU implementation of the device stages.
pub fn cpu_stages() -> StageRegistry<PartitionWork> {
    let mut r = StageRegistry::new();
    r.register(names::SYNTH, Arc::new(synth::Synth))
        .register(names::PREP_MSM, Arc::new(prep::PrepMsm))
        .register(names::GPU_NTT_MSM, Arc::new(ntt_msm::CpuNttMsm))
        .register(names::GPU_STAGE_IN, Arc::new(ntt_msm::CpuStageIn))
        .register(names::GPU_COMPUTE, Arc::new(ntt_msm::CpuNttMsm))
        .register(names::B_G2_MSM, Arc::new(b_g2::CpuBG2Msm))
        .register(names::ASSEMBLE, Arc::new(assemble::Assemble));
    r
}
