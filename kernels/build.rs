//! Compiles cuzk's CUDA kernels with nvcc for sm_90 (H100/H200) when nvcc is
//! found, embedding them in the binary; otherwise builds the crate without
//! kernels and says so (the engine then runs on the CPU backend).
//!
//! nvcc is looked up through NVCC, CUDA_HOME, CUDA_PATH, PATH, and finally
//! the project's own install (`scripts/setup.sh` puts one in `.cuda/`).

use std::env;
use std::path::{Path, PathBuf};

const SOURCES: [&str; 6] = [
    "cuda/memory.cu",
    "cuda/fixed_msm.cu",
    "cuda/ntt.cu",
    "cuda/msm.cu",
    "cuda/pce.cu",
    "cuda/prep.cu",
];
const ARCH: &str = "sm_90";

fn executable(p: &Path) -> Option<PathBuf> {
    p.is_file().then(|| p.to_path_buf())
}

fn find_nvcc() -> Option<PathBuf> {
    if let Some(v) = env::var_os("NVCC") {
        if v == "off" {
            return None;
        }
        let p = PathBuf::from(&v);
        return executable(&p).or_else(|| which(&v.to_string_lossy()));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = env::var_os(var)
            && let Some(p) = executable(&Path::new(&home).join("bin/nvcc"))
        {
            return Some(p);
        }
    }
    which("nvcc").or_else(|| {
        let root = Path::new(&env::var("CARGO_MANIFEST_DIR").ok()?)
            .parent()?
            .to_path_buf();
        executable(&root.join(".cuda/nvidia/cu13/bin/nvcc"))
    })
}

fn which(name: &str) -> Option<PathBuf> {
    env::split_paths(&env::var_os("PATH")?).find_map(|dir| executable(&dir.join(name)))
}

/// Whether blst's build compiled it with ADX instructions: sppark's host-side
/// field types call blst's internals, whose names depend on it. Mirrors the
/// decision in blst's build script.
fn blst_uses_adx() -> bool {
    if env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("x86_64") {
        return false;
    }
    if env::var("CARGO_ENCODED_RUSTFLAGS")
        .unwrap_or_default()
        .contains("target-cpu=")
    {
        return env::var("CARGO_CFG_TARGET_FEATURE")
            .unwrap_or_default()
            .split(',')
            .any(|f| f == "adx");
    }
    #[cfg(target_arch = "x86_64")]
    return std::is_x86_feature_detected!("adx");
    #[allow(unreachable_code)]
    false
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(cuzk_kernels)");
    for var in ["NVCC", "CUDA_HOME", "CUDA_PATH", "PATH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    for src in SOURCES
        .iter()
        .chain(&["cuda/common.cuh", "cuda/msm.cuh", "cuda/fixed_msm.cuh"])
    {
        println!("cargo:rerun-if-changed={src}");
    }
    let Some(nvcc) = find_nvcc() else {
        println!(
            "cargo:warning=cuzk-kernels: nvcc not found (NVCC, CUDA_HOME, CUDA_PATH, PATH, .cuda/); \
             building without GPU kernels: the CPU backend only"
        );
        println!("cargo:rustc-env=CUZK_KERNEL_ARCHS=");
        return;
    };
    let sppark = PathBuf::from(env::var("DEP_SPPARK_ROOT").expect("sppark exports its root"));
    let blst_src = PathBuf::from(env::var("DEP_BLST_C_SRC").expect("blst exports its sources"));
    let blst_bindings =
        PathBuf::from(env::var("DEP_BLST_BINDINGS").expect("blst exports its bindings"));

    // cc-rs takes the CUDA compiler from NVCC.
    // SAFETY: build scripts are single-threaded.
    unsafe { env::set_var("NVCC", &nvcc) };
    let mut build = cc::Build::new();
    build
        .cuda(true)
        .cudart("static")
        // Device code is always optimised: `-G` debug kernels are unusably slow.
        .debug(false)
        .opt_level(3)
        .flag("-gencode")
        .flag(format!("arch=compute_90,code={ARCH}"))
        .flag("-DFEATURE_BLS12_381")
        .flag("-DTAKE_RESPONSIBILITY_FOR_ERROR_MESSAGE")
        .flag("-Xcompiler")
        .flag("-Wno-unused-function")
        .include(&sppark)
        .include(&blst_src)
        .include(&blst_bindings)
        .files(SOURCES);
    if blst_uses_adx() {
        build.flag("-D__ADX__");
    }
    // sppark's device registry (select_gpu, all_gpus): its own build script
    // compiles it when it finds nvcc on its own (nvcc on PATH, or NVCC), and
    // lib.rs keeps that library linked; otherwise (CUDA_HOME, CUDA_PATH,
    // .cuda/) we compile it. Either way exactly one copy is linked.
    if env::var("DEP_SPPARK_TARGET").as_deref() != Ok("cuda") {
        build.file(sppark.join("util/all_gpus.cpp"));
    }
    build.compile("cuzk_kernels");
    println!("cargo:rustc-cfg=cuzk_kernels");
    println!("cargo:rustc-env=CUZK_KERNEL_ARCHS={ARCH}");
}
