//! CPU implementations of every GPU operation: the fallback backend, and the
//! reference the GPU kernels are tested against.

pub mod msm;
pub mod ntt;
