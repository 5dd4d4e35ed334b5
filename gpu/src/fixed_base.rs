//! Many multiples of one fixed point on the device, for a setup's
//! generators: `out[k] = scalars[k]·G` from a table of signed-digit
//! multiples made on the host. The device adds table points (no doublings)
//! and makes its results affine itself (one field inversion per lane group),
//! so the host only receives points: chunk by chunk, on two streams in
//! turn, one chunk downloading while the next is multiplied.

use blst::{blst_fp, blst_fp2};
use blstrs::{G1Affine, G2Affine, Scalar};
use cuzk_kernels as k;

use crate::cuda::{DeviceBuffer, KernelError, Stream};

/// Device bytes per stream for a chunk's scalars, scratch and results (two
/// streams: 3 GiB in all, whatever the group).
const CHUNK_BYTES: usize = 3 << 29;

/// A group the device multiplies in.
pub trait FixedBaseCurve {
    type Affine: Copy + Send + Sync;
    /// A field element (the device's per-point scratch).
    type Field;
    /// An XYZZ point as the device keeps it (X, Y, ZZZ, ZZ, Montgomery form).
    type Xyzz;
    /// # Safety
    /// As [`cuzk_kernels::cuzk_g1_fixed_base_mul`].
    unsafe fn launch(
        device: i32,
        stream: &Stream,
        args: &k::FixedBaseArgs,
    ) -> Result<(), KernelError>;
}

/// An XYZZ point of G1 or G2 over field `F` (its size is what matters here).
#[repr(C)]
pub struct Xyzz<F> {
    x: F,
    y: F,
    zzz: F,
    zz: F,
}

/// G1.
pub struct G1;
/// G2.
pub struct G2;

impl FixedBaseCurve for G1 {
    type Affine = G1Affine;
    type Field = blst_fp;
    type Xyzz = Xyzz<blst_fp>;
    unsafe fn launch(
        device: i32,
        stream: &Stream,
        args: &k::FixedBaseArgs,
    ) -> Result<(), KernelError> {
        // SAFETY: forwarded to the caller.
        unsafe { k::cuzk_g1_fixed_base_mul(device, stream.raw(), args) }
    }
}

impl FixedBaseCurve for G2 {
    type Affine = G2Affine;
    type Field = blst_fp2;
    type Xyzz = Xyzz<blst_fp2>;
    unsafe fn launch(
        device: i32,
        stream: &Stream,
        args: &k::FixedBaseArgs,
    ) -> Result<(), KernelError> {
        // SAFETY: forwarded to the caller.
        unsafe { k::cuzk_g2_fixed_base_mul(device, stream.raw(), args) }
    }
}

/// One stream's buffers: a chunk's scalars, the kernel's scratch, its results.
struct Lane {
    stream: Stream,
    scalars: DeviceBuffer,
    xyzz: DeviceBuffer,
    prefix: DeviceBuffer,
    out: DeviceBuffer,
}

impl Lane {
    fn new<C: FixedBaseCurve>(device: i32, chunk: usize) -> Result<Self, KernelError> {
        let alloc = |bytes: usize| DeviceBuffer::alloc(device, chunk * bytes);
        Ok(Self {
            stream: Stream::new(device)?,
            scalars: alloc(size_of::<Scalar>())?,
            xyzz: alloc(size_of::<C::Xyzz>())?,
            prefix: alloc(size_of::<C::Field>())?,
            out: alloc(size_of::<C::Affine>())?,
        })
    }
}

/// Scalars per chunk: what one lane's buffers hold in [`CHUNK_BYTES`].
fn chunk_for<C: FixedBaseCurve>(n: usize) -> usize {
    let per_point =
        size_of::<Scalar>() + size_of::<C::Xyzz>() + size_of::<C::Field>() + size_of::<C::Affine>();
    (CHUNK_BYTES / per_point).min(n).max(1)
}

/// `out[k] = scalars[k]·G` on `device`, where `table` holds `windows` rows
/// of `2^(window−1)` affine multiples: row j, entry d−1 is `d·2^(window·j)·G`.
pub fn fixed_base_mul<C: FixedBaseCurve>(
    device: i32,
    table: &[C::Affine],
    window: u32,
    scalars: &[Scalar],
    out: &mut [C::Affine],
) -> Result<(), KernelError> {
    let chunk = chunk_for::<C>(scalars.len());
    fixed_base_mul_in_chunks::<C>(device, table, window, scalars, out, chunk)
}

/// [`fixed_base_mul`] over chunks of `chunk` scalars (tests take small ones
/// to run several chunks through both streams).
pub fn fixed_base_mul_in_chunks<C: FixedBaseCurve>(
    device: i32,
    table: &[C::Affine],
    window: u32,
    scalars: &[Scalar],
    out: &mut [C::Affine],
    chunk: usize,
) -> Result<(), KernelError> {
    assert!(chunk > 0, "a chunk holds a scalar");
    assert_eq!(scalars.len(), out.len(), "one output per scalar");
    assert!((2..=16).contains(&window), "window {window}");
    let windows = 256u32.div_ceil(window);
    assert_eq!(
        table.len(),
        windows as usize * (1 << (window - 1)),
        "a full table"
    );
    if scalars.is_empty() {
        return Ok(());
    }
    let chunk = chunk.min(scalars.len());
    let lanes = [
        Lane::new::<C>(device, chunk)?,
        Lane::new::<C>(device, chunk)?,
    ];
    let table_d = DeviceBuffer::upload(&lanes[0].stream, table)?;
    lanes[0].stream.sync()?;
    // The chunk launched last, downloaded after the next one is launched.
    let mut pending: Option<(&Lane, &mut [C::Affine])> = None;
    for (i, (scalars, out)) in scalars.chunks(chunk).zip(out.chunks_mut(chunk)).enumerate() {
        let lane = &lanes[i % 2];
        lane.scalars.copy_in(&lane.stream, scalars)?;
        let args = k::FixedBaseArgs {
            table: table_d.ptr(),
            scalars: lane.scalars.ptr().cast(),
            out: lane.out.ptr(),
            xyzz: lane.xyzz.ptr(),
            prefix: lane.prefix.ptr(),
            n: scalars.len() as u64,
            window,
            windows,
        };
        // SAFETY: every pointer is a device buffer of this device holding what
        // `args` says (the lane's buffers hold `chunk` points); the stream
        // orders the copy in before the launch, and the launch after the
        // lane's previous download.
        unsafe { C::launch(device, &lane.stream, &args) }?;
        if let Some((lane, out)) = pending.take() {
            lane.out.download(&lane.stream, out)?;
        }
        pending = Some((lane, out));
    }
    if let Some((lane, out)) = pending {
        lane.out.download(&lane.stream, out)?;
    }
    Ok(())
}
