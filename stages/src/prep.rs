//! prep_msm: classifies every scalar as zero, one or significant and packs
//! each MSM query into index lists (ones for batch addition, significant
//! terms for the tail MSM), or marks its aux part dense when packing would
//! not pay. Then converts the assignment to the canonical form MSMs read.

use blstrs::Scalar;
use cuzk_engine::{Stage, StageContext};
use ff::Field;
use group::Group;
use group::prime::PrimeCurveAffine;

use crate::cs::{bit, popcount};
use crate::partition::{HostTails, MsmPlan, PartitionWork, QueryPlan};
use crate::query::PackedQuery;
use crate::scalars::{as_scalars, to_canonical};

/// Aux terms form one dense MSM when at least this share is significant.
const DENSE_SHARE: f64 = 0.5;

/// A query tail (significant terms plus ones) of at most this many terms is
/// summed here on the host: a device MSM has a fixed cost of milliseconds
/// (allocation, a device-wide synchronisation), a few scalar
/// multiplications on the host take microseconds (a circuit's few public
/// inputs, in every A query).
pub const HOST_TAIL_TERMS: usize = 8;

pub struct PrepMsm;

/// Index lists one query is packed into.
struct Lists<'a> {
    ones: &'a mut [u32],
    sig_base: &'a mut [u32],
    sig_scalar: &'a mut [u32],
}

impl Lists<'_> {
    /// The lists cut to what `q` packed into them.
    fn packed(&self, q: &QueryPlan) -> PackedQuery<'_> {
        PackedQuery {
            ones: &self.ones[..q.ones],
            sig_base: &self.sig_base[..q.significant],
            sig_scalar: &self.sig_scalar[..q.significant],
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Zero,
    One,
    Significant,
}

fn class(s: &Scalar) -> Class {
    if s.is_zero_vartime() {
        Class::Zero
    } else if *s == Scalar::ONE {
        Class::One
    } else {
        Class::Significant
    }
}

/// Packs one query. `inputs` are (base index, variable) pairs of the inputs
/// in the query; aux variable j (if `aux_density` has it) takes the next base
/// index from `aux_base`.
fn plan_query(
    z: &[Scalar],
    n_inputs: usize,
    inputs: impl Iterator<Item = (usize, usize)>,
    aux_density: Option<&[u64]>,
    aux_base: usize,
    lists: &mut Lists<'_>,
) -> QueryPlan {
    let aux = &z[n_inputs..];
    let full = aux_density.is_none_or(|d| popcount(d) == aux.len());
    let dense = full && {
        let sig = aux
            .iter()
            .filter(|s| class(s) == Class::Significant)
            .count();
        is_dense(full, sig, aux.len())
    };
    let mut plan = QueryPlan {
        dense_aux_base: dense.then_some(aux_base),
        ..QueryPlan::default()
    };
    let mut push = |plan: &mut QueryPlan, base: usize, var: usize| match class(&z[var]) {
        Class::Zero => plan.zeros += 1,
        Class::One => {
            lists.ones[plan.ones] = base as u32;
            plan.ones += 1;
        }
        Class::Significant => {
            lists.sig_base[plan.significant] = base as u32;
            lists.sig_scalar[plan.significant] = var as u32;
            plan.significant += 1;
        }
    };
    for (base, var) in inputs {
        push(&mut plan, base, var);
    }
    if !dense {
        let mut base = aux_base;
        for j in 0..aux.len() {
            if aux_density.is_none_or(|d| bit(d, j)) {
                push(&mut plan, base, n_inputs + j);
                base += 1;
            }
        }
    }
    plan
}

impl Stage<PartitionWork> for PrepMsm {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        prepare(w, cx)
    }
}

/// prep_msm's work on the host (the stage, and the CPU backend's device
/// stages in graphs that leave it to the device).
pub fn prepare(w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
    let layout = w.layout()?;
    let ni = layout.shape.inputs;
    let view = cx.arena()?.view();
    let z_limbs = view.take(layout.z);
    let a_density = view.take(layout.a_aux_density);
    let b_in_density = view.take(layout.b_input_density);
    let b_aux_density = view.take(layout.b_aux_density);
    let lists = |q: crate::partition::QueryRegions| Lists {
        ones: view.take(q.ones),
        sig_base: view.take(q.sig_base),
        sig_scalar: view.take(q.sig_scalar),
    };
    let z = as_scalars(z_limbs);
    let (mut l_lists, mut a_lists, mut b_lists) = (
        lists(layout.l),
        lists(layout.a_query),
        lists(layout.b_query),
    );
    let mut plan = MsmPlan {
        // L: every aux variable, in order.
        l: plan_query(z, ni, std::iter::empty(), None, 0, &mut l_lists),
        // A: every input (full density), then aux used in A.
        a: plan_query(
            z,
            ni,
            (0..ni).map(|i| (i, i)),
            Some(a_density),
            ni,
            &mut a_lists,
        ),
        // B: inputs used in B, then aux used in B.
        b: {
            let used: Vec<usize> = (0..ni).filter(|&i| bit(b_in_density, i)).collect();
            let n_used = used.len();
            plan_query(
                z,
                ni,
                used.into_iter().enumerate(),
                Some(b_aux_density),
                n_used,
                &mut b_lists,
            )
        },
        on_host: true,
        host_tails: HostTails::default(),
    };
    let srs = &w.srs;
    let (l, a, b) = (
        l_lists.packed(&plan.l),
        a_lists.packed(&plan.a),
        b_lists.packed(&plan.b),
    );
    plan.host_tails = HostTails {
        l: host_tail(&srs.l, z, &plan.l, &l),
        a: host_tail(&srs.a, z, &plan.a, &a),
        b_g1: host_tail(&srs.b_g1, z, &plan.b, &b),
        b_g2: host_tail(&srs.b_g2, z, &plan.b, &b),
    };
    to_canonical(z_limbs);
    note_plan(cx, &plan);
    let t = plan.host_tails;
    let on_host = [
        t.l.is_some(),
        t.a.is_some(),
        t.b_g1.is_some(),
        t.b_g2.is_some(),
    ];
    cx.note("host_tails", on_host.iter().filter(|&&h| h).count());
    w.plan = Some(plan);
    Ok(())
}

/// A query's tail (significant terms and ones) on the host, if it has at
/// most [`HOST_TAIL_TERMS`] terms; `z` is the Montgomery assignment.
fn host_tail<A>(
    bases: &[A],
    z: &[Scalar],
    q: &QueryPlan,
    lists: &PackedQuery<'_>,
) -> Option<A::Curve>
where
    A: PrimeCurveAffine<Scalar = Scalar>,
{
    if q.significant + q.ones > HOST_TAIL_TERMS {
        return None;
    }
    let sig = lists
        .sig_base
        .iter()
        .zip(lists.sig_scalar)
        .map(|(&b, &s)| bases[b as usize] * z[s as usize]);
    let ones = lists.ones.iter().map(|&b| bases[b as usize].to_curve());
    Some(sig.chain(ones).fold(A::Curve::identity(), |acc, p| acc + p))
}

/// Notes each query's packing in the stage's timing.
pub fn note_plan(cx: &mut StageContext<'_>, plan: &MsmPlan) {
    for (name, q) in [("l", plan.l), ("a", plan.a), ("b", plan.b)] {
        let mode = if q.dense_aux_base.is_some() {
            "dense"
        } else {
            "packed"
        };
        cx.note(
            name,
            format!(
                "{mode}:ones={},sig={},zero={}",
                q.ones, q.significant, q.zeros
            ),
        );
    }
}

/// Whether a query's aux terms form one dense MSM: all of them are in it
/// and at least [`DENSE_SHARE`] of them are significant.
pub fn is_dense(full: bool, significant_aux: usize, aux: usize) -> bool {
    full && significant_aux as f64 >= DENSE_SHARE * aux as f64 && aux > 0
}
