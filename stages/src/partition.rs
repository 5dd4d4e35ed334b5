//! The item that flows through the proving graph: one partition of a job,
//! what each stage produced for it so far, and where its data lies in its arena.

use std::sync::Arc;

use bellperson::groth16::Proof;
use blstrs::{Bls12, G1Projective, G2Projective, Scalar};
use cuzk_engine::{LayoutBuilder, Region};

use crate::circuit::ProvableCircuit;
use crate::pce::Recording;
use crate::scalars::Limbs;
use crate::srs::{Srs, SrsShape};

/// Where one partition's data lives in its arena. Sized from the SRS shape
/// before synthesis, so nothing is reallocated as the circuit runs.
#[derive(Clone, Copy, Debug)]
pub struct PartitionLayout {
    pub shape: SrsShape,
    /// A, B, C evaluations over the domain; after gpu_ntt_msm, `a` holds H.
    pub a: Region<Limbs>,
    pub b: Region<Limbs>,
    pub c: Region<Limbs>,
    /// The full assignment: inputs (starting with the constant one), then aux.
    pub z: Region<Limbs>,
    /// Bitmaps: aux variables used in A; inputs and aux used in B.
    pub a_aux_density: Region<u64>,
    pub b_input_density: Region<u64>,
    pub b_aux_density: Region<u64>,
    /// prep_msm's packing, one per query.
    pub l: QueryRegions,
    pub a_query: QueryRegions,
    pub b_query: QueryRegions,
    pub bytes: usize,
}

/// Index lists of one query: bases whose scalar is one, and the bases and
/// scalars of significant terms.
#[derive(Clone, Copy, Debug)]
pub struct QueryRegions {
    pub ones: Region<u32>,
    pub sig_base: Region<u32>,
    pub sig_scalar: Region<u32>,
}

impl QueryRegions {
    fn new(layout: &mut LayoutBuilder, capacity: usize) -> Self {
        Self {
            ones: layout.push(capacity),
            sig_base: layout.push(capacity),
            sig_scalar: layout.push(capacity),
        }
    }
}

impl PartitionLayout {
    pub fn new(shape: SrsShape) -> Self {
        Self::build(shape, shape.domain)
    }

    /// For a partition whose a, b and c the device evaluates from the
    /// pre-compiled constraints in its memory: no room for them on the host
    /// (at 32 GiB PoRep's size, 12 of a partition's 19 GiB).
    pub fn witness_only(shape: SrsShape) -> Self {
        Self::build(shape, 0)
    }

    /// Whether the arena holds a, b and c.
    pub fn has_abc(&self) -> bool {
        self.a.len() == self.shape.domain
    }

    fn build(shape: SrsShape, abc_len: usize) -> Self {
        let words = |bits: usize| bits.div_ceil(64);
        let mut l = LayoutBuilder::new();
        let (ni, na) = (shape.inputs, shape.aux);
        let a = l.push(abc_len);
        let b = l.push(abc_len);
        let c = l.push(abc_len);
        let z = l.push(ni + na);
        let a_aux_density = l.push(words(na));
        let b_input_density = l.push(words(ni));
        let b_aux_density = l.push(words(na));
        let lq = QueryRegions::new(&mut l, na);
        let a_query = QueryRegions::new(&mut l, ni + na);
        let b_query = QueryRegions::new(&mut l, ni + na);
        Self {
            shape,
            a,
            b,
            c,
            z,
            a_aux_density,
            b_input_density,
            b_aux_density,
            l: lq,
            a_query,
            b_query,
            bytes: l.total_bytes(),
        }
    }
}

/// How one MSM query is computed, decided by prep_msm from the scalars.
#[derive(Clone, Copy, Debug, Default)]
pub struct QueryPlan {
    /// If set, the aux terms form one dense MSM: bases from this offset of the
    /// query's base vector against the aux scalars, zeroes and ones included.
    pub dense_aux_base: Option<usize>,
    /// Terms (outside the dense part) whose scalar is one: batch addition.
    pub ones: usize,
    /// Terms (outside the dense part) with any other non-zero scalar: tail MSM.
    pub significant: usize,
    /// Terms skipped because their scalar is zero.
    pub zeros: usize,
}

/// The plans of all four MSM queries (B is shared by G1 and G2).
#[derive(Clone, Copy, Debug, Default)]
pub struct MsmPlan {
    pub l: QueryPlan,
    pub a: QueryPlan,
    pub b: QueryPlan,
    /// Whether the index lists (and the canonical assignment) are in the
    /// host arena: prep_msm's; a plan made on the device leaves them there.
    pub on_host: bool,
    /// Tails (significant terms and ones) small enough that prep_msm summed
    /// them on the host; the device MSMs skip them.
    pub host_tails: HostTails,
}

/// Each query's tail summed on the host, where prep_msm found it small
/// (see [`crate::prep::HOST_TAIL_TERMS`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct HostTails {
    pub l: Option<G1Projective>,
    pub a: Option<G1Projective>,
    pub b_g1: Option<G1Projective>,
    pub b_g2: Option<G2Projective>,
}

/// The G1 results of gpu_ntt_msm.
#[derive(Clone, Copy, Debug)]
pub struct G1Results {
    pub h: G1Projective,
    pub l: G1Projective,
    pub a: G1Projective,
    pub b_g1: G1Projective,
}

/// One partition on its way through the graph.
pub struct PartitionWork {
    pub srs: Arc<Srs>,
    /// Taken by synth.
    pub circuit: Option<Box<dyn ProvableCircuit>>,
    /// Set by synth.
    pub layout: Option<PartitionLayout>,
    /// Public inputs the circuit allocated, without the leading one (set by synth).
    pub public_inputs: Vec<Scalar>,
    pub constraints: usize,
    /// Set by synth_witness on the GPU backend: a, b and c are not in the
    /// arena; the device stage evaluates them from this recording.
    pub deferred_abc: Option<Arc<Recording>>,
    /// Set by prep_msm.
    pub plan: Option<MsmPlan>,
    /// Set by gpu_ntt_msm.
    pub g1: Option<G1Results>,
    /// Set by b_g2_msm.
    pub b_g2: Option<G2Projective>,
    /// Set by assemble.
    pub proof: Option<Proof<Bls12>>,
    /// Verify the proof before handing it back.
    pub self_verify: bool,
    /// Its job's label (fault drills pick their targets by it).
    pub job_label: Arc<str>,
}

impl PartitionWork {
    pub fn new(srs: Arc<Srs>, circuit: Box<dyn ProvableCircuit>, self_verify: bool) -> Self {
        Self {
            srs,
            circuit: Some(circuit),
            layout: None,
            public_inputs: vec![],
            constraints: 0,
            deferred_abc: None,
            plan: None,
            g1: None,
            b_g2: None,
            proof: None,
            self_verify,
            job_label: Arc::from(""),
        }
    }

    /// The layout, or an error naming the stage that should have set it.
    pub fn layout(&self) -> anyhow::Result<PartitionLayout> {
        self.layout
            .ok_or_else(|| anyhow::anyhow!("no arena layout: synth has not run on this partition"))
    }

    pub fn plan(&self) -> anyhow::Result<MsmPlan> {
        self.plan
            .ok_or_else(|| anyhow::anyhow!("no MSM plan: prep_msm has not run on this partition"))
    }

    /// The plan, for a stage that reads its lists from the host arena.
    pub fn host_plan(&self) -> anyhow::Result<MsmPlan> {
        let plan = self.plan()?;
        anyhow::ensure!(
            plan.on_host,
            "the MSM lists were prepared on the device and are not in the host arena: \
             declare a prep_msm node before the device stage for a graph with host MSMs"
        );
        Ok(plan)
    }
}
