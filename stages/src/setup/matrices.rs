//! A circuit's constraint matrices, recorded without a witness.
//!
//! The same compact rows the pre-compiled constraints keep (`pce::matrix`),
//! recorded from a blank circuit: no value is ever asked for.

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;

use super::SetupError;
use crate::pce::matrix::{Builder, Codes, Csr};
use crate::pce::{Fingerprint, Parts};

/// A and B and C of a circuit, columns in the assignment's layout (inputs,
/// then aux), with Groth16's input rows (`x_i · 0 = 0`, one per public
/// input, the constant one included) after the circuit's own.
pub struct Matrices {
    builder: Builder,
    /// Public inputs, the constant one included.
    pub n_inputs: usize,
    pub n_aux: usize,
    /// Rows, the input rows included.
    pub rows: usize,
}

impl Matrices {
    /// Records `circuit`'s constraints. Fails as the circuit's synthesis
    /// fails, or if a matrix outgrows the recording's 32-bit row pointers.
    pub fn record<C: Circuit<Scalar>>(circuit: C) -> Result<Self, SetupError> {
        Self::record_with(|cs| circuit.synthesize(cs))
    }

    /// Records what `synthesize` enforces on the system it is given (the
    /// constant one allocated): a circuit's own synthesis, or one that runs
    /// its independent parts in parallel ([`MatrixCs::record_parts`]).
    pub fn record_with(
        synthesize: impl FnOnce(&mut MatrixCs) -> Result<(), SynthesisError>,
    ) -> Result<Self, SetupError> {
        let mut cs = MatrixCs::root();
        synthesize(&mut cs)?;
        let MatrixCs {
            mut builder,
            n_inputs,
            n_aux,
            mut rows,
            ..
        } = cs;
        // As bellperson's generator: every input in A once more, so the IC
        // query is fully dense.
        let none = LinearCombination::zero();
        for i in 0..n_inputs {
            let x = LinearCombination::zero() + Variable::new_unchecked(Index::Input(i));
            builder.push_row(0, &x);
            builder.push_row(1, &none);
            builder.push_row(2, &none);
            rows += 1;
        }
        let too_large = |b: &Builder| {
            b.overflowed().then(|| SetupError::TooLarge {
                rows,
                terms: b.mats.iter().map(|m| m.cols.len()).max().unwrap_or(0),
            })
        };
        if let Some(e) = too_large(&builder) {
            return Err(e);
        }
        builder.finalize(n_inputs);
        if let Some(e) = too_large(&builder) {
            return Err(e);
        }
        Ok(Self {
            builder,
            n_inputs,
            n_aux,
            rows,
        })
    }

    /// Variables: inputs and aux.
    pub fn vars(&self) -> usize {
        self.n_inputs + self.n_aux
    }

    /// Matrix `m` (0 = A, 1 = B, 2 = C).
    pub fn matrix(&self, m: usize) -> Csr<'_> {
        let mat = &self.builder.mats[m];
        Csr {
            row_ptr: &mat.row_ptr,
            cols: &mat.cols,
            codes: Codes::Wide(&mat.codes),
        }
    }

    /// The coefficients that codes at or above `matrix::TABLE` index.
    pub fn table(&self) -> &[Scalar] {
        &self.builder.table
    }
}

/// Records rows; never evaluates a value. A part of a circuit recorded on
/// its own numbers its variables from the bases the parts before it end at.
pub struct MatrixCs {
    builder: Builder,
    /// Where this system's inputs and aux variables are numbered from.
    inputs_base: usize,
    aux_base: usize,
    n_inputs: usize,
    n_aux: usize,
    rows: usize,
    /// The sequence of allocations and constraints, as the prover's
    /// recording fingerprints it.
    fingerprint: Fingerprint,
    /// Counts only (a part's sizes, learned before the parts are placed).
    counting: bool,
}

impl MatrixCs {
    /// A whole circuit's system: the constant one allocated.
    pub fn root() -> Self {
        let mut cs = Self::part(0, 0, false);
        cs.n_inputs = 1;
        cs.fingerprint.alloc_input();
        cs
    }

    fn part(inputs_base: usize, aux_base: usize, counting: bool) -> Self {
        Self {
            builder: Builder::default(),
            inputs_base,
            aux_base,
            n_inputs: 0,
            n_aux: 0,
            rows: 0,
            fingerprint: Fingerprint::default(),
            counting,
        }
    }

    /// What was recorded: the rows (as enforced: no input rows, not
    /// finalized), inputs (the one included), aux variables, constraints
    /// and the fingerprint.
    pub(crate) fn into_recorded(self) -> (Builder, usize, usize, usize, Fingerprint) {
        (
            self.builder,
            self.n_inputs,
            self.n_aux,
            self.rows,
            self.fingerprint,
        )
    }

    /// Records `items` by `parts` in parallel, as if synthesized here one
    /// after another: one item's parts are counted first (in parallel), so
    /// every part of every item knows where its variables are numbered from
    /// before any runs, and a part may use variables of the parts before it
    /// (a challenge's labels use its parents' columns). Items run in batches
    /// ([`ITEMS_PER_BATCH`]) whose parts are appended in order before the
    /// next batch runs, so the parts held at once are a batch's. An item
    /// whose parts allocate other than the first item's did fails the
    /// recording.
    pub fn record_parts<T: Parts>(
        &mut self,
        parts: &T,
        items: &[T::Item],
    ) -> Result<(), SynthesisError> {
        let Some(first) = items.first() else {
            return Ok(());
        };
        let per = parts.per_item();
        let mut counted: Vec<MatrixCs> = (0..per).map(|_| Self::part(0, 0, true)).collect();
        parts.run(std::slice::from_ref(first), &mut counted)?;
        let sizes: Vec<(usize, usize)> = counted.iter().map(|p| (p.n_inputs, p.n_aux)).collect();
        for (b, batch) in items.chunks(ITEMS_PER_BATCH).enumerate() {
            let (mut inputs, mut aux) =
                (self.inputs_base + self.n_inputs, self.aux_base + self.n_aux);
            let mut placed = Vec::with_capacity(per * batch.len());
            for _ in batch {
                for &(n_inputs, n_aux) in &sizes {
                    placed.push(Self::part(inputs, aux, self.counting));
                    inputs += n_inputs;
                    aux += n_aux;
                }
            }
            parts.run(batch, &mut placed)?;
            if b == 0 {
                // Room for every item at once, from the first batch's (items
                // are alike): growing by doubling instead would hold up to
                // twice the matrices (~8 GB at 32 GiB) for a moment.
                let scale = |n: usize| n / batch.len() * items.len() + n / 64;
                for m in 0..3 {
                    let (terms, rows) = placed.iter().fold((0, 0), |(t, r), p| {
                        let mat = &p.builder.mats[m];
                        (t + mat.cols.len(), r + mat.row_ptr.len() - 1)
                    });
                    let mine = &mut self.builder.mats[m];
                    mine.cols.reserve(scale(terms));
                    mine.codes.reserve(scale(terms));
                    mine.row_ptr.reserve(scale(rows));
                }
            }
            for (k, (part, &(n_inputs, n_aux))) in
                placed.into_iter().zip(sizes.iter().cycle()).enumerate()
            {
                if (part.n_inputs, part.n_aux) != (n_inputs, n_aux) {
                    return Err(SynthesisError::IoError(std::io::Error::other(format!(
                        "recording in parts: part {} of item {} allocated {} inputs and {} aux \
                         variables, the first item's {n_inputs} and {n_aux}",
                        k % per,
                        b * ITEMS_PER_BATCH + k / per,
                        part.n_inputs,
                        part.n_aux,
                    ))));
                }
                self.builder.append(part.builder);
                self.fingerprint = self.fingerprint.then(part.fingerprint);
                self.n_inputs += n_inputs;
                self.n_aux += n_aux;
                self.rows += part.rows;
            }
        }
        Ok(())
    }
}

/// Items [`MatrixCs::record_parts`] runs at once: a 32 GiB PoRep
/// partition's 18 challenges go in five batches of up to 56 parts (14 a
/// challenge) for 16 cores, holding ~2 GB of parts rather than the ~8 GB
/// of all of them.
pub const ITEMS_PER_BATCH: usize = 4;

impl ConstraintSystem<Scalar> for MatrixCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.n_aux += 1;
        self.fingerprint.alloc();
        Ok(Variable::new_unchecked(Index::Aux(
            self.aux_base + self.n_aux - 1,
        )))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.n_inputs += 1;
        self.fingerprint.alloc_input();
        Ok(Variable::new_unchecked(Index::Input(
            self.inputs_base + self.n_inputs - 1,
        )))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.rows += 1;
        self.fingerprint.enforce();
        if self.counting {
            return;
        }
        self.builder.push_row(0, &a(LinearCombination::zero()));
        self.builder.push_row(1, &b(LinearCombination::zero()));
        self.builder.push_row(2, &c(LinearCombination::zero()));
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }

    fn is_extensible() -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellperson::gadgets::num::AllocatedNum;
    use rayon::prelude::*;

    fn prelude<CS: ConstraintSystem<Scalar>>(
        cs: &mut CS,
    ) -> Result<AllocatedNum<Scalar>, SynthesisError> {
        let s = AllocatedNum::alloc(cs.namespace(|| "shared"), || Ok(Scalar::from(7u64)))?;
        s.inputize(cs.namespace(|| "shared input"))?;
        Ok(s)
    }

    /// An item's first part: a product with the prelude's variable.
    fn first<CS: ConstraintSystem<Scalar>>(
        mut cs: CS,
        shared: &AllocatedNum<Scalar>,
        item: u64,
    ) -> Result<AllocatedNum<Scalar>, SynthesisError> {
        let x = AllocatedNum::alloc(cs.namespace(|| "x"), || Ok(Scalar::from(item)))?;
        x.mul(cs.namespace(|| "x·shared"), shared)
    }

    /// Its second part, on the first's result: squares, an input, and a
    /// coefficient from the table.
    fn second<CS: ConstraintSystem<Scalar>>(
        mut cs: CS,
        y: &AllocatedNum<Scalar>,
        item: u64,
        rounds: usize,
    ) -> Result<(), SynthesisError> {
        let mut acc = y.clone();
        for i in 0..rounds {
            acc = acc.square(cs.namespace(|| format!("square {i}")))?;
        }
        acc.inputize(cs.namespace(|| "out"))?;
        let k = Scalar::from(item + 3);
        cs.enforce(
            || "scaled",
            |lc| lc + (k, acc.get_variable()),
            |lc| lc + CS::one(),
            |lc| lc + (k, acc.get_variable()),
        );
        Ok(())
    }

    /// Items of two parts each; item `odd` squares once more than the others.
    struct Squares<'a> {
        shared: &'a AllocatedNum<Scalar>,
        odd: Option<u64>,
    }

    impl Squares<'_> {
        fn rounds(&self, item: u64) -> usize {
            if self.odd == Some(item) { 4 } else { 3 }
        }
    }

    impl Parts for Squares<'_> {
        type Item = u64;
        fn per_item(&self) -> usize {
            2
        }
        fn run<P: ConstraintSystem<Scalar> + Send>(
            &self,
            items: &[u64],
            parts: &mut [P],
        ) -> Result<(), SynthesisError> {
            parts
                .par_chunks_mut(2)
                .zip(items)
                .try_for_each(|(p, &item)| {
                    let [a, b] = p else {
                        return Err(SynthesisError::Unsatisfiable);
                    };
                    let y = first(&mut *a, self.shared, item)?;
                    second(&mut *b, &y, item, self.rounds(item))
                })
        }
    }

    #[test]
    fn parts_recorded_in_parallel_equal_one_synthesis() {
        let items: Vec<u64> = (0..9).collect();
        let serial = Matrices::record_with(|cs| {
            let s = prelude(cs)?;
            for &i in &items {
                let y = first(&mut *cs, &s, i)?;
                second(&mut *cs, &y, i, 3)?;
            }
            Ok(())
        })
        .unwrap();
        let parallel = Matrices::record_with(|cs| {
            let s = prelude(cs)?;
            let parts = Squares {
                shared: &s,
                odd: None,
            };
            cs.record_parts(&parts, &items)
        })
        .unwrap();
        assert_eq!(
            (parallel.n_inputs, parallel.n_aux, parallel.rows),
            (serial.n_inputs, serial.n_aux, serial.rows)
        );
        assert_eq!(parallel.table(), serial.table());
        for m in 0..3 {
            let (p, s) = (parallel.matrix(m), serial.matrix(m));
            assert_eq!(p.row_ptr, s.row_ptr, "matrix {m}'s rows");
            assert_eq!(p.cols, s.cols, "matrix {m}'s columns");
            for t in 0..s.nnz() {
                assert_eq!(p.codes.get(t), s.codes.get(t), "matrix {m}'s code {t}");
            }
        }
    }

    #[test]
    fn an_item_whose_parts_differ_from_the_first_fails_the_recording() {
        let result = Matrices::record_with(|cs| {
            let s = prelude(cs)?;
            let parts = Squares {
                shared: &s,
                odd: Some(5),
            };
            cs.record_parts(&parts, &(0..9).collect::<Vec<u64>>())
        });
        let message = result.err().expect("a failed recording").to_string();
        assert!(
            message.contains(
                "part 1 of item 5 allocated 1 inputs and 4 aux variables, the first item's 1 and 3"
            ),
            "{message}"
        );
    }
}
