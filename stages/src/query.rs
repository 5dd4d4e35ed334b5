//! Computes one MSM query on the CPU from prep_msm's plan: the dense aux part,
//! the tail MSM over significant terms and the batch addition of ones.

use std::ops::Add;

use cuzk_engine::ArenaView;
use cuzk_gpu::cpu::msm::{Curve, Terms, msm, sum_gathered};

use crate::partition::{QueryPlan, QueryRegions};
use crate::scalars::ScalarBytes;

/// A query's packed index lists, cut to their lengths.
pub struct PackedQuery<'a> {
    pub ones: &'a [u32],
    pub sig_base: &'a [u32],
    pub sig_scalar: &'a [u32],
}

impl<'a> PackedQuery<'a> {
    pub fn from_arena(view: &ArenaView<'a>, regions: QueryRegions, plan: &QueryPlan) -> Self {
        Self {
            ones: &view.take(regions.ones)[..plan.ones],
            sig_base: &view.take(regions.sig_base)[..plan.significant],
            sig_scalar: &view.take(regions.sig_scalar)[..plan.significant],
        }
    }
}

/// `sum(base * scalar)` over one query. `z` is the canonical assignment
/// (inputs, then aux); `n_inputs` says where aux starts; `host_tail` is the
/// tail prep_msm already summed, if it did.
pub fn query_msm<C>(
    bases: &[C::Affine],
    plan: &QueryPlan,
    packed: &PackedQuery<'_>,
    z: &[ScalarBytes],
    n_inputs: usize,
    host_tail: Option<C::Projective>,
) -> C::Projective
where
    C: Curve,
    C::Projective: Add<Output = C::Projective>,
{
    let aux = &z[n_inputs..];
    let tail = || {
        let (sig, ones) = rayon::join(
            || {
                msm::<C>(Terms::Gathered {
                    bases,
                    base_idx: packed.sig_base,
                    scalars: z,
                    scalar_idx: packed.sig_scalar,
                })
            },
            || sum_gathered::<C>(bases, packed.ones),
        );
        sig + ones
    };
    let (dense, tail) = rayon::join(
        || match plan.dense_aux_base {
            Some(base) => msm::<C>(Terms::Dense {
                bases: &bases[base..base + aux.len()],
                scalars: aux,
            }),
            None => msm::<C>(Terms::Dense {
                bases: &[],
                scalars: &[],
            }),
        },
        || host_tail.unwrap_or_else(tail),
    );
    dense + tail
}
