//! `sha256`: SHA-256's compression function chained over private 512-bit
//! blocks (bellperson's gadget), the final state public. Bit-heavy like
//! PoRep: most aux values are 0 or 1, which is what prep_msm's split is for.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::multipack;
use bellperson::gadgets::sha256::sha256_compression_function;
use bellperson::gadgets::uint32::UInt32;
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use std::sync::OnceLock;

pub(crate) const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// One 512-bit message block.
pub type Block = [u8; 64];

#[derive(Clone, Debug)]
pub struct Sha256Circuit {
    pub blocks: usize,
    /// Private message blocks, `None` for setup.
    pub message: Option<Vec<Block>>,
}

/// Applies the compression function to each block, from SHA-256's IV.
pub fn native_state(message: &[Block]) -> [u32; 8] {
    let mut state = IV;
    for block in message {
        sha2::compress256(&mut state, &[(*block).into()]);
    }
    state
}

fn state_bits(state: &[u32; 8]) -> Vec<bool> {
    state
        .iter()
        .flat_map(|w| (0..32).rev().map(move |i| (w >> i) & 1 == 1))
        .collect()
}

/// The public inputs (the final state, packed into field elements).
pub fn public_inputs(message: &[Block]) -> Vec<Scalar> {
    multipack::compute_multipacking(&state_bits(&native_state(message)))
}

/// Constraints of the circuit with `blocks` blocks (counted once, cached).
fn constraints_for(blocks: usize) -> usize {
    // The first block compresses a constant IV and needs fewer constraints
    // than the ones after it, which all cost the same.
    static COUNTS: OnceLock<(usize, usize)> = OnceLock::new();
    let (first, per_block) = *COUNTS.get_or_init(|| {
        let count = |blocks| {
            super::count_constraints(Sha256Circuit {
                blocks,
                message: None,
            })
        };
        let (one, two) = (count(1), count(2));
        (one, two - one)
    });
    first + blocks.saturating_sub(1) * per_block
}

impl Sha256Circuit {
    /// The most blocks whose circuit (with one constraint per public input)
    /// fits a domain of 2^log_size; at least one.
    pub fn blocks_for(log_size: u32) -> usize {
        let domain = 1usize << log_size;
        let mut blocks = 1;
        while constraints_for(blocks + 1) <= domain {
            blocks += 1;
        }
        blocks
    }

    /// The smallest log size that holds one block.
    pub fn min_log_size() -> u32 {
        constraints_for(1).next_power_of_two().trailing_zeros()
    }

    pub fn blank(log_size: u32) -> Self {
        Self {
            blocks: Self::blocks_for(log_size),
            message: None,
        }
    }

    pub fn new(log_size: u32, message: Vec<Block>) -> Self {
        assert_eq!(message.len(), Self::blocks_for(log_size));
        Self {
            blocks: message.len(),
            message: Some(message),
        }
    }
}

impl Circuit<Scalar> for Sha256Circuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut state: Vec<UInt32> = IV.iter().map(|&w| UInt32::constant(w)).collect();
        for b in 0..self.blocks {
            let bytes = self.message.as_ref().map(|m| m[b]);
            let bits = (0..512)
                .map(|i| {
                    let value = bytes.map(|m| (m[i / 8] >> (7 - i % 8)) & 1 == 1);
                    AllocatedBit::alloc(cs.namespace(|| format!("block {b} bit {i}")), value)
                        .map(Boolean::from)
                })
                .collect::<Result<Vec<_>, _>>()?;
            state = sha256_compression_function(
                cs.namespace(|| format!("compress {b}")),
                &bits,
                &state,
            )?;
        }
        let out: Vec<Boolean> = state.into_iter().flat_map(UInt32::into_bits_be).collect();
        multipack::pack_into_inputs(cs.namespace(|| "state"), &out)
    }
}
