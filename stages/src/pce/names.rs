//! The gadget path of one aux variable: where in a circuit's gadgets the
//! variable a witness got wrong is allocated (`cuzk fil synth` names the
//! first variable where a native witness and the gadgets' differ).

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;

/// Full synthesis that keeps nothing but the namespaces it is in, until it
/// reaches aux variable `target`; values are computed (gadgets read them
/// back), constraints skipped.
struct AuxNamer {
    target: usize,
    n_aux: usize,
    path: Vec<String>,
    found: Option<String>,
}

impl ConstraintSystem<Scalar> for AuxNamer {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, annotation: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        f()?;
        if self.n_aux == self.target && self.found.is_none() {
            let mut path = self.path.join("/");
            if !path.is_empty() {
                path.push('/');
            }
            path.push_str(&annotation().into());
            self.found = Some(path);
        }
        self.n_aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.n_aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        f()?;
        Ok(Variable::new_unchecked(Index::Input(0)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
    }

    fn push_namespace<NR, N>(&mut self, name: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
        // Names are only made while the target is ahead.
        let name = match self.found {
            None => name().into(),
            Some(_) => String::new(),
        };
        self.path.push(name);
    }

    fn pop_namespace(&mut self) {
        self.path.pop();
    }

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

/// The gadget path (namespaces, then the allocation's annotation, joined by
/// `/`) of aux variable `index` as `circuit`'s full synthesis allocates it;
/// `None` if it allocates fewer.
pub fn aux_name<C: Circuit<Scalar>>(
    circuit: C,
    index: usize,
) -> Result<Option<String>, SynthesisError> {
    let mut cs = AuxNamer {
        target: index,
        n_aux: 0,
        path: Vec::new(),
        found: None,
    };
    circuit.synthesize(&mut cs)?;
    Ok(cs.found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellperson::gadgets::num::AllocatedNum;

    #[derive(Clone)]
    struct Nested;

    impl Circuit<Scalar> for Nested {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), SynthesisError> {
            let x = AllocatedNum::alloc(cs.namespace(|| "outer"), || Ok(Scalar::from(3)))?;
            let mut inner = cs.namespace(|| "gadget");
            let y = AllocatedNum::alloc(inner.namespace(|| "step 1"), || Ok(Scalar::from(4)))?;
            // Reads both values back: names are found with values flowing.
            x.mul(inner.namespace(|| "product"), &y)?;
            Ok(())
        }
    }

    #[test]
    fn names_each_aux_variable_by_its_gadget_path() {
        let name = |i| aux_name(Nested, i).unwrap();
        assert_eq!(name(0).as_deref(), Some("outer/num"));
        assert_eq!(name(1).as_deref(), Some("gadget/step 1/num"));
        assert_eq!(name(2).as_deref(), Some("gadget/product/product num"));
        assert_eq!(name(3), None, "three aux variables");
    }
}
