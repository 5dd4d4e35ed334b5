//! cuzk-kernels: cuzk's CUDA kernels, written on sppark's BLS12-381 field,
//! NTT, MSM and batch-addition templates and compiled by nvcc for every
//! architecture from Turing (sm_75) to Blackwell (sm_120), plus PTX.
//!
//! Every entry point takes raw device pointers and says what failed. When
//! the crate was built without nvcc, [`built`] is false and every entry point
//! returns [`KernelError::NotBuilt`]; nothing here touches a GPU by itself.
//!
//! The entry points are split so the caller decides when to allocate and
//! upload, when to compute and when to download, and on which stream: every
//! kernel entry point takes the caller's stream (a device lease's). The one
//! exception is sppark's `msm_t` inside the MSM entry points: it runs on the
//! device's shared streams, ordered after the caller's stream's work, which
//! is why graph declarations hold a per-device lock around MSM work.

use std::ffi::{c_char, c_void};

/// The targets the embedded kernels were compiled for, comma-separated:
/// `sm_XY` for machine code, `compute_XY` for PTX ("" if none).
pub const ARCHS: &str = env!("CUZK_KERNEL_ARCHS");

/// The CUDA release of the nvcc that built them (`13.0`; "" if none).
pub const CUDA_RELEASE: &str = env!("CUZK_CUDA_RELEASE");

/// Whether this build carries GPU kernels.
pub const fn built() -> bool {
    cfg!(cuzk_kernels)
}

/// A failed kernel call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelError {
    /// The binary was built without nvcc.
    NotBuilt,
    /// CUDA (or sppark) reported an error; the message names the call.
    Cuda { code: i32, message: String },
}

impl std::fmt::Display for KernelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotBuilt => write!(
                f,
                "this binary was built without GPU kernels (no nvcc at build time)"
            ),
            Self::Cuda { code, message } => write!(f, "CUDA error {code}: {message}"),
        }
    }
}

impl std::error::Error for KernelError {}

impl KernelError {
    /// Whether CUDA could not allocate device memory (`cudaErrorMemoryAllocation`):
    /// not sticky, so the caller may retry with less.
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, Self::Cuda { code: 2, .. })
    }
}

/// Status every entry point returns (sppark's RustError).
#[repr(C)]
pub struct Status {
    code: i32,
    message: *mut c_char,
}

unsafe extern "C" {
    fn free(ptr: *mut c_void);
}

impl Status {
    fn into_result(self) -> Result<(), KernelError> {
        if self.code == 0 {
            return Ok(());
        }
        let message = if self.message.is_null() {
            "no message".to_string()
        } else {
            // SAFETY: a NUL-terminated string strdup'ed by the C++ side.
            let s = unsafe { std::ffi::CStr::from_ptr(self.message) }
                .to_string_lossy()
                .into_owned();
            // SAFETY: allocated by strdup, ours to free.
            unsafe { free(self.message.cast()) };
            s
        };
        Err(KernelError::Cuda {
            code: self.code,
            message,
        })
    }
}

/// A scalar in Montgomery form (blst_fr / sppark fr_t).
pub type Fr = [u64; 4];

/// How the scalars an MSM reads are encoded.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalarForm {
    /// Little-endian integers below r (what prep_msm leaves).
    Canonical = 0,
    /// Montgomery form (what the NTT leaves).
    Montgomery = 1,
}

/// How an accumulation kernel adds a point into a bucket's XYZZ sum.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddForm {
    /// sppark's `add`, straight-line: level 0's G1 kernel is then 7,672
    /// sm_90 instructions (123 KB), the mixed addition's ~2,900
    /// multiply-adds and then its rarely taken doubling's ~1,800.
    Inlined = 0,
    /// sppark's `uadd`: one multiplication site run in a loop (squarings
    /// as multiplications, a doubling through the same site), code the
    /// instruction cache holds. Measured slower (H100: G1 dense 2^26 450.6
    /// ms against 425.7, G1 2^24 table 105.8 against 104.4), kept for
    /// side-by-side timing.
    Looped = 1,
    /// The inlined addition with Y3 = R·(Q − X3) − Y1·PPP as one dot
    /// product (sppark's `mont_t::dot_product`: two products, one
    /// Montgomery reduction), ~144 fewer multiply-adds an addition of
    /// ~2,900; G1 only (G2 adds inlined). Not yet measured.
    Fused = 2,
}

impl AddForm {
    /// Every form.
    pub const ALL: [AddForm; 3] = [Self::Inlined, Self::Looped, Self::Fused];

    /// The forms this one is not (what benchmarks run beside the default).
    pub fn others(self) -> impl Iterator<Item = AddForm> {
        Self::ALL.into_iter().filter(move |&f| f != self)
    }
}

/// The fixed-base MSM's launch shape, chosen on the Rust side (the
/// benchmarks turn these knobs; `cuzk_gpu::fixed::tuning`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsmTuning {
    /// Level-0 accumulation threads per SM.
    pub threads_per_sm: u32,
    /// Slots per segment above level 0.
    pub edge_seg: u32,
    /// Bucket-reduction threads per SM, at most (each sums a chunk of at
    /// least 32 buckets).
    pub reduce_per_sm: u32,
    /// Threads per block of level 0 with runs stored, 64 or 128 (above, 128;
    /// below, 64), and of the ones' sums, 64, 128 or 256 (others round down
    /// to one of these; below 64, 64). Fewer threads a block fit more warps
    /// an SM where the addition's registers leave a 256-thread block's
    /// worth of room and a bit.
    pub block: u32,
    /// Level 0 asks L2 for the table point of the entry this many ahead of
    /// the one it adds (`prefetch.global.L2`, no registers held for it), so
    /// the random read's latency, and its page walk, overlap the additions
    /// between; 0: none. Unmeasured, so off by default.
    pub ahead: u32,
    /// How level 0 and the ones' sums add a point into a sum.
    pub add: AddForm,
    /// Level 0 adds table entries in affine pairs (measured slower: H100,
    /// G1 dense 2^26 at window 20, 520 ms against 430 one by one).
    pub pairs: bool,
    /// Prints each phase's device time to stderr.
    pub profile: bool,
    /// Level 0 adds each run into its bucket in place, as before runs were
    /// stored into buckets zeroed per chunk (kept for side-by-side timing).
    pub runs_added: bool,
    /// Chunks of digits are always some terms over every window (each later
    /// chunk's buckets merged), as before chunks of whole windows over every
    /// term (kept for side-by-side timing).
    pub chunk_terms: bool,
    /// The ones' sums run on sppark's batch addition (one 256-thread block
    /// an SM, the earlier way) instead of ours in blocks of `block` threads
    /// (kept for side-by-side timing).
    pub ones_sppark: bool,
}

impl Default for MsmTuning {
    fn default() -> Self {
        Self {
            threads_per_sm: 1024,
            edge_seg: 4,
            reduce_per_sm: 512,
            // 64: H100, G1 2^24 table 100.5 ms against 104.9 at 256, G2
            // 2^24 279.1 against 293.3, dense G1 2^26 425.4 against 427.6
            // (`scripts/h200.sh blocks`); 128 within 0.3% of 64.
            block: 64,
            ahead: 0,
            // Inlined: the looped form was 3-7% slower everywhere (H100,
            // `scripts/h200.sh looped`).
            add: AddForm::Inlined,
            pairs: false,
            profile: false,
            // Runs stored: G1 2^26 over the plain points at window 20,
            // 447 ms against 1,265 added (H100, `scripts/h200.sh dense`).
            runs_added: false,
            chunk_terms: false,
            ones_sppark: false,
        }
    }
}

/// One fixed-base MSM (`cuzk_g1_msm_fixed`, `cuzk_g2_msm_fixed`):
/// `sum(bases[i_k] · scalars[j_k])` for k < n over `table`, with i_k =
/// `base_idx[k]` (or `base_off + k` when null) and j_k = `scalar_idx[k]` (or
/// k); device pointers. `max_entries` bounds the digits sorted at once (0:
/// the kernel's default).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FixedMsmArgs {
    pub table: MsmTable,
    pub base_off: u64,
    pub base_idx: *const u32,
    pub scalars: *const Fr,
    pub scalar_idx: *const u32,
    pub n: u64,
    pub max_entries: u64,
    pub form: ScalarForm,
    pub tuning: MsmTuning,
}

/// A table of precomputed multiples of one query's bases, as the fixed-base
/// MSM reads it: `base` holds `ntab` points (the SRS query on the device),
/// `extra` copies 1..`copies`-1, copy t (at (t-1)·ntab) being 2^(window·t)
/// times the bases.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MsmTable {
    pub base: *const c_void,
    pub extra: *const c_void,
    pub ntab: u64,
    pub window: u32,
    pub copies: u32,
}

/// One recorded matrix on the device: row pointers, columns (`u32`) and
/// coefficient codes (`u16`, or `u32` where the recording is wide).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PceMatrix {
    pub row_ptr: *const u32,
    pub cols: *const u32,
    pub codes: *const c_void,
}

/// The arguments of `cuzk_pce_eval`: a, b, c over `n` rows from A, B and C
/// and the canonical assignment `z` (its first `n_inputs` the inputs), in
/// Montgomery form. Every pointer is the device's.
#[repr(C)]
#[derive(Debug)]
pub struct PceEvalArgs {
    pub matrices: [PceMatrix; 3],
    /// The codes are `u32` (else `u16`).
    pub wide: u32,
    /// The circuit's own constraints (rows of each matrix).
    pub constraints: u32,
    pub n_inputs: u32,
    /// Rows to write: constraints, an `a = input` row per input, zeros after.
    pub n: u64,
    /// The distinct general coefficients and 2^k for k < 256.
    pub table: *const Fr,
    pub pow2: *const Fr,
    pub z: *const Fr,
    pub a: *mut Fr,
    pub b: *mut Fr,
    pub c: *mut Fr,
}

/// How a part (inputs or aux) of a query selects its variables.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrepMode {
    None = 0,
    All = 1,
    /// Those whose bit is set in a device bitmap of u64 words.
    Bitmap = 2,
}

/// The arguments of `cuzk_prep_query`: one MSM query's index lists from the
/// canonical assignment `z` of `n` variables (the first `n_inputs` inputs).
/// Candidates are the query's selected inputs, then its selected aux
/// variables; lists are written only if `scatter`. The scan's counters go
/// into `scratch` where `scratch_bytes` hold them, else are allocated.
#[repr(C)]
#[derive(Debug)]
pub struct PrepQueryArgs {
    pub z: *const Fr,
    pub n_inputs: u32,
    pub n: u32,
    pub input_mode: PrepMode,
    pub aux_mode: PrepMode,
    pub input_bits: *const u64,
    pub aux_bits: *const u64,
    pub scatter: u32,
    pub ones: *mut u32,
    pub sig_base: *mut u32,
    pub sig_scalar: *mut u32,
    pub scratch: *mut c_void,
    pub scratch_bytes: u64,
}

/// The arguments of a fixed-base multiplication (`cuzk_g1_fixed_base_mul`,
/// `cuzk_g2_fixed_base_mul`): device pointers to the table (affine points,
/// `windows` rows of 2^(window−1) multiples `d·2^(window·j)·G`), to `n`
/// scalars in Montgomery form, to `n` affine points out (blst's layout,
/// infinity as (0, 0)), and to the kernel's scratch: `n` XYZZ points and
/// `n` field elements.
#[repr(C)]
pub struct FixedBaseArgs {
    pub table: *const c_void,
    pub scalars: *const Fr,
    pub out: *mut c_void,
    pub xyzz: *mut c_void,
    pub prefix: *mut c_void,
    pub n: u64,
    pub window: u32,
    /// ⌈256 / window⌉.
    pub windows: u32,
}

// The layouts the kernels' C structs have (static_asserts there too).
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<PrepQueryArgs>() == 88);
    assert!(offset_of!(PrepQueryArgs, input_bits) == 24);
    assert!(offset_of!(PrepQueryArgs, ones) == 48);
    assert!(offset_of!(PrepQueryArgs, scratch_bytes) == 80);
    assert!(size_of::<PceEvalArgs>() == 144);
    assert!(offset_of!(PceEvalArgs, wide) == 72);
    assert!(offset_of!(PceEvalArgs, n) == 88);
    assert!(offset_of!(PceEvalArgs, c) == 136);
    assert!(size_of::<FixedBaseArgs>() == 56);
    assert!(offset_of!(FixedBaseArgs, prefix) == 32);
    assert!(offset_of!(FixedBaseArgs, window) == 48);
    assert!(size_of::<MsmTuning>() == 32);
    assert!(offset_of!(MsmTuning, ahead) == 16);
    assert!(offset_of!(MsmTuning, add) == 20);
    assert!(size_of::<FixedMsmArgs>() == 120);
    assert!(offset_of!(FixedMsmArgs, form) == 80);
    assert!(offset_of!(FixedMsmArgs, tuning) == 84);
};

macro_rules! kernels {
    ($( $(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?); )*) => {
        #[cfg(cuzk_kernels)]
        mod ffi {
            use super::*;
            unsafe extern "C" {
                $( pub fn $name($($arg: $ty),*) -> Status; )*
            }
        }

        $(
            $(#[$doc])*
            ///
            /// # Safety
            /// Device pointers must be live allocations of the right device and
            /// size; host pointers valid for the transfer.
            #[allow(unused_variables, clippy::too_many_arguments)]
            pub unsafe fn $name($($arg: $ty),*) -> Result<(), KernelError> {
                #[cfg(cuzk_kernels)]
                {
                    // SAFETY: forwarded to the caller.
                    unsafe { ffi::$name($($arg),*) }.into_result()
                }
                #[cfg(not(cuzk_kernels))]
                {
                    Err(KernelError::NotBuilt)
                }
            }
        )*
    };
}

kernels! {
    /// Makes `device` current on this thread.
    fn cuzk_device_select(device: i32);
    /// Free and total device memory.
    fn cuzk_mem_info(device: i32, free: *mut usize, total: *mut usize);
    fn cuzk_alloc(device: i32, bytes: usize, out: *mut *mut c_void);
    fn cuzk_free(device: i32, ptr: *mut c_void);
    fn cuzk_stream_create(device: i32, out: *mut *mut c_void);
    fn cuzk_stream_destroy(device: i32, stream: *mut c_void);
    fn cuzk_stream_sync(device: i32, stream: *mut c_void);
    /// Asynchronous host-to-device copy on `stream` (DMA from page-locked memory).
    fn cuzk_htod(device: i32, stream: *mut c_void, dst: *mut c_void, src: *const c_void, bytes: usize);
    fn cuzk_dtoh(device: i32, stream: *mut c_void, dst: *mut c_void, src: *const c_void, bytes: usize);
    fn cuzk_event_create(device: i32, out: *mut *mut c_void);
    fn cuzk_event_record(device: i32, event: *mut c_void, stream: *mut c_void);
    /// Waits for `end` and gives the device time between the two events.
    fn cuzk_event_elapsed_ms(device: i32, start: *mut c_void, end: *mut c_void, ms: *mut f32);
    fn cuzk_event_destroy(device: i32, event: *mut c_void);
    /// Page-locks host memory for DMA.
    fn cuzk_host_register(ptr: *mut c_void, bytes: usize);
    fn cuzk_host_unregister(ptr: *mut c_void);
    /// H = (a·b − c)/Z on the coset, in place in `a` (natural-order coefficients);
    /// `b` and `c` are scratch. `z_inv` is 1/(7^n − 1) in Montgomery form.
    fn cuzk_quotient(device: i32, stream: *mut c_void, a: *mut Fr, b: *mut Fr, c: *mut Fr, lg: u32, z_inv: *const Fr);
    /// Evaluations over the domain to evaluations on the coset, in place.
    fn cuzk_to_coset(device: i32, stream: *mut c_void, x: *mut Fr, lg: u32);
    /// Coset evaluations to coefficients, in place (natural order).
    fn cuzk_from_coset(device: i32, stream: *mut c_void, x: *mut Fr, lg: u32);
    /// a := a·b (`op` 0) or a := (a − b)·z_inv (`op` 1) over `n` elements.
    fn cuzk_pointwise(device: i32, stream: *mut c_void, a: *mut Fr, b: *const Fr, op: u32, z_inv: *const Fr, n: usize);
    /// A natural-order NTT of device data (tests).
    fn cuzk_ntt(device: i32, stream: *mut c_void, x: *mut Fr, lg: u32, inverse: bool, coset: bool);
    /// G1: sum(points[i] * scalars[i]); `form` says how the scalars are encoded.
    /// Ordered after the work on `stream`; returns with the result on the host.
    fn cuzk_g1_msm(device: i32, stream: *mut c_void, points: *const c_void, scalars: *const Fr, n: usize, form: ScalarForm, out: *mut c_void);
    /// G1: the gathered tail MSM over packed significant terms (gathered on `stream`).
    fn cuzk_g1_msm_gathered(device: i32, stream: *mut c_void, points: *const c_void, base_idx: *const u32, scalars: *const Fr, scalar_idx: *const u32, n: usize, form: ScalarForm, out: *mut c_void);
    /// G1: sum(points[idx[k]]), by batch addition on `stream`, in blocks of
    /// `block` threads (64, 128 or 256, adding as `add` says; 0: sppark's
    /// batch addition).
    fn cuzk_g1_sum(device: i32, stream: *mut c_void, points: *const c_void, idx: *const u32, n: usize, block: u32, add: AddForm, out: *mut c_void);
    fn cuzk_g2_msm(device: i32, stream: *mut c_void, points: *const c_void, scalars: *const Fr, n: usize, form: ScalarForm, out: *mut c_void);
    fn cuzk_g2_msm_gathered(device: i32, stream: *mut c_void, points: *const c_void, base_idx: *const u32, scalars: *const Fr, scalar_idx: *const u32, n: usize, form: ScalarForm, out: *mut c_void);
    /// Pre-compiled constraints: a, b, c as `args` describes; returns, the
    /// stream synchronised, with the first row where a·b ≠ c in
    /// `first_bad` (`u32::MAX` if none).
    fn cuzk_pce_eval(device: i32, stream: *mut c_void, args: *const PceEvalArgs, first_bad: *mut u32);
    /// Montgomery to canonical form in place, queued on `stream`.
    fn cuzk_to_canonical(device: i32, stream: *mut c_void, z: *mut Fr, n: usize);
    /// prep_msm for one query as `args` describes; returns, synchronised,
    /// with `counts` = selected, ones, significant.
    fn cuzk_prep_query(device: i32, stream: *mut c_void, args: *const PrepQueryArgs, counts: *mut u32);
    fn cuzk_g2_sum(device: i32, stream: *mut c_void, points: *const c_void, idx: *const u32, n: usize, block: u32, add: AddForm, out: *mut c_void);
    /// `out[j]` = the first position in the ascending `list[0..n)` holding
    /// an index >= `values[j]`, for j < m (device pointers), queued on `stream`.
    fn cuzk_lower_bounds(device: i32, stream: *mut c_void, list: *const u32, n: u64, values: *const u32, m: u32, out: *mut u64);
    /// `list[k] += delta` (wrapping) for k < n, queued on `stream`.
    fn cuzk_shift_indices(device: i32, stream: *mut c_void, list: *mut u32, n: u64, delta: u32);
    /// G1: fills a table's copies 1..copies-1 (`extra`) from `n` bases, on `stream`.
    fn cuzk_g1_msm_table_build(device: i32, stream: *mut c_void, points: *const c_void, n: usize, window: u32, copies: u32, extra: *mut c_void);
    /// G1: the fixed-base MSM `args` describes, on `stream`, returning with
    /// the result on the host.
    fn cuzk_g1_msm_fixed(device: i32, stream: *mut c_void, args: *const FixedMsmArgs, out: *mut c_void);
    fn cuzk_g2_msm_table_build(device: i32, stream: *mut c_void, points: *const c_void, n: usize, window: u32, copies: u32, extra: *mut c_void);
    fn cuzk_g2_msm_fixed(device: i32, stream: *mut c_void, args: *const FixedMsmArgs, out: *mut c_void);
    /// G1: out[k] = scalars[k]·G over a fixed-base table, on `stream` (affine out).
    fn cuzk_g1_fixed_base_mul(device: i32, stream: *mut c_void, args: *const FixedBaseArgs);
    /// G2: as `cuzk_g1_fixed_base_mul`.
    fn cuzk_g2_fixed_base_mul(device: i32, stream: *mut c_void, args: *const FixedBaseArgs);
}

// Keep the blst dependency linked: sppark's host-side types call into it.
#[doc(hidden)]
pub use blst as _blst;
// Keep sppark linked: where its own build script found nvcc (on PATH, or
// NVCC) it compiles its device registry (select_gpu, gpu_props, ngpus) into
// its native library, which is linked only if the crate is used.
#[doc(hidden)]
pub use sppark as _sppark;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_failed_allocation_counts_as_out_of_memory() {
        let oom = KernelError::Cuda {
            code: 2,
            message: "out of memory".into(),
        };
        let launch = KernelError::Cuda {
            code: 700,
            message: "an illegal memory access was encountered".into(),
        };
        assert!(oom.is_out_of_memory());
        assert!(!launch.is_out_of_memory() && !KernelError::NotBuilt.is_out_of_memory());
    }
}
