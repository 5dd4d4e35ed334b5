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

/// Sector sizes by curio's suffix.
const SIZES: [(&str, u64); 8] = [
    ("2k", 2 << 10),
    ("4k", 4 << 10),
    ("16k", 16 << 10),
    ("32k", 32 << 10),
    ("8m", 8 << 20),
    ("512m", 512 << 20),
    ("32g", 32 << 30),
    ("64g", 64 << 30),
];

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
                SIZES.map(|k| k.0).join(", ")
            )
        };
        let (kind, size) = s.trim().rsplit_once('-').ok_or_else(bad)?;
        let kind = KINDS
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(kind))
            .ok_or_else(bad)?
            .1;
        let sector_size = SIZES
            .iter()
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
        match SIZES.iter().find(|(_, b)| *b == self.sector_size) {
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
