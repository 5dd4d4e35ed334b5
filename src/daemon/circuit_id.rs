//! Curio's circuit ids (`porep-32g`, `wpost-2k`, `winning-32g`, `snap-512m`):
//! a proof kind and a sector size, naming one parameter file.

use cuzk_filecoin::ProofKind;

/// The kind prefixes curio uses, and ours.
const KINDS: [(&str, ProofKind); 4] = [
    ("porep", ProofKind::Porep),
    ("wpost", ProofKind::WindowPost),
    ("winning", ProofKind::WinningPost),
    ("snap", ProofKind::Snap),
];

/// Curio's suffix of a sector size name: `32GiB` is `32g`.
fn suffix(name: &str) -> String {
    name.trim_end_matches("iB").to_ascii_lowercase()
}

/// Sector sizes by curio's suffix (the sizes cuzk knows).
fn sizes() -> impl Iterator<Item = (String, u64)> {
    cuzk_filecoin::ids::SECTOR_SIZES
        .iter()
        .map(|&(name, bytes)| (suffix(name), bytes))
}

/// A kind at a sector size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CircuitId {
    pub kind: ProofKind,
    pub sector_size: u64,
}

impl CircuitId {
    /// Parses `porep-32g` and the like; the error lists the accepted forms.
    pub fn parse(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "circuit_id `{s}` is not KIND-SIZE with KIND one of {} and SIZE one of {} (e.g. porep-32g), nor a parameter file path",
                KINDS.map(|k| k.0).join(", "),
                sizes().map(|k| k.0).collect::<Vec<_>>().join(", ")
            )
        };
        let (kind, size) = s.trim().rsplit_once('-').ok_or_else(bad)?;
        let kind = KINDS
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(kind))
            .ok_or_else(bad)?
            .1;
        let sector_size = sizes()
            .find(|(k, _)| k.eq_ignore_ascii_case(size))
            .ok_or_else(bad)?
            .1;
        Ok(Self { kind, sector_size })
    }
}

impl std::fmt::Display for CircuitId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = KINDS
            .iter()
            .find(|(_, k)| *k == self.kind)
            .expect("every kind")
            .0;
        match sizes().find(|(_, b)| *b == self.sector_size) {
            Some((size, _)) => write!(f, "{kind}-{size}"),
            None => write!(f, "{kind}-{}", self.sector_size),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curio_ids_round_trip() {
        for id in ["porep-32g", "wpost-2k", "winning-64g", "snap-512m"] {
            assert_eq!(CircuitId::parse(id).unwrap().to_string(), id);
        }
        let p = CircuitId::parse("porep-2k").unwrap();
        assert_eq!((p.kind, p.sector_size), (ProofKind::Porep, 2048));
        assert!(
            CircuitId::parse("porep-3k")
                .unwrap_err()
                .contains("porep-32g")
        );
        assert!(CircuitId::parse("seal").is_err());
    }
}
