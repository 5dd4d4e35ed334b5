//! The `sha256` workload's witness computed natively: the assignment
//! bellperson's SHA-256 gadget allocates, variable for variable, without
//! building one linear combination.
//!
//! Which variables the gadget allocates depends only on which bits are
//! constants (the IV, the round constants, shifted-in zeros), never on the
//! message, so the gadget's decisions are mirrored here on bits that carry
//! their value and their kind (constant, a variable, or its negation).
//! Every allocation and every enforced constraint is reported to the
//! [`WitnessSink`] in the gadget's order, so a witness-only constraint
//! system sees the same sequence of operations (and fingerprint) as when
//! the gadget runs. The engine still checks the result against the
//! circuit's recorded constraints (counts, fingerprint, a·b = c).
//!
//! [`sha256`] is bellperson's `gadgets::sha256::sha256` over any message of
//! such bits, for circuits that hash inside a larger one (Filecoin's PoRep
//! labels).

use bellperson::SynthesisError;
use bellperson::gadgets::multipack;
use blstrs::Scalar;
use ff::{Field, PrimeField};

use crate::WitnessSink;
use crate::sha256::{IV, Sha256Circuit};

const ROUND_CONSTANTS: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// A gadget bit, as bellperson's `Boolean`: a constant, or a variable
/// holding `u` (`Is(u)`), or that variable's negation (`Not(u)`, of value
/// `!u`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bit {
    Const(bool),
    Is(bool),
    Not(bool),
}

impl Bit {
    /// The bit's value.
    pub fn value(self) -> bool {
        match self {
            Bit::Const(b) | Bit::Is(b) => b,
            Bit::Not(u) => !u,
        }
    }

    fn not(self) -> Bit {
        match self {
            Bit::Const(b) => Bit::Const(!b),
            Bit::Is(u) => Bit::Not(u),
            Bit::Not(u) => Bit::Is(u),
        }
    }
}

/// The gadgets' operations, reporting allocations and constraints.
struct Gadgets<'s, S> {
    sink: &'s mut S,
    /// Bits folded into the current `MultiEq` constraint.
    multieq_bits: usize,
}

impl<S: WitnessSink> Gadgets<'_, S> {
    /// A new variable of boolean value `v` and the constraint that defines it.
    fn alloc_bit(&mut self, v: bool) -> Result<bool, SynthesisError> {
        self.sink.aux(if v { Scalar::ONE } else { Scalar::ZERO })?;
        self.sink.constraint();
        Ok(v)
    }

    /// `Boolean::xor`.
    fn xor(&mut self, a: Bit, b: Bit) -> Result<Bit, SynthesisError> {
        Ok(match (a, b) {
            (Bit::Const(false), x) | (x, Bit::Const(false)) => x,
            (Bit::Const(true), x) | (x, Bit::Const(true)) => x.not(),
            (Bit::Is(u), Bit::Not(w)) | (Bit::Not(u), Bit::Is(w)) => {
                Bit::Not(self.alloc_bit(u ^ w)?)
            }
            (Bit::Is(u), Bit::Is(w)) | (Bit::Not(u), Bit::Not(w)) => {
                Bit::Is(self.alloc_bit(u ^ w)?)
            }
        })
    }

    /// `Boolean::and`.
    fn and(&mut self, a: Bit, b: Bit) -> Result<Bit, SynthesisError> {
        Ok(match (a, b) {
            (Bit::Const(false), _) | (_, Bit::Const(false)) => Bit::Const(false),
            (Bit::Const(true), x) | (x, Bit::Const(true)) => x,
            _ => Bit::Is(self.alloc_bit(a.value() & b.value())?),
        })
    }

    /// `Boolean::sha256_ch`: (a and b) xor ((not a) and c).
    fn ch(&mut self, a: Bit, b: Bit, c: Bit) -> Result<Bit, SynthesisError> {
        let v = (a.value() & b.value()) ^ (!a.value() & c.value());
        match (a, b, c) {
            (Bit::Const(_), Bit::Const(_), Bit::Const(_)) => Ok(Bit::Const(v)),
            (Bit::Const(false), _, c) => Ok(c),
            (a, Bit::Const(false), c) => self.and(a.not(), c),
            (a, b, Bit::Const(false)) => self.and(a, b),
            (a, b, Bit::Const(true)) => Ok(self.and(a, b.not())?.not()),
            (a, Bit::Const(true), c) => Ok(self.and(a.not(), c.not())?.not()),
            _ => Ok(Bit::Is(self.alloc_bit(v)?)),
        }
    }

    /// `Boolean::sha256_maj`: (a and b) xor (a and c) xor (b and c).
    fn maj(&mut self, a: Bit, b: Bit, c: Bit) -> Result<Bit, SynthesisError> {
        let (x, y, z) = (a.value(), b.value(), c.value());
        let v = (x & y) ^ (x & z) ^ (y & z);
        match (a, b, c) {
            (Bit::Const(_), Bit::Const(_), Bit::Const(_)) => Ok(Bit::Const(v)),
            (Bit::Const(false), b, c) => self.and(b, c),
            (a, Bit::Const(false), c) => self.and(a, c),
            (a, b, Bit::Const(false)) => self.and(a, b),
            (a, b, Bit::Const(true)) => Ok(self.and(a.not(), b.not())?.not()),
            (a, Bit::Const(true), c) => Ok(self.and(a.not(), c.not())?.not()),
            (Bit::Const(true), b, c) => Ok(self.and(b.not(), c.not())?.not()),
            _ => {
                // The gadget allocates maj, then b and c (with its
                // constraint), then enforces maj.
                self.sink.aux(if v { Scalar::ONE } else { Scalar::ZERO })?;
                self.and(b, c)?;
                self.sink.constraint();
                Ok(Bit::Is(v))
            }
        }
    }

    /// `UInt32::xor`.
    fn xor32(&mut self, a: &Word, b: &Word) -> Result<Word, SynthesisError> {
        let mut out = [Bit::Const(false); 32];
        for i in 0..32 {
            out[i] = self.xor(a[i], b[i])?;
        }
        Ok(out)
    }

    /// The three-way xor of rotations (and a shift) SHA-256's sigmas make.
    fn sigma(&mut self, x: &Word, r1: usize, r2: usize, r3: Shift) -> Result<Word, SynthesisError> {
        let s = self.xor32(&rotr(x, r1), &rotr(x, r2))?;
        let third = match r3 {
            Shift::Rotate(r) => rotr(x, r),
            Shift::Right(r) => shr(x, r),
        };
        self.xor32(&s, &third)
    }

    /// `UInt32::sha256_ch` and `UInt32::sha256_maj`, bit by bit.
    fn triop(
        &mut self,
        a: &Word,
        b: &Word,
        c: &Word,
        op: fn(&mut Self, Bit, Bit, Bit) -> Result<Bit, SynthesisError>,
    ) -> Result<Word, SynthesisError> {
        let mut out = [Bit::Const(false); 32];
        for i in 0..32 {
            out[i] = op(self, a[i], b[i], c[i])?;
        }
        Ok(out)
    }

    /// `UInt32::addmany` under a `MultiEq`: the sum's bits (all of them,
    /// carries included, are allocated), its equality folded into the
    /// running `MultiEq` constraint, which is enforced when full.
    fn addmany(&mut self, operands: &[Word]) -> Result<Word, SynthesisError> {
        debug_assert!((2..=10).contains(&operands.len()));
        let sum: u64 = operands.iter().map(|w| u64::from(value(w))).sum();
        if operands
            .iter()
            .all(|w| w.iter().all(|b| matches!(b, Bit::Const(_))))
        {
            return Ok(constant(sum as u32));
        }
        let bits = 64 - (operands.len() as u64 * u64::from(u32::MAX)).leading_zeros() as usize;
        let mut out = [Bit::Const(false); 32];
        for (i, bit) in out.iter_mut().enumerate() {
            *bit = Bit::Is(self.alloc_bit((sum >> i) & 1 == 1)?);
        }
        // The carries are allocated too, then dropped.
        for i in 32..bits {
            self.alloc_bit((sum >> i) & 1 == 1)?;
        }
        if Scalar::CAPACITY as usize <= self.multieq_bits + bits {
            self.flush_multieq();
        }
        self.multieq_bits += bits;
        Ok(out)
    }

    /// Enforces the `MultiEq` constraint gathered so far, if any.
    fn flush_multieq(&mut self) {
        if self.multieq_bits > 0 {
            self.sink.constraint();
            self.multieq_bits = 0;
        }
    }

    /// `sha256_compression_function` (its `MultiEq` enforced at the end).
    fn compress(
        &mut self,
        input: &[Bit; 512],
        current: &[Word; 8],
    ) -> Result<[Word; 8], SynthesisError> {
        let mut w: Vec<Word> = input
            .chunks(32)
            .map(|c| {
                let mut word = [Bit::Const(false); 32];
                for (i, b) in c.iter().rev().enumerate() {
                    word[i] = *b;
                }
                word
            })
            .collect();
        for i in 16..64 {
            let s0 = self.sigma(&w[i - 15], 7, 18, Shift::Right(3))?;
            let s1 = self.sigma(&w[i - 2], 17, 19, Shift::Right(10))?;
            let wi = self.addmany(&[w[i - 16], s0, w[i - 7], s1])?;
            w.push(wi);
        }

        // a and e are sums not yet added up (the gadget's `Maybe`).
        let [a0, b0, c0, d0, e0, f0, g0, h0] = *current;
        let (mut a, mut e) = (vec![a0], vec![e0]);
        let (mut b, mut c, mut d, mut f, mut g, mut h) = (b0, c0, d0, f0, g0, h0);
        for (i, wi) in w.iter().enumerate() {
            let new_e = self.sum(&e, &[])?;
            let s1 = self.sigma(&new_e, 6, 11, Shift::Rotate(25))?;
            let ch = self.triop(&new_e, &f, &g, Self::ch)?;
            let temp1 = [h, s1, ch, constant(ROUND_CONSTANTS[i]), *wi];
            let new_a = self.sum(&a, &[])?;
            let s0 = self.sigma(&new_a, 2, 13, Shift::Rotate(22))?;
            let maj = self.triop(&new_a, &b, &c, Self::maj)?;
            h = g;
            g = f;
            f = new_e;
            e = temp1.iter().copied().chain([d]).collect();
            d = c;
            c = b;
            b = new_a;
            a = temp1.iter().copied().chain([s0, maj]).collect();
        }
        let out = [
            self.sum(&a, &[a0])?,
            self.addmany(&[b0, b])?,
            self.addmany(&[c0, c])?,
            self.addmany(&[d0, d])?,
            self.sum(&e, &[e0])?,
            self.addmany(&[f0, f])?,
            self.addmany(&[g0, g])?,
            self.addmany(&[h0, h])?,
        ];
        self.flush_multieq();
        Ok(out)
    }

    /// `Maybe::compute`: a lone word as it is, else the sum of the terms
    /// and `more`.
    fn sum(&mut self, terms: &[Word], more: &[Word]) -> Result<Word, SynthesisError> {
        if terms.len() == 1 && more.is_empty() {
            return Ok(terms[0]);
        }
        let all: Vec<Word> = terms.iter().chain(more).copied().collect();
        self.addmany(&all)
    }
}

/// Thirty-two bits, least significant first (`UInt32`'s order).
type Word = [Bit; 32];

enum Shift {
    Rotate(usize),
    Right(usize),
}

fn constant(v: u32) -> Word {
    std::array::from_fn(|i| Bit::Const((v >> i) & 1 == 1))
}

fn value(w: &Word) -> u32 {
    w.iter()
        .enumerate()
        .fold(0, |acc, (i, b)| acc | (u32::from(b.value()) << i))
}

fn rotr(x: &Word, by: usize) -> Word {
    std::array::from_fn(|i| x[(i + by) % 32])
}

fn shr(x: &Word, by: usize) -> Word {
    std::array::from_fn(|i| {
        if i + by < 32 {
            x[i + by]
        } else {
            Bit::Const(false)
        }
    })
}

/// bellperson's `gadgets::sha256::sha256` over `input` (whole bytes, most
/// significant bit first), computed natively: every allocation and
/// constraint the gadget makes is reported to `sink` in its order. Returns
/// the digest (the gadget's output bits, as bytes).
pub fn sha256<S: WitnessSink>(sink: &mut S, input: &[Bit]) -> Result<[u8; 32], SynthesisError> {
    assert!(input.len().is_multiple_of(8), "SHA-256 hashes whole bytes");
    // The gadget's padding: a one, zeros, the length in bits (constants).
    let len = input.len() as u64;
    let mut padded = input.to_vec();
    padded.push(Bit::Const(true));
    while !(padded.len() + 64).is_multiple_of(512) {
        padded.push(Bit::Const(false));
    }
    padded.extend((0..64).rev().map(|i| Bit::Const((len >> i) & 1 == 1)));
    let mut g = Gadgets {
        sink,
        multieq_bits: 0,
    };
    let mut state: [Word; 8] = IV.map(constant);
    for block in padded.chunks(512) {
        let block: &[Bit; 512] = block.try_into().expect("padded to whole blocks");
        state = g.compress(block, &state)?;
    }
    let mut digest = [0u8; 32];
    for (out, word) in digest.chunks_mut(4).zip(&state) {
        out.copy_from_slice(&value(word).to_be_bytes());
    }
    Ok(digest)
}

impl Sha256Circuit {
    /// The witness [`Sha256Circuit`]'s synthesis allocates, computed
    /// natively into `sink` (see the module documentation). Errors like
    /// synthesis without a witness when the message is missing.
    pub fn witness<S: WitnessSink>(&self, sink: &mut S) -> Result<(), SynthesisError> {
        let message = self
            .message
            .as_ref()
            .ok_or(SynthesisError::AssignmentMissing)?;
        if message.len() != self.blocks {
            return Err(SynthesisError::AssignmentMissing);
        }
        let mut g = Gadgets {
            sink,
            multieq_bits: 0,
        };
        let mut state: [Word; 8] = IV.map(constant);
        for block in message {
            let mut bits = [Bit::Const(false); 512];
            for (i, bit) in bits.iter_mut().enumerate() {
                *bit = Bit::Is(g.alloc_bit((block[i / 8] >> (7 - i % 8)) & 1 == 1)?);
            }
            state = g.compress(&bits, &state)?;
        }
        let out: Vec<bool> = state
            .iter()
            .flat_map(|w| w.iter().rev().map(|b| b.value()))
            .collect();
        for input in multipack::compute_multipacking::<Scalar>(&out) {
            g.sink.input(input)?;
            g.sink.constraint();
        }
        Ok(())
    }
}
