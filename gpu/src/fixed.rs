//! Fixed-base MSMs over tables of precomputed multiples of the SRS bases,
//! resident beside them (`kernels/cuda/fixed_msm.cuh`): copy t of a query's
//! bases is 2^(window·t) times them, so all windows of a wide window size
//! share one set of signed buckets. Tables are sized from a VRAM budget; a
//! query without one (or an MSM too small to pay for the bucket reduction)
//! runs on sppark's Pippenger (`ops::msm`).

use std::ffi::c_void;

use cuzk_kernels as k;

use crate::cuda::{DeviceBuffer, KernelError, Stream};
use crate::ops::{Fr, G1, G2, GpuCurve, ScalarForm};
pub use k::{AddForm, MsmTuning};

/// A group whose fixed-base MSM kernels exist.
pub trait FixedCurve: GpuCurve {
    /// Bytes of one affine point on the device.
    const POINT_BYTES: usize;
    /// # Safety
    /// `points` holds `n` points and `extra` room for `(copies-1)·n`, on `device`.
    unsafe fn table_build(
        device: i32,
        stream: *mut c_void,
        points: *const c_void,
        n: usize,
        window: u32,
        copies: u32,
        extra: *mut c_void,
    ) -> Result<(), KernelError>;
    /// # Safety
    /// The table's pointers, the index lists and the scalars in `args` are
    /// device memory of `device`, every index in bounds.
    unsafe fn msm_fixed(
        device: i32,
        stream: *mut c_void,
        args: *const k::FixedMsmArgs,
        out: *mut c_void,
    ) -> Result<(), KernelError>;
}

macro_rules! fixed_curve {
    ($name:ident, $bytes:expr, $build:ident, $msm:ident) => {
        impl FixedCurve for $name {
            const POINT_BYTES: usize = $bytes;
            unsafe fn table_build(
                device: i32,
                stream: *mut c_void,
                points: *const c_void,
                n: usize,
                window: u32,
                copies: u32,
                extra: *mut c_void,
            ) -> Result<(), KernelError> {
                unsafe { k::$build(device, stream, points, n, window, copies, extra) }
            }
            unsafe fn msm_fixed(
                device: i32,
                stream: *mut c_void,
                args: *const k::FixedMsmArgs,
                out: *mut c_void,
            ) -> Result<(), KernelError> {
                unsafe { k::$msm(device, stream, args, out) }
            }
        }
    };
}

fixed_curve!(G1, 96, cuzk_g1_msm_table_build, cuzk_g1_msm_fixed);
fixed_curve!(G2, 192, cuzk_g2_msm_table_build, cuzk_g2_msm_fixed);

/// Signed windows of `window` bits covering a 255-bit scalar (with room for
/// the top digit's carry).
pub fn windows(window: u32) -> u32 {
    256u32.div_ceil(window)
}

/// The window and number of copies for a table of `n` bases of `point_bytes`
/// each within `budget` bytes (beyond the bases themselves): the window
/// grows with the size (fewer windows, more buckets, which one reduction
/// serves), the copies are as many as the windows if they fit. None when not
/// even a second copy fits (or there is nothing to tabulate).
pub fn plan(n: usize, point_bytes: usize, budget: usize) -> Option<(u32, u32)> {
    if n < 2 {
        return None;
    }
    let lg = usize::BITS - (n - 1).leading_zeros();
    // size - 2 bits, but at least 20 from 2^20 on: on an H200, G1 and G2 at
    // 2^20 took 4-5 % less at 20 bits than at 18 (19, 21 and 22 between or
    // slower); at 2^22, 20 was the best for G1 and within 3 % for G2.
    let window = match lg {
        20.. => lg.saturating_sub(2).clamp(20, 22),
        _ => lg.saturating_sub(2).clamp(8, 22),
    };
    let fit = budget / (n * point_bytes);
    let copies = windows(window).min(1 + fit as u32);
    (copies >= 2 && (copies as u64) * (n as u64) < 1 << 31).then_some((window, copies))
}

/// Gathered MSMs from this many terms up run on our Pippenger (a plain
/// table) rather than sppark's `msm_t` when there is no table for them.
/// Measured on an H100 (msm bench, a PoRep tail of 0.4 M terms): 6.4 ms
/// against 16.8, and 6.5 against 1,156 when 30% of the scalars are one
/// value; a 32 GiB PoRep partition's tails (1.2-1.7 M terms, their values
/// repeating) took 48-139 ms each on msm_t. Dense MSMs stay on msm_t (ours
/// without copies: 616 ms against 575 at 2^26, window 14).
pub const PLAIN_MIN_TERMS: usize = 1 << 16;

/// The window of a plain-table MSM of `n` terms: 15 bits at 0.4 M terms
/// (as measured), a bit more or less for each doubling, within 8..=16.
pub fn plain_window(n: usize) -> u32 {
    let lg = usize::BITS - n.max(2).saturating_sub(1).leading_zeros();
    lg.saturating_sub(4).clamp(8, 16)
}

/// Dense MSMs from this many terms up run on our Pippenger over the points
/// as they are (a plain table) rather than on sppark's `msm_t`, when no
/// table of copies serves them. Measured on an H100 (`scripts/h200.sh
/// dense`, G1, window 20, runs stored): 2^26 447 ms against 563, 2^27 879
/// against 1,102; smaller sizes are not measured (tables serve them where
/// they fit).
pub const DENSE_MIN_TERMS: usize = 1 << 26;

/// The window of a dense plain-table MSM of `n` terms: 20 bits from 2^26
/// on, the best measured at 2^26 and 2^27 (H100, runs stored; ms at 14,
/// 16, 18, 20, 21, 22 bits: 604, 506, 489, 447, 471, 480 at 2^26 and 1,206,
/// 1,010, 976, 879, 914, 920 at 2^27); a bit less for each halving below.
pub fn dense_window(n: usize) -> u32 {
    let lg = usize::BITS - n.max(2).saturating_sub(1).leading_zeros();
    lg.saturating_sub(6).clamp(8, 20)
}

/// Which dense MSMs run on our Pippenger, and at what window
/// (`gpu.dense_msm_min_log`, `gpu.dense_msm_window`); the default is
/// [`DENSE_MIN_TERMS`] at [`dense_window`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DenseChoice {
    /// Dense MSMs of this many terms or more run on our Pippenger.
    pub min_terms: usize,
    /// The window for all of them, instead of [`dense_window`]'s.
    pub window: Option<u32>,
}

impl Default for DenseChoice {
    fn default() -> Self {
        Self {
            min_terms: DENSE_MIN_TERMS,
            window: None,
        }
    }
}

impl DenseChoice {
    /// From 2^`min_log` terms up (0: never), at `window` bits (0: by size).
    pub fn from_log(min_log: u32, window: u32) -> Self {
        Self {
            min_terms: match min_log {
                0 => usize::MAX,
                lg => 1usize.checked_shl(lg).unwrap_or(usize::MAX),
            },
            window: (window != 0).then_some(window),
        }
    }

    /// Whether a dense MSM of `n` terms runs on our Pippenger.
    pub fn takes(&self, n: usize) -> bool {
        n >= self.min_terms
    }

    /// The window a dense MSM of `n` terms runs at.
    pub fn window(&self, n: usize) -> u32 {
        self.window.unwrap_or_else(|| dense_window(n))
    }
}

/// The kernel's default bound on the digits sorted at once.
pub const MAX_ENTRIES: usize = 1 << 28;

/// Device bytes a plain-table MSM sorts per digit: keys and values twice
/// (the radix sort's double buffer), 16 bytes, with 2 more for the sort's
/// own storage.
const DIGIT_BYTES: usize = 18;

/// Device bytes per digit with level 0 in affine pairs or not
/// ([`MsmTuning::pairs`]): a pair of digits keeps a prefix product (a field
/// element, half a point) and its position besides.
fn digit_bytes(point_bytes: usize, pairs: bool) -> usize {
    DIGIT_BYTES
        + if pairs {
            (point_bytes / 2 + 4).div_ceil(2)
        } else {
            0
        }
}

/// Device bytes of one array of a plain-table MSM's buckets at `window`
/// (XYZZ, twice a point's bytes, and the sentinel's).
fn plain_bucket_bytes(point_bytes: usize, window: u32) -> usize {
    (((windows(window) as usize) << (window - 1)) + 1) * 2 * point_bytes
}

/// Device scratch of an MSM of `n` terms over a plain table at `window`,
/// sorting at most `max_entries` digits at a time, as the kernel lays it
/// out: [`DIGIT_BYTES`] a digit (more in `pairs`), and the buckets. Where
/// one window's digits of every term fit, a chunk is whole windows over
/// every term (its buckets complete, the buckets once); else a chunk is
/// some terms over every window, each later one's buckets apart (twice).
pub fn plain_scratch_bytes(
    n: usize,
    point_bytes: usize,
    window: u32,
    max_entries: usize,
    pairs: bool,
) -> usize {
    let (n, nwin) = (n.max(1), windows(window) as usize);
    let (per, buckets) = (
        digit_bytes(point_bytes, pairs),
        plain_bucket_bytes(point_bytes, window),
    );
    if n <= max_entries {
        n * (max_entries / n).min(nwin) * per + buckets
    } else {
        (max_entries / nwin).clamp(1, n) * nwin * per + 2 * buckets
    }
}

/// The digits a dense plain-table MSM of `n` terms sorts at once so its
/// scratch fits `free` device bytes with a GiB to spare: [`MAX_ENTRIES`] if
/// that fits, else as many whole windows of every term as do; None when
/// not even one window fits (sppark's `msm_t`, which needs less memory,
/// runs then). `pairs` as in [`plain_scratch_bytes`].
pub fn plain_entries(
    n: usize,
    point_bytes: usize,
    window: u32,
    free: usize,
    pairs: bool,
) -> Option<usize> {
    let room = free.saturating_sub(1 << 30);
    if plain_scratch_bytes(n, point_bytes, window, MAX_ENTRIES, pairs) <= room {
        return Some(MAX_ENTRIES);
    }
    let n = n.max(1);
    let per_window = n * digit_bytes(point_bytes, pairs);
    let wins = room.checked_sub(plain_bucket_bytes(point_bytes, window))? / per_window;
    let wins = wins.min(windows(window) as usize);
    (wins > 0 && n <= MAX_ENTRIES).then_some(wins * n)
}

/// Device bytes of a table's extra copies.
pub fn table_bytes(n: usize, point_bytes: usize, copies: u32) -> usize {
    n * point_bytes * (copies as usize).saturating_sub(1)
}

/// Precomputed multiples of one query's `ntab` bases (the bases themselves
/// stay in their own buffer, copy 0). A plain table ([`MsmTable::plain`])
/// has no copies beyond the bases: the same MSM is then a Pippenger over
/// the points as they are, every window its own group.
pub struct MsmTable {
    /// Copies 1..copies-1; none for a plain table.
    extra: Option<DeviceBuffer>,
    ntab: usize,
    window: u32,
    copies: u32,
}

impl MsmTable {
    /// Builds copies 1..`copies`-1 of the `n` bases in `bases` on `stream`
    /// (returns once they are complete).
    pub fn build<C: FixedCurve>(
        stream: &Stream,
        bases: &DeviceBuffer,
        n: usize,
        window: u32,
        copies: u32,
    ) -> Result<Self, KernelError> {
        assert!(
            n * C::POINT_BYTES <= bases.bytes(),
            "table bases out of bounds"
        );
        assert!((2..=24).contains(&window), "table window of {window} bits");
        let extra = DeviceBuffer::alloc(
            stream.device(),
            table_bytes(n, C::POINT_BYTES, copies).max(1),
        )?;
        // SAFETY: `bases` holds n points, `extra` (copies-1)·n, on the stream's device.
        unsafe {
            C::table_build(
                stream.device(),
                stream.raw(),
                bases.ptr(),
                n,
                window,
                copies,
                extra.ptr(),
            )
        }?;
        stream.sync()?;
        Ok(Self {
            extra: Some(extra),
            ntab: n,
            window,
            copies,
        })
    }

    /// No precomputed copies of the `n` bases: nothing to build and no
    /// memory beyond the bases, for MSMs without a table. Unlike sppark's
    /// `msm_t`, which gives each bucket one thread, it spreads a full bucket
    /// over threads, so scalars that repeat one value cost no more than any
    /// others (a PoRep tail of 0.4 M terms, 30% of them one value, on an
    /// H100: 6.5 ms against msm_t's 1,156; with no value repeated 6.4
    /// against 16.8).
    pub fn plain(n: usize, window: u32) -> Self {
        assert!((2..=24).contains(&window), "window of {window} bits");
        Self {
            extra: None,
            ntab: n,
            window,
            copies: 1,
        }
    }

    /// Device bytes of the extra copies.
    pub fn bytes(&self) -> usize {
        self.extra.as_ref().map_or(0, DeviceBuffer::bytes)
    }

    pub fn window(&self) -> u32 {
        self.window
    }

    pub fn copies(&self) -> u32 {
        self.copies
    }

    /// Bases tabulated.
    pub fn len(&self) -> usize {
        self.ntab
    }

    pub fn is_empty(&self) -> bool {
        self.ntab == 0
    }

    /// Whether an MSM of `n` terms pays for the table's bucket reduction
    /// (2^(window-1) buckets); smaller ones are cheaper on sppark's Pippenger.
    pub fn worth(&self, n: usize) -> bool {
        n >= 1 << (self.window - 2)
    }
}

/// Which terms a fixed-base MSM combines.
#[derive(Clone, Copy)]
pub enum FixedTerms<'a> {
    /// `bases[base_offset + i] * scalars[scalar_offset + i]` for i < n.
    Dense {
        base_offset: usize,
        scalar_offset: usize,
    },
    /// `bases[base_idx[k]] * scalars[scalar_idx[k]]` for k < n.
    Gathered {
        base_idx: &'a DeviceBuffer,
        scalar_idx: &'a DeviceBuffer,
    },
}

/// The MSM of `n` terms over `table` (whose copy 0 is `bases`), on `stream`,
/// returning with the result; scalars in `form`.
#[allow(clippy::too_many_arguments)]
pub fn msm_fixed<C: FixedCurve>(
    stream: &Stream,
    bases: &DeviceBuffer,
    table: &MsmTable,
    terms: FixedTerms<'_>,
    scalars: &DeviceBuffer,
    n: usize,
    form: ScalarForm,
) -> Result<C::Projective, KernelError> {
    msm_fixed_chunked::<C>(stream, bases, table, terms, scalars, n, form, 0)
}

/// As `msm_fixed`, sorting at most `max_entries` digits at a time (0: the
/// kernel's default); tests force several chunks with it.
#[allow(clippy::too_many_arguments)]
pub fn msm_fixed_chunked<C: FixedCurve>(
    stream: &Stream,
    bases: &DeviceBuffer,
    table: &MsmTable,
    terms: FixedTerms<'_>,
    scalars: &DeviceBuffer,
    n: usize,
    form: ScalarForm,
    max_entries: usize,
) -> Result<C::Projective, KernelError> {
    let tune = tuning();
    msm_fixed_tuned::<C>(
        stream,
        bases,
        table,
        terms,
        scalars,
        n,
        form,
        max_entries,
        tune,
    )
}

/// As `msm_fixed_chunked`, with the launch shape given (the benchmark
/// compares level 0 one by one and in pairs in one run).
#[allow(clippy::too_many_arguments)]
pub fn msm_fixed_tuned<C: FixedCurve>(
    stream: &Stream,
    bases: &DeviceBuffer,
    table: &MsmTable,
    terms: FixedTerms<'_>,
    scalars: &DeviceBuffer,
    n: usize,
    form: ScalarForm,
    max_entries: usize,
    tuning: MsmTuning,
) -> Result<C::Projective, KernelError> {
    assert!(
        table.ntab * C::POINT_BYTES <= bases.bytes(),
        "table bases out of bounds"
    );
    let raw = k::MsmTable {
        base: bases.ptr(),
        extra: table
            .extra
            .as_ref()
            .map_or(std::ptr::null(), |b| b.ptr().cast_const()),
        ntab: table.ntab as u64,
        window: table.window,
        copies: table.copies,
    };
    let (base_off, base_idx, scalar_ptr, scalar_idx) = match terms {
        FixedTerms::Dense {
            base_offset,
            scalar_offset,
        } => {
            assert!(base_offset + n <= table.ntab, "MSM bases out of bounds");
            assert!(
                (scalar_offset + n) * 32 <= scalars.bytes(),
                "MSM scalars out of bounds"
            );
            (
                base_offset as u64,
                std::ptr::null(),
                scalars.at::<Fr>(scalar_offset).cast_const(),
                std::ptr::null(),
            )
        }
        FixedTerms::Gathered {
            base_idx,
            scalar_idx,
        } => {
            assert!(
                base_idx.bytes() >= n * 4 && scalar_idx.bytes() >= n * 4,
                "MSM index lists shorter than {n}"
            );
            (
                0,
                base_idx.at::<u32>(0).cast_const(),
                scalars.at::<Fr>(0).cast_const(),
                scalar_idx.at::<u32>(0).cast_const(),
            )
        }
    };
    let args = k::FixedMsmArgs {
        table: raw,
        base_off,
        base_idx,
        scalars: scalar_ptr,
        scalar_idx,
        n: n as u64,
        max_entries: max_entries as u64,
        form,
        tuning,
    };
    let mut out = C::Raw::default();
    // SAFETY: the table's buffers and the terms' lists on the stream's
    // device, bounds checked above (gathered indices are the caller's).
    unsafe {
        C::msm_fixed(
            stream.device(),
            stream.raw(),
            &args,
            (&mut out as *mut C::Raw).cast(),
        )
    }?;
    Ok(C::into_projective(out))
}

/// The fixed-base MSM's launch shape: the defaults measured best, with the
/// benchmarks' knobs read once from the environment (`CUZK_MSM_THREADS`:
/// level-0 threads per SM; `CUZK_MSM_EDGE_SEG`: slots per segment above
/// level 0; `CUZK_MSM_REDUCE_PER_SM`: bucket-reduction threads per SM;
/// `CUZK_MSM_BLOCK`: threads per block, 64 or 128 for level 0 (256 runs as
/// 128), 64, 128 or 256 for the ones' sums;
/// `CUZK_MSM_AHEAD`: level 0 prefetches the point this many entries ahead;
/// `CUZK_MSM_PAIRS=1`: level 0 in affine pairs; `CUZK_MSM_PROFILE`: each
/// phase's device time to stderr; `CUZK_MSM_RUNS_ADDED=1` or `0`: runs
/// added in place, the earlier way, or stored into buckets zeroed per
/// chunk; `CUZK_MSM_CHUNK_TERMS=1`: chunks of terms over every window, as
/// before chunks of whole windows; `CUZK_MSM_ONES_SPPARK=1`: the ones'
/// sums on sppark's batch addition, the earlier way; `CUZK_MSM_ADD=looped`,
/// `fused` or `inlined`: how level 0 and the ones' sums add, [`AddForm`]). Passed
/// to every launch: no kernel reads the environment.
pub fn tuning() -> MsmTuning {
    static TUNING: std::sync::OnceLock<MsmTuning> = std::sync::OnceLock::new();
    *TUNING.get_or_init(|| tuning_from(|name| std::env::var(name).ok()))
}

/// The tuning `var` (an environment lookup) asks for.
pub fn tuning_from(var: impl Fn(&str) -> Option<String>) -> MsmTuning {
    let d = MsmTuning::default();
    let number = |name: &str, default: u32, least: u32| {
        var(name)
            .and_then(|v| v.parse::<u32>().ok())
            .map_or(default, |v| v.max(least))
    };
    MsmTuning {
        threads_per_sm: number("CUZK_MSM_THREADS", d.threads_per_sm, 1),
        edge_seg: number("CUZK_MSM_EDGE_SEG", d.edge_seg, 2),
        reduce_per_sm: number("CUZK_MSM_REDUCE_PER_SM", d.reduce_per_sm, 1),
        block: number("CUZK_MSM_BLOCK", d.block, 64),
        ahead: number("CUZK_MSM_AHEAD", d.ahead, 0),
        add: match var("CUZK_MSM_ADD").as_deref() {
            Some("looped") => AddForm::Looped,
            Some("inlined") => AddForm::Inlined,
            Some("fused") => AddForm::Fused,
            _ => d.add,
        },
        pairs: var("CUZK_MSM_PAIRS").as_deref() == Some("1"),
        profile: var("CUZK_MSM_PROFILE").is_some(),
        runs_added: var("CUZK_MSM_RUNS_ADDED").map_or(d.runs_added, |v| v == "1"),
        chunk_terms: var("CUZK_MSM_CHUNK_TERMS").as_deref() == Some("1"),
        ones_sppark: var("CUZK_MSM_ONES_SPPARK").as_deref() == Some("1"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_windows_follow_the_measured_point() {
        assert_eq!(plain_window(402_255), 15);
        assert_eq!(plain_window(1_692_864), 16);
        assert_eq!(plain_window(PLAIN_MIN_TERMS), 12);
        assert_eq!(plain_window(0), 8);
    }

    #[test]
    fn dense_msms_sort_what_fits_the_free_memory() {
        assert_eq!(dense_window(1 << 26), 20);
        assert_eq!(dense_window(1 << 27), 20);
        assert_eq!(dense_window(1 << 22), 16);
        // 2^27 G1 terms at window 20: 13 windows, two of every term a chunk
        // (2^28 digits, 4.5 GiB of keys and values), 6.8 M buckets of 192
        // bytes once (every bucket complete within its chunk).
        let n = 1 << 27;
        let full = plain_scratch_bytes(n, 96, 20, MAX_ENTRIES, false);
        let buckets = ((13 << 19) + 1) * 192;
        assert_eq!(full, 2 * n * 18 + buckets);
        assert_eq!(
            plain_entries(n, 96, 20, full + (1 << 30), false),
            Some(MAX_ENTRIES)
        );
        // Less room: one window of every term at a time.
        let one = n * 18 + buckets + (1 << 30);
        assert_eq!(plain_entries(n, 96, 20, one, false), Some(n));
        assert_eq!(plain_scratch_bytes(n, 96, 20, n, false), one - (1 << 30));
        assert_eq!(plain_entries(n, 96, 20, one - 1, false), None);
        assert_eq!(plain_entries(n, 96, 20, 1 << 30, false), None);
        // One chunk: every window of every term, the buckets once.
        let small = 1 << 20;
        assert_eq!(
            plain_scratch_bytes(small, 96, 14, MAX_ENTRIES, false),
            small * 19 * 18 + ((19 << 13) + 1) * 192
        );
        // More terms than a chunk holds: chunks of terms over every window,
        // each later chunk's buckets apart.
        assert_eq!(
            plain_scratch_bytes(small, 96, 14, small / 2, false),
            (small / 2 / 19) * 19 * 18 + 2 * (((19 << 13) + 1) * 192)
        );
        // In affine pairs: a G1 prefix product and a position per pair, so
        // 26 bytes more a digit (50 for G2's).
        assert_eq!(
            plain_scratch_bytes(small, 96, 14, MAX_ENTRIES, true),
            small * 19 * (18 + 26) + ((19 << 13) + 1) * 192
        );
        assert_eq!(digit_bytes(192, true), 18 + 50);
        let paired = n * (18 + 26) + buckets + (1 << 30);
        assert_eq!(plain_entries(n, 96, 20, paired, true), Some(n));
        assert_eq!(plain_entries(n, 96, 20, paired - 1, true), None);
    }

    #[test]
    fn dense_choice_comes_from_the_defaults_or_the_config() {
        let d = DenseChoice::default();
        assert!(d.takes(1 << 26) && !d.takes((1 << 26) - 1));
        assert_eq!(d.window(1 << 27), dense_window(1 << 27));
        assert_eq!(DenseChoice::from_log(26, 0), d, "the config's defaults");
        let set = DenseChoice::from_log(25, 18);
        assert!(set.takes(1 << 25) && !set.takes((1 << 25) - 1));
        assert_eq!(set.window(1 << 27), 18);
        assert!(
            !DenseChoice::from_log(0, 0).takes(usize::MAX - 1),
            "0: never"
        );
        assert_eq!(DenseChoice::from_log(99, 0).min_terms, usize::MAX);
    }

    #[test]
    fn tuning_comes_from_rust_with_the_benchmarks_knobs() {
        let none = tuning_from(|_| None);
        assert_eq!(none, MsmTuning::default());
        let knobs = tuning_from(|name| match name {
            "CUZK_MSM_THREADS" => Some("512".into()),
            "CUZK_MSM_EDGE_SEG" => Some("1".into()),
            "CUZK_MSM_REDUCE_PER_SM" => Some("2048".into()),
            "CUZK_MSM_BLOCK" => Some("32".into()),
            "CUZK_MSM_AHEAD" => Some("8".into()),
            "CUZK_MSM_PAIRS" => Some("1".into()),
            "CUZK_MSM_RUNS_ADDED" => Some("1".into()),
            "CUZK_MSM_CHUNK_TERMS" => Some("1".into()),
            "CUZK_MSM_ONES_SPPARK" => Some("1".into()),
            "CUZK_MSM_ADD" => Some("looped".into()),
            _ => None,
        });
        assert_eq!((knobs.add, none.add), (AddForm::Looped, AddForm::Inlined));
        let add =
            |form: &str| tuning_from(|name| (name == "CUZK_MSM_ADD").then(|| form.into())).add;
        assert_eq!(
            (add("inlined"), add("fused"), add("unknown")),
            (AddForm::Inlined, AddForm::Fused, AddForm::Inlined)
        );
        assert_eq!(
            AddForm::Inlined.others().collect::<Vec<_>>(),
            [AddForm::Looped, AddForm::Fused]
        );
        assert_eq!(
            AddForm::Fused.others().collect::<Vec<_>>(),
            [AddForm::Inlined, AddForm::Looped]
        );
        assert_eq!(knobs.threads_per_sm, 512);
        assert_eq!(knobs.edge_seg, 2, "at least two slots a segment");
        assert_eq!((knobs.reduce_per_sm, none.reduce_per_sm), (2048, 512));
        assert_eq!(
            (knobs.block, none.block),
            (64, 64),
            "at least 64 threads a block"
        );
        assert!(knobs.pairs && knobs.runs_added && knobs.chunk_terms && !knobs.profile);
        assert!(
            knobs.ones_sppark && !none.ones_sppark,
            "the ones' sums ours by default"
        );
        assert!(!none.runs_added, "runs stored by default");
        assert!(!none.chunk_terms, "chunks of whole windows by default");
        let bad = tuning_from(|name| (name == "CUZK_MSM_THREADS").then(|| "many".into()));
        assert_eq!(bad.threads_per_sm, 1024);
        assert_eq!((knobs.ahead, none.ahead), (8, 0), "no prefetch by default");
    }

    #[test]
    fn plans_widen_the_window_with_size_and_fit_the_budget() {
        assert_eq!(plan(1 << 18, 96, usize::MAX), Some((16, 16)));
        assert_eq!(plan(1 << 20, 96, usize::MAX), Some((20, 13)));
        assert_eq!(plan(1 << 23, 96, usize::MAX), Some((21, 13)));
        assert_eq!(plan(1 << 24, 96, usize::MAX), Some((22, 12)));
        assert_eq!(plan(1 << 10, 96, usize::MAX), Some((8, 32)));
        // Room for three extra copies of 2^20 points: four in all.
        assert_eq!(plan(1 << 20, 96, (3 * 96) << 20), Some((20, 4)));
        assert_eq!(plan(1 << 20, 96, (96 << 20) - 1), None);
        assert_eq!(plan(1, 96, usize::MAX), None);
        assert_eq!(windows(22), 12);
        assert_eq!(table_bytes(1 << 20, 96, 4), (3 * 96) << 20);
    }
}
