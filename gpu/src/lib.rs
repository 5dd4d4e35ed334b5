//! cuzk-gpu: the NTT and MSM operations the proving stages run, on the GPU
//! where one is usable and on the CPU otherwise, plus device discovery and
//! the per-device memory and locks the interlock variants use.

pub mod cpu;
