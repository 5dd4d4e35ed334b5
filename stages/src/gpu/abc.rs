//! a, b and c on the device from pre-compiled constraints (graphs with a
//! synth_witness node): a recording's matrices kept in device memory, one
//! copy per device like a resident SRS, evaluated straight into the
//! partition's NTT buffers from the uploaded assignment. When the matrices
//! do not fit the device's memory budget, a, b and c are evaluated on the
//! host and uploaded as on the classic path.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use blstrs::Scalar;
use cuzk_gpu::cuda::{DeviceBuffer, Stream};
use cuzk_gpu::ops::{self, DeviceConstraints, DeviceMatrix};
use cuzk_gpu::vram::Reservation;
use rayon::prelude::*;

use super::slot::Buffers;
use super::{GpuContext, GpuDevice};
use crate::cs::append_input_rows;
use crate::pce::{Codes, Mismatch, Recording, check_rows, powers_of_two};
use crate::scalars::{Limbs, as_bytes, as_scalars, as_scalars_ref};
use crate::srs::SrsShape;

/// A witness that does not satisfy the recorded constraints: the partition
/// fails (on any device it would), naming the row.
#[derive(Debug, thiserror::Error)]
#[error(
    "constraint {row} is not satisfied by the witness under the pre-compiled constraints \
     (a wrong witness, or a recording that is not this circuit's: delete its .pce file to record again)"
)]
pub struct Unsatisfied {
    pub row: usize,
}

/// A recording's A, B and C in device memory.
pub struct DevicePce {
    row_ptr: [DeviceBuffer; 3],
    cols: [DeviceBuffer; 3],
    codes: [DeviceBuffer; 3],
    wide: bool,
    table: DeviceBuffer,
    pow2: DeviceBuffer,
    rows: usize,
    pub bytes: usize,
    _reservation: Reservation,
}

/// Device bytes a recording's matrices take.
pub fn pce_device_bytes(r: &Recording) -> usize {
    let code = if r.wide_codes() { 4 } else { 2 };
    let matrices: usize = (0..3)
        .map(|m| {
            let csr = r.matrix(m);
            csr.row_ptr.len() * 4 + csr.nnz() * (4 + code)
        })
        .sum();
    matrices + (r.table().len() + 256) * 32
}

impl DevicePce {
    fn upload(stream: &Stream, r: &Recording, reservation: Reservation) -> anyhow::Result<Self> {
        r.validate()
            .map_err(|e| anyhow::anyhow!("pre-compiled constraints are damaged: {e}"))?;
        let up = |m: usize| -> anyhow::Result<(DeviceBuffer, DeviceBuffer, DeviceBuffer)> {
            let csr = r.matrix(m);
            let codes = match csr.codes {
                Codes::Narrow(c) => DeviceBuffer::upload(stream, c)?,
                Codes::Wide(c) => DeviceBuffer::upload(stream, c)?,
            };
            Ok((
                DeviceBuffer::upload(stream, csr.row_ptr)?,
                DeviceBuffer::upload(stream, csr.cols)?,
                codes,
            ))
        };
        let (a, b, c) = (up(0)?, up(1)?, up(2)?);
        let s = Self {
            row_ptr: [a.0, b.0, c.0],
            cols: [a.1, b.1, c.1],
            codes: [a.2, b.2, c.2],
            wide: r.wide_codes(),
            table: DeviceBuffer::upload(stream, r.table())?,
            pow2: DeviceBuffer::upload(stream, &powers_of_two()[..])?,
            rows: r.meta.constraints,
            bytes: pce_device_bytes(r),
            _reservation: reservation,
        };
        // Other leases' streams read the resident copy.
        stream.sync()?;
        Ok(s)
    }

    fn constraints(&self) -> DeviceConstraints<'_> {
        let m = |k: usize| DeviceMatrix {
            row_ptr: &self.row_ptr[k],
            cols: &self.cols[k],
            codes: &self.codes[k],
        };
        DeviceConstraints {
            matrices: [m(0), m(1), m(2)],
            wide: self.wide,
            table: &self.table,
            pow2: &self.pow2,
            rows: self.rows,
        }
    }
}

impl GpuContext {
    /// The recording's matrices on `dev`: the resident copy, uploaded on
    /// first use; `None` if they do not fit the device's budget.
    fn pce_on(
        &self,
        dev: &GpuDevice,
        r: &Arc<Recording>,
        stream: &Stream,
    ) -> anyhow::Result<Option<Arc<DevicePce>>> {
        if !self.pce_matrices {
            return Ok(None);
        }
        let mut cache = dev.pce.lock().unwrap();
        if let Some(d) = cache.get(r) {
            return Ok(Some(d.clone()));
        }
        let bytes = pce_device_bytes(r);
        let reservation = match dev.reserve(bytes, "pre-compiled constraints") {
            Ok(res) => res,
            Err(e) => {
                tracing::warn!("{e}; evaluating a, b and c on the host instead");
                return Ok(None);
            }
        };
        let started = Instant::now();
        let d = Arc::new(DevicePce::upload(stream, r, reservation)?);
        tracing::info!(
            device = dev.ordinal,
            bytes,
            seconds = started.elapsed().as_secs_f64(),
            "pre-compiled constraints resident on the device"
        );
        cache.insert(r, d.clone());
        Ok(Some(d))
    }

    /// Fills the slot's a, b and c for a partition whose synthesis left them
    /// to the device: evaluated there from the uploaded assignment (already
    /// canonical in `bufs.z`), or, when the matrices do not fit, on the host
    /// from the arena's (`z`, canonical if `z_canonical`) into the arena's
    /// `abc` and uploaded. The device time of the evaluation, if it ran there.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn deferred_abc(
        &self,
        r: &Arc<Recording>,
        dev: &GpuDevice,
        stream: &Stream,
        bufs: &Buffers,
        shape: &SrsShape,
        z: &[Limbs],
        z_canonical: bool,
        abc: [&mut [Limbs]; 3],
    ) -> anyhow::Result<Option<(Instant, Instant)>> {
        match self.pce_on(dev, r, stream)? {
            Some(m) => {
                let start = Instant::now();
                let bad = ops::pce_eval(
                    stream,
                    &m.constraints(),
                    bufs.z(),
                    shape.inputs,
                    shape.domain,
                    &bufs.a,
                    &bufs.b,
                    bufs.c()?,
                )?;
                let end = Instant::now();
                match bad {
                    Some(row) => Err(Unsatisfied { row }.into()),
                    None => Ok(Some((start, end))),
                }
            }
            None => {
                let host = abc_on_host(r, z, z_canonical, abc, shape)?;
                let [a, b, c] = host.slices();
                bufs.a.copy_in(stream, a)?;
                bufs.b.copy_in(stream, b)?;
                bufs.c()?.copy_in(stream, c)?;
                // The copies read `host` until the stream passes them.
                stream.sync()?;
                Ok(None)
            }
        }
    }
}

/// a, b and c evaluated on the host for a partition whose synthesis left
/// them to the device: in the arena's regions when it has room for them,
/// else in vectors of their own.
pub(super) enum HostAbc<'a> {
    Arena([&'a mut [Limbs]; 3]),
    Owned([Vec<Limbs>; 3]),
}

impl HostAbc<'_> {
    pub(super) fn slices(&self) -> [&[Limbs]; 3] {
        match self {
            HostAbc::Arena([a, b, c]) => [&**a, &**b, &**c],
            HostAbc::Owned([a, b, c]) => [a, b, c],
        }
    }
}

/// a, b and c of the recording's rows from `z` (canonical if
/// `z_canonical`), on the host (see [`evaluate_on_host`]).
pub(super) fn abc_on_host<'a>(
    r: &Recording,
    z: &[Limbs],
    z_canonical: bool,
    abc: [&'a mut [Limbs]; 3],
    shape: &SrsShape,
) -> anyhow::Result<HostAbc<'a>> {
    // A partition synthesized without room for a, b and c in its arena (the
    // matrices were expected on the device) gets them for the moment.
    let mut host = if abc[0].len() < shape.domain {
        HostAbc::Owned(std::array::from_fn(|_| vec![[0u64; 4]; shape.domain]))
    } else {
        HostAbc::Arena(abc)
    };
    let [a, b, c] = match &mut host {
        HostAbc::Arena([a, b, c]) => [&mut **a, &mut **b, &mut **c],
        HostAbc::Owned([a, b, c]) => [a.as_mut_slice(), b.as_mut_slice(), c.as_mut_slice()],
    };
    evaluate_on_host(r, z, z_canonical, [a, b, c], shape.inputs)?;
    Ok(host)
}

/// a, b and c on the host, as the device computes them (the fallback when a
/// recording does not fit the device's budget): the recorded rows checked,
/// a·b = c, one row per public input (a = the input), zeros after. `z` is the
/// assignment, canonical (after prep_msm) or Montgomery (as synthesis
/// leaves it) as `z_canonical` says.
pub fn evaluate_on_host(
    r: &Recording,
    z: &[Limbs],
    z_canonical: bool,
    [a, b, c]: [&mut [Limbs]; 3],
    n_inputs: usize,
) -> anyhow::Result<()> {
    let canonical;
    let z: &[Scalar] = if z_canonical {
        canonical = as_bytes(z)
            .par_iter()
            .map(|bytes| {
                Option::from(Scalar::from_bytes_le(bytes))
                    .context("a non-canonical assignment value")
            })
            .collect::<anyhow::Result<Vec<Scalar>>>()?;
        &canonical
    } else {
        as_scalars_ref(z)
    };
    let (a, b, c) = (as_scalars(a), as_scalars(b), as_scalars(c));
    r.evaluate(z, a, b, c);
    let rows = r.meta.constraints;
    if let Err(Mismatch::Unsatisfied { row }) = check_rows(a, b, c, rows) {
        return Err(Unsatisfied { row }.into());
    }
    append_input_rows([a, b, c], &z[..n_inputs], rows);
    Ok(())
}

/// One partition's a, b and c evaluated on a device, outside the engine
/// (tests and `cuzk fil synth`).
pub struct DeviceEval {
    /// a, b and c over the domain, Montgomery form, as the NTT takes them.
    pub abc: [Vec<Limbs>; 3],
    /// The first constraint a·b ≠ c, if any.
    pub unsatisfied: Option<usize>,
    /// Uploading the matrices (once).
    pub matrices_upload: Duration,
    /// Uploading the assignment (median).
    pub z_upload: Duration,
    /// The evaluation and check on the device (median).
    pub eval: Duration,
}

/// Evaluates `reps` times (at least once) on `device` from the recording and
/// the canonical assignment `z`, as the device stage does, and brings a, b
/// and c back.
pub fn evaluate_on_device(
    device: i32,
    r: &Arc<Recording>,
    z: &[Limbs],
    domain: usize,
    reps: usize,
) -> anyhow::Result<DeviceEval> {
    let dev = GpuDevice::new(device, usize::MAX);
    let stream = Stream::new(device)?;
    let t = Instant::now();
    let reservation = dev
        .vram
        .reserve(pce_device_bytes(r), "pre-compiled constraints")?;
    let m = DevicePce::upload(&stream, r, reservation)?;
    let matrices_upload = t.elapsed();
    let zbuf = DeviceBuffer::alloc(device, z.len().max(1) * 32)?;
    let [a, b, c] = [0; 3].map(|_| DeviceBuffer::alloc(device, domain * 32));
    let (a, b, c) = (a?, b?, c?);
    let (mut z_t, mut eval_t, mut unsatisfied) = (vec![], vec![], None);
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        zbuf.copy_in(&stream, z)?;
        stream.sync()?;
        z_t.push(t.elapsed());
        let t = Instant::now();
        unsatisfied = ops::pce_eval(
            &stream,
            &m.constraints(),
            &zbuf,
            r.meta.n_inputs,
            domain,
            &a,
            &b,
            &c,
        )?;
        eval_t.push(t.elapsed());
    }
    let mut abc = [
        vec![[0u64; 4]; domain],
        vec![[0u64; 4]; domain],
        vec![[0u64; 4]; domain],
    ];
    for (buf, out) in [&a, &b, &c].into_iter().zip(&mut abc) {
        buf.download(&stream, out)?;
    }
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    Ok(DeviceEval {
        abc,
        unsatisfied,
        matrices_upload,
        z_upload: median(z_t),
        eval: median(eval_t),
    })
}
