//! The built kernels carry exactly the targets they claim (`ARCHS`): machine
//! code for each `sm_XY` and PTX for each `compute_XY`, as cuobjdump lists
//! them in the static library the binaries link.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// cuobjdump: `CUOBJDUMP`, beside nvcc in CUDA_HOME/CUDA_PATH, on PATH, or
/// the project's install (`scripts/setup.sh`).
fn cuobjdump() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CUOBJDUMP") {
        return Some(p.into());
    }
    let homes = ["CUDA_HOME", "CUDA_PATH"]
        .into_iter()
        .filter_map(std::env::var_os)
        .map(|h| PathBuf::from(h).join("bin"));
    let path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    let ours = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cuda/nvidia/cu13/bin");
    homes
        .chain(path)
        .chain([ours])
        .map(|d| d.join("cuobjdump"))
        .find(|p| p.is_file())
}

/// The `.sm_XY.` names in one cuobjdump listing, as `sm_XY`.
fn listed(tool: &Path, flag: &str, lib: &Path) -> BTreeSet<String> {
    let out = Command::new(tool)
        .arg(flag)
        .arg(lib)
        .output()
        .expect("cuobjdump runs");
    assert!(
        out.status.success(),
        "cuobjdump {flag}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let at = l.find(".sm_")? + 1;
            Some(l[at..].split('.').next()?.to_string())
        })
        .collect()
}

#[test]
fn the_kernels_carry_machine_code_and_ptx_for_every_target_they_name() {
    if !cuzk_kernels::built() {
        eprintln!("skipping: this build carries no kernels (no nvcc at build time)");
        return;
    }
    let tool = cuobjdump().expect(
        "the kernels were built, so cuobjdump must be installed to check them: run scripts/setup.sh or set CUOBJDUMP",
    );
    let lib = Path::new(env!("OUT_DIR")).join("libcuzk_kernels.a");
    let (mut sass, mut ptx) = (BTreeSet::new(), BTreeSet::new());
    for target in cuzk_kernels::ARCHS.split(',') {
        match target.strip_prefix("compute_") {
            Some(a) => ptx.insert(format!("sm_{a}")),
            None => sass.insert(target.to_string()),
        };
    }
    // cuobjdump names PTX by the architecture too (`*.sm_120.ptx`).
    assert_eq!(
        listed(&tool, "--list-elf", &lib),
        sass,
        "machine code in {}",
        lib.display()
    );
    assert_eq!(
        listed(&tool, "--list-ptx", &lib),
        ptx,
        "PTX in {}",
        lib.display()
    );
    eprintln!("kernels carry {}", cuzk_kernels::ARCHS);
}
