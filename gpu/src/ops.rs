//! The GPU operations in blstrs types: MSMs (dense, gathered tail, batch
//! addition of ones) in G1 and G2, the quotient and plain NTTs.

use std::ffi::c_void;

use blst::{blst_p1, blst_p2};
use blstrs::{G1Projective, G2Projective};
use cuzk_kernels as k;

use crate::cuda::{DeviceBuffer, KernelError, Stream};

/// A scalar as the kernels take it (32 bytes, Montgomery or canonical).
pub type Fr = k::Fr;
pub use k::{AddForm, ScalarForm};

/// The kernel entry points of one group.
pub trait GpuCurve {
    type Raw: Default + Copy;
    type Projective;
    /// # Safety
    /// Device pointers of `device`, holding `n` elements each; a live stream.
    unsafe fn msm(
        device: i32,
        stream: *mut c_void,
        points: *const c_void,
        scalars: *const Fr,
        n: usize,
        form: ScalarForm,
        out: *mut c_void,
    ) -> Result<(), KernelError>;
    /// # Safety
    /// As for `msm`; indices are in bounds.
    #[allow(clippy::too_many_arguments)]
    unsafe fn msm_gathered(
        device: i32,
        stream: *mut c_void,
        points: *const c_void,
        base_idx: *const u32,
        scalars: *const Fr,
        scalar_idx: *const u32,
        n: usize,
        form: ScalarForm,
        out: *mut c_void,
    ) -> Result<(), KernelError>;
    /// # Safety
    /// As for `msm_gathered`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn sum(
        device: i32,
        stream: *mut c_void,
        points: *const c_void,
        idx: *const u32,
        n: usize,
        block: u32,
        add: AddForm,
        out: *mut c_void,
    ) -> Result<(), KernelError>;
    fn into_projective(raw: Self::Raw) -> Self::Projective;
}

pub struct G1;
pub struct G2;

macro_rules! gpu_curve {
    ($name:ident, $raw:ty, $proj:ty, $msm:ident, $gathered:ident, $sum:ident) => {
        impl GpuCurve for $name {
            type Raw = $raw;
            type Projective = $proj;
            unsafe fn msm(
                device: i32,
                stream: *mut c_void,
                points: *const c_void,
                scalars: *const Fr,
                n: usize,
                form: ScalarForm,
                out: *mut c_void,
            ) -> Result<(), KernelError> {
                unsafe { k::$msm(device, stream, points, scalars, n, form, out) }
            }
            #[allow(clippy::too_many_arguments)]
            unsafe fn msm_gathered(
                device: i32,
                stream: *mut c_void,
                points: *const c_void,
                base_idx: *const u32,
                scalars: *const Fr,
                scalar_idx: *const u32,
                n: usize,
                form: ScalarForm,
                out: *mut c_void,
            ) -> Result<(), KernelError> {
                unsafe {
                    k::$gathered(
                        device, stream, points, base_idx, scalars, scalar_idx, n, form, out,
                    )
                }
            }
            #[allow(clippy::too_many_arguments)]
            unsafe fn sum(
                device: i32,
                stream: *mut c_void,
                points: *const c_void,
                idx: *const u32,
                n: usize,
                block: u32,
                add: AddForm,
                out: *mut c_void,
            ) -> Result<(), KernelError> {
                unsafe { k::$sum(device, stream, points, idx, n, block, add, out) }
            }
            fn into_projective(raw: $raw) -> $proj {
                // SAFETY: sppark's Jacobian points share blst's layout (X, Y, Z in
                // Montgomery form), and blstrs' types are repr(transparent) over blst's.
                unsafe { std::mem::transmute::<$raw, $proj>(raw) }
            }
        }
    };
}

gpu_curve!(
    G1,
    blst_p1,
    G1Projective,
    cuzk_g1_msm,
    cuzk_g1_msm_gathered,
    cuzk_g1_sum
);
gpu_curve!(
    G2,
    blst_p2,
    G2Projective,
    cuzk_g2_msm,
    cuzk_g2_msm_gathered,
    cuzk_g2_sum
);

/// `sum(points[point_offset + i] * scalars[scalar_offset + i])` for i < n,
/// all on the device, after the work queued on `stream`; `point_size` is the
/// bytes of one point.
#[allow(clippy::too_many_arguments)]
pub fn msm<C: GpuCurve>(
    stream: &Stream,
    points: &DeviceBuffer,
    point_offset: usize,
    point_size: usize,
    scalars: &DeviceBuffer,
    scalar_offset: usize,
    n: usize,
    form: ScalarForm,
) -> Result<C::Projective, KernelError> {
    assert!(
        (point_offset + n) * point_size <= points.bytes(),
        "MSM points out of bounds"
    );
    assert!(
        (scalar_offset + n) * 32 <= scalars.bytes(),
        "MSM scalars out of bounds"
    );
    let mut out = C::Raw::default();
    let base = points.at::<u8>(point_offset * point_size).cast::<c_void>();
    // SAFETY: both ranges checked above, on buffers of one device.
    unsafe {
        C::msm(
            points.device(),
            stream.raw(),
            base,
            scalars.at::<Fr>(scalar_offset),
            n,
            form,
            (&mut out as *mut C::Raw).cast(),
        )
    }?;
    Ok(C::into_projective(out))
}

/// `sum(points[base_idx[k]] * scalars[scalar_idx[k]])` for k < n, gathered on `stream`.
pub fn msm_gathered<C: GpuCurve>(
    stream: &Stream,
    points: &DeviceBuffer,
    base_idx: &DeviceBuffer,
    scalars: &DeviceBuffer,
    scalar_idx: &DeviceBuffer,
    n: usize,
    form: ScalarForm,
) -> Result<C::Projective, KernelError> {
    msm_gathered_range::<C>(stream, points, base_idx, scalars, scalar_idx, 0..n, form)
}

/// [`msm_gathered`] over the lists' entries in `terms` only.
pub fn msm_gathered_range<C: GpuCurve>(
    stream: &Stream,
    points: &DeviceBuffer,
    base_idx: &DeviceBuffer,
    scalars: &DeviceBuffer,
    scalar_idx: &DeviceBuffer,
    terms: std::ops::Range<usize>,
    form: ScalarForm,
) -> Result<C::Projective, KernelError> {
    assert!(
        terms.end * 4 <= base_idx.bytes().min(scalar_idx.bytes()),
        "gathered terms out of the lists' bounds"
    );
    let mut out = C::Raw::default();
    // SAFETY: buffers of one device; the lists' entries in `terms` (checked
    // above) are in-bounds indices.
    unsafe {
        C::msm_gathered(
            points.device(),
            stream.raw(),
            points.ptr(),
            base_idx.at::<u32>(terms.start),
            scalars.at(0),
            scalar_idx.at::<u32>(terms.start),
            terms.len(),
            form,
            (&mut out as *mut C::Raw).cast(),
        )
    }?;
    Ok(C::into_projective(out))
}

/// `sum(points[idx[k]])` for k < n, on `stream`.
pub fn sum<C: GpuCurve>(
    stream: &Stream,
    points: &DeviceBuffer,
    idx: &DeviceBuffer,
    n: usize,
) -> Result<C::Projective, KernelError> {
    sum_range::<C>(stream, points, idx, 0..n)
}

/// [`sum`] over the list's entries in `terms` only.
pub fn sum_range<C: GpuCurve>(
    stream: &Stream,
    points: &DeviceBuffer,
    idx: &DeviceBuffer,
    terms: std::ops::Range<usize>,
) -> Result<C::Projective, KernelError> {
    let tuning = crate::fixed::tuning();
    let block = if tuning.ones_sppark { 0 } else { tuning.block };
    let shape = SumShape {
        block,
        add: tuning.add,
    };
    sum_in_blocks::<C>(stream, points, idx, terms, shape)
}

/// How a ones' sum runs on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SumShape {
    /// Threads a block: 64, 128 or 256 (others round down to one of these);
    /// 0: sppark's batch addition, one 256-thread block an SM.
    pub block: u32,
    /// How each point is added into a sum (not used by sppark's).
    pub add: AddForm,
}

/// [`sum_range`] in the shape `shape` gives, for tests and benchmarks.
pub fn sum_in_blocks<C: GpuCurve>(
    stream: &Stream,
    points: &DeviceBuffer,
    idx: &DeviceBuffer,
    terms: std::ops::Range<usize>,
    shape: SumShape,
) -> Result<C::Projective, KernelError> {
    assert!(
        terms.end * 4 <= idx.bytes(),
        "terms out of the list's bounds"
    );
    let mut out = C::Raw::default();
    // SAFETY: as for `msm_gathered_range`.
    unsafe {
        C::sum(
            points.device(),
            stream.raw(),
            points.ptr(),
            idx.at::<u32>(terms.start),
            terms.len(),
            shape.block,
            shape.add,
            (&mut out as *mut C::Raw).cast(),
        )
    }?;
    Ok(C::into_projective(out))
}

/// For each of `values`, the first position in the ascending index list
/// `list[0..n)` holding an index at or above it (where each chunk of
/// streamed points starts in a list). Returns once the positions are on the host.
pub fn lower_bounds(
    stream: &Stream,
    list: &DeviceBuffer,
    n: usize,
    values: &[u32],
) -> Result<Vec<u64>, KernelError> {
    assert!(n * 4 <= list.bytes(), "list length beyond its buffer");
    if values.is_empty() {
        return Ok(vec![]);
    }
    let d_values = DeviceBuffer::upload(stream, values)?;
    let d_out = DeviceBuffer::alloc(stream.device(), values.len() * 8)?;
    // SAFETY: `n` entries checked above; `values.len()` in and out.
    unsafe {
        k::cuzk_lower_bounds(
            stream.device(),
            stream.raw(),
            list.at(0),
            n as u64,
            d_values.at(0),
            values.len() as u32,
            d_out.at(0),
        )
    }?;
    let mut out = vec![0u64; values.len()];
    d_out.download(stream, &mut out)?;
    Ok(out)
}

/// `list[k] += delta` (wrapping) for k in `terms`, queued on `stream`:
/// indices made relative to a chunk of points (`delta` = −start) and back.
pub fn shift_indices(
    stream: &Stream,
    list: &DeviceBuffer,
    terms: std::ops::Range<usize>,
    delta: u32,
) -> Result<(), KernelError> {
    assert!(
        terms.end * 4 <= list.bytes(),
        "terms out of the list's bounds"
    );
    // SAFETY: the range checked above, on the stream's device.
    unsafe {
        k::cuzk_shift_indices(
            stream.device(),
            stream.raw(),
            list.at::<u32>(terms.start),
            terms.len() as u64,
            delta,
        )
    }
}

/// The Groth16 quotient in place on the device (see `cuzk_quotient`), queued on `stream`.
pub fn quotient(
    stream: &Stream,
    a: &DeviceBuffer,
    b: &DeviceBuffer,
    c: &DeviceBuffer,
    lg: u32,
    z_inv: &Fr,
) -> Result<(), KernelError> {
    // SAFETY: three buffers of 2^lg scalars on the stream's device.
    unsafe {
        k::cuzk_quotient(
            stream.device(),
            stream.raw(),
            a.at(0),
            b.at(0),
            c.at(0),
            lg,
            z_inv,
        )
    }
}

/// The quotient through two buffers, for cards without room for three:
/// `a` to the coset; then for b and c in turn, each loaded into `scratch`,
/// taken to the coset and combined (a·b, then (a·b − c)·1/Z); then `a` back
/// to coefficients. The same H as [`quotient`], in `a`.
pub struct TwoBufferQuotient<'a> {
    pub stream: &'a Stream,
    pub a: &'a DeviceBuffer,
    pub scratch: &'a DeviceBuffer,
    pub lg: u32,
}

/// What [`TwoBufferQuotient::combine`] does with the vector in `scratch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Combine {
    /// a := a·b
    Mul = 0,
    /// a := (a − c)·z_inv
    SubScale = 1,
}

impl TwoBufferQuotient<'_> {
    fn check(&self, x: &DeviceBuffer) {
        assert!(
            x.bytes() >= (32usize << self.lg),
            "a buffer of fewer than 2^lg scalars"
        );
    }

    /// `a` (evaluations over the domain) to the coset, queued.
    pub fn a_to_coset(&self) -> Result<(), KernelError> {
        self.check(self.a);
        // SAFETY: 2^lg scalars (checked) on the stream's device.
        unsafe {
            k::cuzk_to_coset(
                self.stream.device(),
                self.stream.raw(),
                self.a.at(0),
                self.lg,
            )
        }
    }

    /// The vector uploaded into `scratch` to the coset and folded into `a`, queued.
    pub fn combine(&self, op: Combine, z_inv: &Fr) -> Result<(), KernelError> {
        self.check(self.scratch);
        let (device, stream) = (self.stream.device(), self.stream.raw());
        // SAFETY: both buffers hold 2^lg scalars (checked) on the stream's device.
        unsafe {
            k::cuzk_to_coset(device, stream, self.scratch.at(0), self.lg)?;
            k::cuzk_pointwise(
                device,
                stream,
                self.a.at(0),
                self.scratch.at(0),
                op as u32,
                z_inv,
                1usize << self.lg,
            )
        }
    }

    /// `a` back from the coset: H's coefficients, queued.
    pub fn finish(&self) -> Result<(), KernelError> {
        // SAFETY: as `a_to_coset`.
        unsafe {
            k::cuzk_from_coset(
                self.stream.device(),
                self.stream.raw(),
                self.a.at(0),
                self.lg,
            )
        }
    }
}

/// A natural-order NTT in place (tests compare it with the CPU's).
pub fn ntt(
    stream: &Stream,
    x: &DeviceBuffer,
    lg: u32,
    inverse: bool,
    coset: bool,
) -> Result<(), KernelError> {
    // SAFETY: 2^lg scalars on the stream's device.
    unsafe { k::cuzk_ntt(stream.device(), stream.raw(), x.at(0), lg, inverse, coset) }
}

/// One recorded constraint matrix on the device, in compressed sparse rows
/// (see `cuzk_stages::pce`): `u32` row pointers and columns, `u16` or
/// `u32` coefficient codes.
pub struct DeviceMatrix<'a> {
    pub row_ptr: &'a DeviceBuffer,
    pub cols: &'a DeviceBuffer,
    pub codes: &'a DeviceBuffer,
}

/// A recording's A, B and C on the device, with what their codes refer to.
pub struct DeviceConstraints<'a> {
    pub matrices: [DeviceMatrix<'a>; 3],
    /// Whether codes are `u32` (else `u16`).
    pub wide: bool,
    /// The distinct general coefficients, Montgomery form.
    pub table: &'a DeviceBuffer,
    /// 2^k for k < 256, Montgomery form.
    pub pow2: &'a DeviceBuffer,
    /// The circuit's own constraints (rows of each matrix).
    pub rows: usize,
}

/// a = A·z, b = B·z, c = C·z over the first `n` rows (the circuit's
/// constraints, one `a = input` row per public input, zeros after), in
/// Montgomery form, from the canonical assignment `z`. Returns once done,
/// with the first constraint whose a·b ≠ c, if any.
#[allow(clippy::too_many_arguments)]
pub fn pce_eval(
    stream: &Stream,
    m: &DeviceConstraints<'_>,
    z: &DeviceBuffer,
    n_inputs: usize,
    n: usize,
    a: &DeviceBuffer,
    b: &DeviceBuffer,
    c: &DeviceBuffer,
) -> Result<Option<usize>, KernelError> {
    assert!(
        m.rows + n_inputs <= n,
        "constraints and inputs exceed the domain"
    );
    assert!(
        m.rows < u32::MAX as usize && n_inputs < u32::MAX as usize,
        "rows beyond u32 indices"
    );
    assert!(
        z.bytes() >= n_inputs * 32,
        "assignment shorter than the inputs"
    );
    for out in [a, b, c] {
        assert!(
            out.bytes() >= n * 32,
            "output buffer shorter than the domain"
        );
    }
    for mat in &m.matrices {
        assert!(
            mat.row_ptr.bytes() >= (m.rows + 1) * 4,
            "row pointers short"
        );
    }
    assert!(m.pow2.bytes() >= 256 * 32, "powers of two short");
    let args = k::PceEvalArgs {
        matrices: m.matrices.each_ref().map(|x| k::PceMatrix {
            row_ptr: x.row_ptr.at::<u32>(0).cast_const(),
            cols: x.cols.at::<u32>(0).cast_const(),
            codes: x.codes.ptr().cast_const(),
        }),
        wide: u32::from(m.wide),
        constraints: m.rows as u32,
        n_inputs: n_inputs as u32,
        n: n as u64,
        table: m.table.at(0),
        pow2: m.pow2.at(0),
        z: z.at(0),
        a: a.at(0),
        b: b.at(0),
        c: c.at(0),
    };
    let mut first_bad = u32::MAX;
    // SAFETY: buffers of one device, sized as checked above; the recording's
    // columns index the assignment and its codes the table (checked when it
    // was read).
    unsafe { k::cuzk_pce_eval(stream.device(), stream.raw(), &args, &mut first_bad) }?;
    Ok((first_bad != u32::MAX).then_some(first_bad as usize))
}

/// Montgomery to canonical form in place (the form MSMs read), queued on `stream`.
pub fn to_canonical(stream: &Stream, z: &DeviceBuffer, n: usize) -> Result<(), KernelError> {
    assert!(n * 32 <= z.bytes(), "conversion beyond the buffer");
    // SAFETY: n scalars on the stream's device.
    unsafe { k::cuzk_to_canonical(stream.device(), stream.raw(), z.at(0), n) }
}

/// Which variables of one part (inputs or aux) a query selects.
#[derive(Clone, Copy, Debug)]
pub enum Select<'a> {
    None,
    All,
    /// Those whose bit is set (a device bitmap of u64 words).
    Bitmap(&'a DeviceBuffer, usize),
}

impl Select<'_> {
    fn raw(&self) -> (k::PrepMode, *const u64) {
        match self {
            Select::None => (k::PrepMode::None, std::ptr::null()),
            Select::All => (k::PrepMode::All, std::ptr::null()),
            Select::Bitmap(b, word) => (k::PrepMode::Bitmap, b.at::<u64>(*word).cast_const()),
        }
    }
}

/// One query's index lists, where `prep_query` writes them.
pub struct QueryLists<'a> {
    pub ones: &'a DeviceBuffer,
    pub sig_base: &'a DeviceBuffer,
    pub sig_scalar: &'a DeviceBuffer,
}

/// What one query's preparation found: candidates selected, ones and
/// significant terms (the rest are zeros).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueryCounts {
    pub selected: usize,
    pub ones: usize,
    pub significant: usize,
}

/// Device bytes `prep_query` needs for its counters over `n` variables:
/// two 12-byte counters a variable, and the scan's own scratch (a status
/// word per tile of hundreds of variables; generously bounded here, and
/// `prep_query` allocates rather than overruns if it is not).
pub fn prep_scratch_bytes(n: usize) -> usize {
    24 * n + n / 16 + 4096
}

/// prep_msm for one query on the device, from the canonical assignment `z`
/// of `n_inputs + n_aux` variables: lists in `lists` (which must hold every
/// selected candidate); returns once done, with the counts. Its counters go
/// into `scratch` (overwritten) when it holds them, else into memory it
/// allocates for the call.
#[allow(clippy::too_many_arguments)]
pub fn prep_query(
    stream: &Stream,
    z: &DeviceBuffer,
    n_inputs: usize,
    n_aux: usize,
    inputs: Select<'_>,
    aux: Select<'_>,
    lists: &QueryLists<'_>,
    scratch: Option<&DeviceBuffer>,
) -> Result<QueryCounts, KernelError> {
    let n = n_inputs + n_aux;
    assert!(n < u32::MAX as usize, "assignment beyond u32 indices");
    assert!(z.bytes() >= n * 32, "assignment buffer short");
    let bound = |sel: &Select<'_>, len: usize| match sel {
        Select::None => 0,
        Select::All => len,
        Select::Bitmap(b, word) => {
            assert!((word + len.div_ceil(64)) * 8 <= b.bytes(), "bitmap short");
            len
        }
    };
    let capacity = (bound(&inputs, n_inputs) + bound(&aux, n_aux)) * 4;
    for l in [lists.ones, lists.sig_base, lists.sig_scalar] {
        assert!(l.bytes() >= capacity, "index list short");
    }
    let ((input_mode, input_bits), (aux_mode, aux_bits)) = (inputs.raw(), aux.raw());
    let args = k::PrepQueryArgs {
        z: z.at(0),
        n_inputs: n_inputs as u32,
        n: n as u32,
        input_mode,
        aux_mode,
        input_bits,
        aux_bits,
        scatter: 1,
        ones: lists.ones.at(0),
        sig_base: lists.sig_base.at(0),
        sig_scalar: lists.sig_scalar.at(0),
        scratch: scratch.map_or(std::ptr::null_mut(), |b| b.at::<u8>(0).cast()),
        scratch_bytes: scratch.map_or(0, DeviceBuffer::bytes) as u64,
    };
    let mut counts = [0u32; 3];
    // SAFETY: buffers of one device sized as checked above.
    unsafe { k::cuzk_prep_query(stream.device(), stream.raw(), &args, counts.as_mut_ptr()) }?;
    Ok(QueryCounts {
        selected: counts[0] as usize,
        ones: counts[1] as usize,
        significant: counts[2] as usize,
    })
}
