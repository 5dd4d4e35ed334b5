//! Finding GPUs: through the CUDA driver, loaded dynamically, so the same
//! binary runs (on the CPU) where there is no driver or no device.

use cudarc::driver::CudaContext;

/// One device as the driver reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub total_mem: usize,
    pub free_mem: usize,
    pub compute_capability: (i32, i32),
}

impl DeviceInfo {
    /// Whether the kernels in this binary can run on it (they are built for
    /// exactly the architectures in `cuzk_kernels::ARCHS`).
    pub fn runs_kernels(&self) -> bool {
        let (major, minor) = self.compute_capability;
        cuzk_kernels::ARCHS
            .split(',')
            .any(|a| a == format!("sm_{major}{minor}"))
    }
}

/// Lists the devices, or says why there are none to use.
pub fn probe() -> Result<Vec<DeviceInfo>, String> {
    // SAFETY: only looks for the shared library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("no CUDA driver (libcuda.so) on this machine".into());
    }
    let count =
        CudaContext::device_count().map_err(|e| format!("the CUDA driver failed to start: {e}"))?;
    if count <= 0 {
        return Err("the CUDA driver reports no devices".into());
    }
    (0..count as usize)
        .map(|ordinal| {
            let ctx = CudaContext::new(ordinal).map_err(|e| format!("device {ordinal}: {e}"))?;
            let (free_mem, total_mem) = ctx
                .mem_get_info()
                .map_err(|e| format!("device {ordinal}: {e}"))?;
            Ok(DeviceInfo {
                ordinal,
                name: ctx.name().map_err(|e| format!("device {ordinal}: {e}"))?,
                total_mem,
                free_mem,
                compute_capability: ctx
                    .compute_capability()
                    .map_err(|e| format!("device {ordinal}: {e}"))?,
            })
        })
        .collect()
}

/// The first device that runs this binary's kernels, or why there is none
/// (GPU tests print the reason and skip).
pub fn usable_device() -> Result<DeviceInfo, String> {
    if !cuzk_kernels::built() {
        return Err("this build carries no GPU kernels (no nvcc at build time)".into());
    }
    probe()?
        .into_iter()
        .find(DeviceInfo::runs_kernels)
        .ok_or_else(|| format!("no device runs kernels built for {}", cuzk_kernels::ARCHS))
}
