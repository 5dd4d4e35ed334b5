//! cuzk-gpu: the NTT and MSM operations the proving stages run, on the GPU
//! where one is usable and on the CPU otherwise, plus device discovery,
//! device memory, streams and events, page-locked arenas and the VRAM budget.

pub mod cpu;
pub mod cuda;
pub mod device;
pub mod fixed;
pub mod fixed_base;
pub mod ops;
pub mod vram;

/// Whether this binary carries GPU kernels, and for which targets
/// (`sm_XY` machine code, `compute_XY` PTX, comma-separated).
pub fn kernels() -> Option<&'static str> {
    cuzk_kernels::built().then_some(cuzk_kernels::ARCHS)
}

/// The CUDA release the kernels were built with (`13.0`).
pub fn cuda_release() -> &'static str {
    cuzk_kernels::CUDA_RELEASE
}
