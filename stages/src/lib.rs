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
pub mod measure;
pub mod ntt_msm;
pub mod partition;
pub mod pce;
pub mod prep;
pub mod query;
pub mod scalars;
pub mod setup;
pub mod shape;
pub mod srs;
pub mod synth;
pub mod synth_pce;
pub use cuzk_workloads as workloads;

use std::sync::Arc;

use cuzk_engine::StageRegistry;

pub use circuit::ProvableCircuit;
pub use partition::PartitionWork;
pub use shape::{CircuitShape, shape_of};
pub use srs::{Srs, SrsError, SrsShape};
pub use synth::slices as synth_slices;
pub use workloads::Workload;

/// Stage names graph declarations refer to. The device stages (the
/// `gpu_*` ones and `b_g2_msm`) run on the backend's device: the GPU, or the
/// CPU on the CPU backend.
pub mod names {
    pub const SYNTH: &str = "synth";
    /// Synthesis with pre-compiled constraints (witness-only after the first
    /// partition of a circuit shape).
    pub const SYNTH_PCE: &str = "synth_pce";
    /// synth_pce leaving a, b and c to the device stage, which evaluates them
    /// from the recording in device memory (on the CPU backend: synth_pce).
    pub const SYNTH_WITNESS: &str = "synth_witness";
    pub const PREP_MSM: &str = "prep_msm";
    /// Device: staging and compute in one step (the quotient by NTTs and the
    /// H, L, A and B₁ MSMs).
    pub const GPU_NTT_MSM: &str = "gpu_ntt_msm";
    /// Device: the first half of gpu_ntt_msm, uploading the partition into
    /// its device lease.
    pub const GPU_STAGE_IN: &str = "gpu_stage_in";
    /// Device: the second half, the kernels on the staged lease.
    pub const GPU_COMPUTE: &str = "gpu_compute";
    /// Device: the B query in G2 (on the GPU, from the partition's device lease).
    pub const B_G2_MSM: &str = "b_g2_msm";
    /// The B query in G2 on the CPU, from the host arena, whatever the backend.
    pub const B_G2_MSM_HOST: &str = "b_g2_msm_host";
    pub const ASSEMBLE: &str = "assemble";
    /// Every stage name.
    pub const ALL: [&str; 10] = [
        SYNTH,
        SYNTH_PCE,
        SYNTH_WITNESS,
        PREP_MSM,
        GPU_NTT_MSM,
        GPU_STAGE_IN,
        GPU_COMPUTE,
        B_G2_MSM,
        B_G2_MSM_HOST,
        ASSEMBLE,
    ];
}

/// Every stage, with the GPU implementation of the device stages. Their
/// device state comes from the graph's device leases, made by
/// [`gpu::GpuLeases`].
pub fn gpu_stages(
    ctx: Arc<gpu::GpuContext>,
    pce: Arc<pce::PceCache>,
) -> StageRegistry<PartitionWork> {
    let mut r = cpu_stages(pce.clone());
    let witness = synth_pce::SynthPce {
        cache: pce,
        defer_abc: true,
    };
    r.register(names::SYNTH_WITNESS, Arc::new(witness))
        .register(names::GPU_NTT_MSM, Arc::new(gpu::GpuNttMsm(ctx.clone())))
        .register(names::GPU_STAGE_IN, Arc::new(gpu::GpuStageIn(ctx.clone())))
        .register(names::GPU_COMPUTE, Arc::new(gpu::GpuCompute(ctx)))
        .register(names::B_G2_MSM, Arc::new(gpu::GpuBG2Msm));
    r
}

/// Every stage, with the CPU implementation of the device stages;
/// synth_pce keeps its recordings in `pce`.
pub fn cpu_stages(pce: Arc<pce::PceCache>) -> StageRegistry<PartitionWork> {
    let host_pce = synth_pce::SynthPce {
        cache: pce,
        defer_abc: false,
    };
    let mut r = StageRegistry::new();
    r.register(names::SYNTH, Arc::new(synth::Synth))
        .register(names::SYNTH_PCE, Arc::new(host_pce.clone()))
        .register(names::SYNTH_WITNESS, Arc::new(host_pce))
        .register(names::PREP_MSM, Arc::new(prep::PrepMsm))
        .register(names::GPU_NTT_MSM, Arc::new(ntt_msm::CpuNttMsm))
        .register(names::GPU_STAGE_IN, Arc::new(ntt_msm::CpuStageIn))
        .register(names::GPU_COMPUTE, Arc::new(ntt_msm::CpuNttMsm))
        .register(names::B_G2_MSM, Arc::new(b_g2::CpuBG2Msm))
        .register(names::B_G2_MSM_HOST, Arc::new(b_g2::CpuBG2Msm))
        .register(names::ASSEMBLE, Arc::new(assemble::Assemble));
    r
}
