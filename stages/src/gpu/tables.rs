//! Fixed-base MSM tables beside a resident SRS (`cuzk_gpu::fixed`): built
//! once when the SRS goes resident, under the device's VRAM budget, and
//! used by every MSM large enough to pay for them; the rest run on
//! sppark's Pippenger.

use std::time::Instant;

use cuzk_gpu::cuda::{self, DeviceBuffer, KernelError, Stream};
use cuzk_gpu::fixed::{self, DenseChoice, FixedCurve, FixedTerms, MsmTable};
use cuzk_gpu::ops::{self, G1, G2, ScalarForm};
use cuzk_gpu::vram::{Reservation, VramBudget};

use super::{DeviceSrs, G1_BYTES, G2_BYTES};
use crate::srs::Srs;

/// Whether tables are built and how much device memory one SRS's may take.
#[derive(Clone, Copy, Debug)]
pub struct TablePolicy {
    pub enabled: bool,
    /// Bytes for one SRS's tables; 0 = half of what its budget has left.
    pub budget: usize,
}

impl TablePolicy {
    pub const OFF: Self = Self {
        enabled: false,
        budget: 0,
    };
}

/// Bytes of one point in each query (h, l, a, b_g1 in G1; b_g2 in G2).
pub const QUERY_BYTES: [usize; 5] = [G1_BYTES, G1_BYTES, G1_BYTES, G1_BYTES, G2_BYTES];

/// Device bytes of an SRS whose queries hold `lengths` points.
pub fn points_bytes(lengths: [usize; 5]) -> usize {
    lengths.iter().zip(QUERY_BYTES).map(|(n, b)| n * b).sum()
}

/// Queries above this many points get no table: on an H200 the fixed-base
/// MSM beats sppark's by 1.48x at 2^24 points but loses at 2^26 (0.69x),
/// where each addition takes twice as long (its 66 GiB table read at
/// random: address translation misses, we believe).
pub const MAX_TABLE_POINTS: usize = 1 << 25;

/// The window and copies of each query's table (h, l, a, b_g1, b_g2, as
/// `lengths` counts their points) within `budget` bytes: each query's share
/// in proportion to its points' bytes; none above `MAX_TABLE_POINTS`.
pub fn plan_tables(lengths: [usize; 5], budget: usize) -> [Option<(u32, u32)>; 5] {
    let total = points_bytes(lengths);
    std::array::from_fn(|i| {
        if lengths[i] > MAX_TABLE_POINTS {
            return None;
        }
        let own = lengths[i] * QUERY_BYTES[i];
        let share = (budget as u128 * own as u128 / total.max(1) as u128) as usize;
        fixed::plan(lengths[i], QUERY_BYTES[i], share)
    })
}

/// Device bytes of the tables `plans` describes.
pub fn planned_bytes(lengths: [usize; 5], plans: &[Option<(u32, u32)>; 5]) -> usize {
    (0..5)
        .map(|i| {
            plans[i].map_or(0, |(_, c)| {
                fixed::table_bytes(lengths[i], QUERY_BYTES[i], c)
            })
        })
        .sum()
}

/// The tables of one resident SRS's queries (None: that query has none).
#[derive(Default)]
pub struct SrsTables {
    pub h: Option<MsmTable>,
    pub l: Option<MsmTable>,
    pub a: Option<MsmTable>,
    pub b_g1: Option<MsmTable>,
    pub b_g2: Option<MsmTable>,
    _reservation: Option<Reservation>,
}

impl SrsTables {
    /// Tables for `d`'s queries within the policy's budget, each query's
    /// share in proportion to its points' bytes; reserved on `vram`. Where
    /// they do not fit or fail to build, none (with a warning).
    pub(super) fn build(
        vram: &std::sync::Arc<VramBudget>,
        stream: &Stream,
        d: &DeviceSrs,
        srs: &Srs,
        policy: TablePolicy,
    ) -> Self {
        if !policy.enabled {
            return Self::default();
        }
        let budget = match policy.budget {
            0 => vram.limit().saturating_sub(vram.used()) / 2,
            b => b,
        };
        let lengths = srs.query_lens();
        let plans = plan_tables(lengths, budget);
        let bytes = planned_bytes(lengths, &plans);
        if bytes == 0 {
            return Self::default();
        }
        let reservation = match vram.reserve(bytes, "MSM tables") {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("{e}; MSMs of this SRS run without tables");
                return Self::default();
            }
        };
        let started = Instant::now();
        let build = |i: usize, points: &DeviceBuffer, g2: bool| -> Result<_, KernelError> {
            let Some((window, copies)) = plans[i] else {
                return Ok(None);
            };
            let n = lengths[i];
            Ok(Some(if g2 {
                MsmTable::build::<G2>(stream, points, n, window, copies)?
            } else {
                MsmTable::build::<G1>(stream, points, n, window, copies)?
            }))
        };
        let built = (|| {
            Ok::<_, KernelError>(Self {
                h: build(0, &d.h, false)?,
                l: build(1, &d.l, false)?,
                a: build(2, &d.a, false)?,
                b_g1: build(3, &d.b_g1, false)?,
                b_g2: build(4, &d.b_g2, true)?,
                _reservation: Some(reservation),
            })
        })();
        // Tables only speed MSMs up: a device that cannot build them still
        // proves, on sppark's MSM.
        let tables = match built {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!("building MSM tables failed ({e}); MSMs of this SRS run without");
                return Self::default();
            }
        };
        tracing::info!(
            device = stream.device(),
            bytes,
            seconds = started.elapsed().as_secs_f64(),
            windows = ?plans.map(|p| p.map(|(w, c)| format!("{w}x{c}"))),
            "MSM tables resident beside the SRS"
        );
        tables
    }

    /// Device bytes the tables take.
    pub fn bytes(&self) -> usize {
        [&self.h, &self.l, &self.a, &self.b_g1, &self.b_g2]
            .iter()
            .filter_map(|t| t.as_ref().map(MsmTable::bytes))
            .sum()
    }
}

/// Which dense MSMs without a table run on our Pippenger (`choice`), with
/// the device budget whose promises their scratch must leave alone: a
/// partition's or an SRS's reserved allocation must not fail because an
/// MSM took its memory.
#[derive(Clone, Copy)]
pub(super) struct DensePath<'a> {
    pub choice: DenseChoice,
    pub budget: &'a VramBudget,
}

/// An MSM over `points`: on `table` when there is one and the MSM is large
/// enough to pay for its bucket reduction; else a gathered one of
/// [`fixed::PLAIN_MIN_TERMS`] or more, or a dense one that `dense` takes
/// whose scratch fits the device memory its budget will never hand out, on
/// our Pippenger over the points as they are, and the rest on sppark's.
/// Counts the MSMs that ran on a table in `on_tables`.
#[allow(clippy::too_many_arguments)]
pub(super) fn msm<C: FixedCurve>(
    stream: &Stream,
    points: &DeviceBuffer,
    table: Option<&MsmTable>,
    dense: DensePath<'_>,
    terms: FixedTerms<'_>,
    scalars: &DeviceBuffer,
    n: usize,
    form: ScalarForm,
    on_tables: &mut usize,
) -> Result<C::Projective, KernelError> {
    if let Some(t) = table.filter(|t| t.worth(n)) {
        *on_tables += 1;
        return fixed::msm_fixed::<C>(stream, points, t, terms, scalars, n, form);
    }
    let all = points.bytes() / C::POINT_BYTES;
    let dense_plain = match terms {
        FixedTerms::Dense { .. } if dense.choice.takes(n) => {
            let window = dense.choice.window(n);
            let (free, _) = cuda::mem_info(stream.device())?;
            let room = dense.budget.unpromised(free);
            let pairs = fixed::tuning().pairs;
            fixed::plain_entries(n, C::POINT_BYTES, window, room, pairs).map(|e| (window, e))
        }
        _ => None,
    };
    if let Some((window, entries)) = dense_plain {
        let plain = MsmTable::plain(all, window);
        match fixed::msm_fixed_chunked::<C>(
            stream, points, &plain, terms, scalars, n, form, entries,
        ) {
            // Another stream took the memory since it was counted: msm_t
            // needs less.
            Err(e) if e.is_out_of_memory() => {
                tracing::warn!("dense MSM of {n} terms on sppark's msm_t: {e}")
            }
            done => return done,
        }
    }
    match terms {
        FixedTerms::Dense {
            base_offset,
            scalar_offset,
        } => ops::msm::<C>(
            stream,
            points,
            base_offset,
            C::POINT_BYTES,
            scalars,
            scalar_offset,
            n,
            form,
        ),
        FixedTerms::Gathered { .. } if n >= fixed::PLAIN_MIN_TERMS => {
            let plain = MsmTable::plain(all, fixed::plain_window(n));
            fixed::msm_fixed::<C>(stream, points, &plain, terms, scalars, n, form)
        }
        FixedTerms::Gathered {
            base_idx,
            scalar_idx,
        } => ops::msm_gathered::<C>(stream, points, base_idx, scalars, scalar_idx, n, form),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_query_gets_its_share_of_the_budget() {
        // chain 2^20: four G1 queries of about 2^20 points, B₂ in G2.
        let n = 1 << 20;
        let lengths = [n - 1, n, n, n, n];
        let full = plan_tables(lengths, usize::MAX);
        assert!(full.iter().all(|p| *p == Some((20, 13))), "{full:?}");
        // Three times the SRS: three extra copies of each query.
        let srs = (4 * 96 + 192) * n;
        let plans = plan_tables(lengths, 3 * srs);
        assert!(plans.iter().all(|p| *p == Some((20, 4))), "{plans:?}");
        assert!(planned_bytes(lengths, &plans) <= 3 * srs);
        // Less than one copy each: no tables.
        assert_eq!(plan_tables(lengths, srs / 2), [None; 5]);
        // A 32 GiB PoRep's H query (2^27 points) is left to sppark.
        let porep = plan_tables(
            [(1 << 27) - 1, 1 << 27, 1 << 26, 1 << 26, 1 << 26],
            usize::MAX,
        );
        assert_eq!(porep, [None, None, None, None, None]);
        let small = plan_tables([1 << 25, 1 << 25, 1 << 25, 1 << 25, 1 << 25], usize::MAX);
        assert!(small.iter().all(Option::is_some));
    }
}
