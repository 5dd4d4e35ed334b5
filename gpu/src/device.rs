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
    /// How this binary's kernels run on it, if they do.
    pub fn kernel_route(&self) -> Option<KernelRoute> {
        route_for(
            cuzk_kernels::ARCHS,
            self.compute_capability,
            std::env::var_os("CUDA_FORCE_PTX_JIT").is_some_and(|v| v == "1"),
        )
    }

    /// Whether the kernels in this binary can run on it.
    pub fn runs_kernels(&self) -> bool {
        self.kernel_route().is_some()
    }

    /// `sm_XY`, as nvcc names the device's architecture.
    pub fn arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }
}

/// How a device runs the embedded kernels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelRoute {
    /// Machine code built for this `sm_XY` (the device's own, or an earlier
    /// minor revision of its major, which the device runs unchanged).
    Native(String),
    /// PTX for this `compute_XY`, compiled by the driver as each process
    /// loads the kernels: correct, but a slow start (see the README).
    Jit(String),
}

impl std::fmt::Display for KernelRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Native(sm) => write!(f, "{sm} machine code"),
            Self::Jit(ptx) => write!(f, "PTX {ptx}, JIT-compiled by the driver (slow to start)"),
        }
    }
}

/// A target's compute capability: `sm_86` and `compute_86` are (8, 6).
fn capability(digits: &str) -> Option<(i32, i32)> {
    if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (major, minor) = digits.split_at(digits.len() - 1);
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// Which of `targets` (comma-separated `sm_XY` / `compute_XY`, as the
/// kernels were built) runs on a device of compute capability `cc`: machine
/// code of the same major revision and a minor no later than the device's
/// (the latest such), else PTX of a capability no later than the device's
/// (the latest such, JIT-compiled). With `force_jit` (the driver's
/// `CUDA_FORCE_PTX_JIT=1`) the driver ignores machine code, so only PTX counts.
pub fn route_for(targets: &str, cc: (i32, i32), force_jit: bool) -> Option<KernelRoute> {
    let parsed = targets.split(',').filter_map(|t| {
        if let Some(d) = t.strip_prefix("sm_") {
            Some((false, capability(d)?, t))
        } else {
            Some((true, capability(t.strip_prefix("compute_")?)?, t))
        }
    });
    let native = parsed
        .clone()
        .filter(|&(ptx, (major, minor), _)| !ptx && !force_jit && major == cc.0 && minor <= cc.1)
        .max_by_key(|&(_, c, _)| c);
    if let Some((_, _, t)) = native {
        return Some(KernelRoute::Native(t.to_string()));
    }
    parsed
        .filter(|&(ptx, c, _)| ptx && c <= cc)
        .max_by_key(|&(_, c, _)| c)
        .map(|(_, _, t)| KernelRoute::Jit(t.to_string()))
}

/// The CUDA version the driver supports, e.g. (13, 0).
pub fn driver_cuda_version() -> Option<(i32, i32)> {
    // SAFETY: only looks for the shared library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return None;
    }
    let mut v = 0;
    // SAFETY: writes one int; needs no initialised driver.
    let ok = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    (ok == cudarc::driver::sys::CUresult::CUDA_SUCCESS && v > 0)
        .then_some((v / 1000, v % 1000 / 10))
}

/// Why the driver cannot run kernels built with this binary's CUDA release,
/// if it cannot: the runtime needs a driver of the same major version or
/// newer (CUDA 13 needs driver 580 or later).
pub fn driver_problem() -> Option<String> {
    let built = capability_of_release(cuzk_kernels::CUDA_RELEASE)?;
    let (major, minor) = driver_cuda_version()?;
    (major < built.0).then(|| {
        format!(
            "the NVIDIA driver supports CUDA {major}.{minor}, the kernels were built with CUDA {}: install driver {} or later",
            cuzk_kernels::CUDA_RELEASE,
            if built.0 >= 13 { "580" } else { "the matching" }
        )
    })
}

/// `13.0` as (13, 0).
fn capability_of_release(release: &str) -> Option<(i32, i32)> {
    let (major, minor) = release.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
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
    if let Some(why) = driver_problem() {
        return Err(why);
    }
    probe()?
        .into_iter()
        .find(DeviceInfo::runs_kernels)
        .ok_or_else(|| format!("no device runs kernels built for {}", cuzk_kernels::ARCHS))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RELEASE: &str = "sm_75,sm_80,sm_86,sm_89,sm_90,sm_100,sm_120,compute_120";

    fn route(targets: &str, cc: (i32, i32)) -> Option<KernelRoute> {
        route_for(targets, cc, false)
    }

    #[test]
    fn every_card_storage_providers_own_gets_machine_code() {
        let native = |s: &str| Some(KernelRoute::Native(s.into()));
        assert_eq!(route(RELEASE, (7, 5)), native("sm_75")); // RTX 2080, T4
        assert_eq!(route(RELEASE, (8, 0)), native("sm_80")); // A100
        assert_eq!(route(RELEASE, (8, 6)), native("sm_86")); // RTX 3090
        assert_eq!(route(RELEASE, (8, 7)), native("sm_86")); // Jetson Orin: sm_86 runs on 8.7
        assert_eq!(route(RELEASE, (8, 9)), native("sm_89")); // RTX 4090, L40S
        assert_eq!(route(RELEASE, (9, 0)), native("sm_90")); // H100, H200
        assert_eq!(route(RELEASE, (10, 0)), native("sm_100")); // B200
        assert_eq!(route(RELEASE, (10, 3)), native("sm_100")); // B300
        assert_eq!(route(RELEASE, (12, 0)), native("sm_120")); // RTX 5090, 5070 Ti
        assert_eq!(route(RELEASE, (12, 1)), native("sm_120")); // DGX Spark
    }

    #[test]
    fn a_future_card_jit_compiles_the_newest_ptx_and_an_older_one_has_no_route() {
        let jit = |s: &str| Some(KernelRoute::Jit(s.into()));
        assert_eq!(route(RELEASE, (13, 0)), jit("compute_120"));
        assert_eq!(route(RELEASE, (11, 0)), None); // Thor: no sm_110, PTX 12.0 is newer
        assert_eq!(route(RELEASE, (7, 0)), None); // Volta: CUDA 13 dropped it
        // A CI build: one card's code and its PTX.
        assert_eq!(
            route("sm_90,compute_90", (9, 0)),
            Some(KernelRoute::Native("sm_90".into()))
        );
        assert_eq!(route("sm_90,compute_90", (12, 0)), jit("compute_90"));
        assert_eq!(route("sm_90", (8, 9)), None);
        assert_eq!(route("sm_90", (12, 0)), None); // machine code never crosses a major
        assert_eq!(route("", (9, 0)), None);
    }

    #[test]
    fn forcing_the_jit_leaves_only_ptx() {
        assert_eq!(
            route_for("sm_90,compute_90", (9, 0), true),
            Some(KernelRoute::Jit("compute_90".into()))
        );
        assert_eq!(route_for("sm_90", (9, 0), true), None);
    }

    #[test]
    fn releases_and_capabilities_parse() {
        assert_eq!(capability("120"), Some((12, 0)));
        assert_eq!(capability("86"), Some((8, 6)));
        assert_eq!(capability("9"), None);
        assert_eq!(capability("9a"), None);
        assert_eq!(capability_of_release("13.0"), Some((13, 0)));
        assert_eq!(capability_of_release(""), None);
    }
}
