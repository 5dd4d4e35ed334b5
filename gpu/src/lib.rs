//! cuzk-gpu: the NTT and MSM operations the proving stages run, on the GPU
//! where one is usable and on the CPU otherwise, plus device discovery,
//! device memory, streams and events, page-locked arenas and the VRAM budget.

pub mod cpu;
pub mod cuda;
pub mod device;
pub mod fixed;
pub mod ops;
pub mod vram;

/// Whether this binary carries GPU kernels, and for which architectures.
pub fn kernels() -> Option<&'static str> {
    cuzk_kernels::built().then_some(cuzk_kernels::ARCHS)
}
