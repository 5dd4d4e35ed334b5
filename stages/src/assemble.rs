//! assemble: the proof (A, B, C) from the MSM results with fresh randomness
//! r and s, as in Groth16:
//!
//! A = α + Σ aᵢ·uᵢ(τ) + r·δ
//! B = β + Σ aᵢ·vᵢ(τ) + s·δ
//! C = s·A' + r·B'₁ + r·s·δ + s·α + r·β + H + L
//!
//! where A' and B'₁ are the A and B₁ query sums.

use anyhow::Context;
use bellperson::groth16::{Proof, verify_proof};
use blstrs::{G1Projective, G2Projective, Scalar};
use cuzk_engine::{Stage, StageContext};
use ff::Field;
use group::Curve;
use group::prime::PrimeCurveAffine;
use rand::rngs::OsRng;

use crate::partition::PartitionWork;

pub struct Assemble;

impl Stage<PartitionWork> for Assemble {
    fn run(&self, w: &mut PartitionWork, cx: &mut StageContext<'_>) -> anyhow::Result<()> {
        let g1 =
            w.g1.context("no G1 results: gpu_ntt_msm has not run on this partition")?;
        let b_g2 = w
            .b_g2
            .context("no G2 result: b_g2_msm has not run on this partition")?;
        let vk = &w.srs.vk;
        anyhow::ensure!(
            !bool::from(vk.delta_g1.is_identity() | vk.delta_g2.is_identity()),
            "the SRS's delta is the identity: refusing to prove with a subverted SRS"
        );
        let r = Scalar::random(OsRng);
        let s = Scalar::random(OsRng);
        let delta_g1 = G1Projective::from(vk.delta_g1);
        let a = G1Projective::from(vk.alpha_g1) + g1.a + delta_g1 * r;
        let b = G2Projective::from(vk.beta_g2) + b_g2 + G2Projective::from(vk.delta_g2) * s;
        let c = g1.a * s
            + g1.b_g1 * r
            + delta_g1 * (r * s)
            + G1Projective::from(vk.alpha_g1) * s
            + G1Projective::from(vk.beta_g1) * r
            + g1.h
            + g1.l;
        let proof = Proof {
            a: a.to_affine(),
            b: b.to_affine(),
            c: c.to_affine(),
        };
        if w.self_verify {
            let ok = verify_proof(&w.srs.pvk, &proof, &w.public_inputs)
                .context("verifying the proof")?;
            anyhow::ensure!(ok, "self-verification failed: the proof does not verify");
            cx.note("verified", true);
        }
        w.proof = Some(proof);
        Ok(())
    }
}
