//! Many multiples of one fixed point on the device, for a setup's
//! generators: `out[k] = scalars[k]·G` from a table of signed-digit
//! multiples made on the host. The device adds table points (no doublings);
//! its XYZZ results come back in chunks and are made affine on the host, one
//! field inversion per batch of points, on every core.

use blst::{blst_fp, blst_fp_mul, blst_fp2, blst_fp2_mul, blst_p1, blst_p2};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_kernels as k;
use group::Curve as _;
use rayon::prelude::*;

use crate::cuda::{DeviceBuffer, KernelError, Stream};

/// Scalars per device launch: bounds the device scratch (a G2 chunk's XYZZ
/// points are 768 B each, 3 GiB for 2^22).
const CHUNK: usize = 1 << 22;

/// Points per host batch normalisation (one inversion each).
const BATCH: usize = 1 << 12;

/// A group the device multiplies in.
pub trait FixedBaseCurve {
    type Affine: Copy + Send + Sync;
    /// An XYZZ point as the device writes it (X, Y, ZZZ, ZZ, Montgomery form).
    type Xyzz: Copy + Default + Send + Sync;
    /// # Safety
    /// As [`cuzk_kernels::cuzk_g1_fixed_base_mul`].
    unsafe fn launch(
        device: i32,
        stream: &Stream,
        args: &k::FixedBaseArgs,
    ) -> Result<(), KernelError>;
    /// Affine forms of `points`.
    fn normalize(points: &[Self::Xyzz], out: &mut [Self::Affine]);
}

/// An XYZZ point of G1 or G2 over field `F`.
#[derive(Clone, Copy, Default)]
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
    type Xyzz = Xyzz<blst_fp>;
    unsafe fn launch(
        device: i32,
        stream: &Stream,
        args: &k::FixedBaseArgs,
    ) -> Result<(), KernelError> {
        // SAFETY: forwarded to the caller.
        unsafe { k::cuzk_g1_fixed_base_mul(device, stream.raw(), args) }
    }
    fn normalize(points: &[Self::Xyzz], out: &mut [G1Affine]) {
        let jacobian: Vec<G1Projective> = points
            .iter()
            .map(|p| {
                // (X·ZZ, Y·ZZZ, ZZ) is the same point in Jacobian coordinates
                // (ZZ³ = ZZZ²); ZZ = 0 stays the point at infinity.
                let mut q = blst_p1 {
                    z: p.zz,
                    ..Default::default()
                };
                // SAFETY: blst's field multiplication on valid field elements.
                unsafe {
                    blst_fp_mul(&mut q.x, &p.x, &p.zz);
                    blst_fp_mul(&mut q.y, &p.y, &p.zzz);
                }
                // SAFETY: blstrs' G1Projective is repr(transparent) over blst_p1.
                unsafe { std::mem::transmute::<blst_p1, G1Projective>(q) }
            })
            .collect();
        G1Projective::batch_normalize(&jacobian, out);
    }
}

impl FixedBaseCurve for G2 {
    type Affine = G2Affine;
    type Xyzz = Xyzz<blst_fp2>;
    unsafe fn launch(
        device: i32,
        stream: &Stream,
        args: &k::FixedBaseArgs,
    ) -> Result<(), KernelError> {
        // SAFETY: forwarded to the caller.
        unsafe { k::cuzk_g2_fixed_base_mul(device, stream.raw(), args) }
    }
    fn normalize(points: &[Self::Xyzz], out: &mut [G2Affine]) {
        let jacobian: Vec<G2Projective> = points
            .iter()
            .map(|p| {
                let mut q = blst_p2 {
                    z: p.zz,
                    ..Default::default()
                };
                // SAFETY: as for G1.
                unsafe {
                    blst_fp2_mul(&mut q.x, &p.x, &p.zz);
                    blst_fp2_mul(&mut q.y, &p.y, &p.zzz);
                }
                // SAFETY: blstrs' G2Projective is repr(transparent) over blst_p2.
                unsafe { std::mem::transmute::<blst_p2, G2Projective>(q) }
            })
            .collect();
        G2Projective::batch_normalize(&jacobian, out);
    }
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
    let stream = Stream::new(device)?;
    let table_d = DeviceBuffer::upload(&stream, table)?;
    let chunk = CHUNK.min(scalars.len());
    let scalars_d = DeviceBuffer::alloc(device, chunk * std::mem::size_of::<Scalar>())?;
    let out_d = DeviceBuffer::alloc(device, chunk * std::mem::size_of::<C::Xyzz>())?;
    let mut host = vec![C::Xyzz::default(); chunk];
    for (scalars, out) in scalars.chunks(chunk).zip(out.chunks_mut(chunk)) {
        scalars_d.copy_in(&stream, scalars)?;
        let args = k::FixedBaseArgs {
            table: table_d.ptr(),
            scalars: scalars_d.ptr().cast(),
            out: out_d.ptr(),
            n: scalars.len() as u64,
            window,
            windows,
        };
        // SAFETY: every pointer is a device buffer of this device holding what
        // `args` says; the stream orders the copy in before the launch.
        unsafe { C::launch(device, &stream, &args) }?;
        let host = &mut host[..scalars.len()];
        out_d.download(&stream, host)?;
        out.par_chunks_mut(BATCH)
            .zip(host.par_chunks(BATCH))
            .for_each(|(out, points)| C::normalize(points, out));
    }
    Ok(())
}
