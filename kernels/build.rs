//! Compiles cuzk's CUDA kernels with nvcc when nvcc is found, embedding them
//! in the binary; otherwise builds the crate without kernels and says so (the
//! engine then runs on the CPU backend).
//!
//! Targets: machine code for every architecture family storage providers
//! prove on, Turing to Blackwell, plus PTX for the newest so a future card
//! JIT-compiles it ([`DEFAULT_TARGETS`]). `CUZK_CUDA_ARCHS` narrows or widens
//! the list (`sm_90,compute_90`: one card's code and its PTX), e.g. for CI.
//!
//! nvcc is looked up through NVCC, CUDA_HOME, CUDA_PATH, PATH, and finally
//! the project's own install (`scripts/setup.sh` puts one in `.cuda/`).

use std::env;
use std::path::{Path, PathBuf};

const SOURCES: [&str; 8] = [
    "cuda/memory.cu",
    "cuda/fixed_msm.cu",
    "cuda/fixed_base.cu",
    "cuda/ntt.cu",
    "cuda/msm.cu",
    "cuda/pce.cu",
    "cuda/prep.cu",
    "cuda/lists.cu",
];
/// Machine code for Turing (RTX 20xx, T4), Ampere (A100; RTX 30xx), Ada
/// (RTX 40xx, L40S), Hopper (H100/H200), Blackwell (B200; RTX 50xx), and
/// PTX for the newest. A cubin runs on its major revision's later minors
/// too (sm_80 on sm_87, sm_120 on sm_121).
const DEFAULT_TARGETS: &str = "sm_75,sm_80,sm_86,sm_89,sm_90,sm_100,sm_120,compute_120";

/// One nvcc target: machine code for `sm_XY`, or PTX for `compute_XY`.
struct Target {
    ptx: bool,
    arch: String,
}

impl Target {
    fn parse(s: &str) -> Result<Self, String> {
        let (ptx, digits) = match (s.strip_prefix("sm_"), s.strip_prefix("compute_")) {
            (Some(d), _) => (false, d),
            (_, Some(d)) => (true, d),
            _ => return Err(format!("`{s}` is neither sm_XY nor compute_XY")),
        };
        if digits.len() < 2 || !digits.chars().all(|c| c.is_ascii_digit()) {
            return Err(format!(
                "`{s}`: the architecture must be digits, e.g. sm_86"
            ));
        }
        if digits.parse::<u32>().unwrap_or(0) < 75 {
            return Err(format!(
                "`{s}`: CUDA 13 builds for Turing (sm_75) and later only"
            ));
        }
        Ok(Self {
            ptx,
            arch: digits.to_string(),
        })
    }

    /// The `-gencode` value.
    fn gencode(&self) -> String {
        let code = if self.ptx { "compute" } else { "sm" };
        format!("arch=compute_{a},code={code}_{a}", a = self.arch)
    }
}

/// The targets to build: `CUZK_CUDA_ARCHS` (comma-separated) or the default.
fn targets() -> Vec<Target> {
    let list = env::var("CUZK_CUDA_ARCHS").unwrap_or_else(|_| DEFAULT_TARGETS.into());
    let targets: Result<Vec<Target>, String> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(Target::parse)
        .collect();
    match targets {
        Ok(t) if !t.is_empty() => t,
        Ok(_) => panic!("CUZK_CUDA_ARCHS is empty: name at least one target, e.g. sm_90"),
        Err(e) => panic!("CUZK_CUDA_ARCHS = `{list}`: {e}"),
    }
}

/// nvcc's release (`13.0`), for `cuzk info` and the driver check.
fn nvcc_release(nvcc: &Path) -> String {
    std::process::Command::new(nvcc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            let at = text.find("release ")? + "release ".len();
            Some(text[at..].split(',').next()?.trim().to_string())
        })
        .unwrap_or_default()
}

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
    for var in ["NVCC", "CUDA_HOME", "CUDA_PATH", "PATH", "CUZK_CUDA_ARCHS"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    // The whole folder: cargo scans a directory for any changed file, so a
    // header split or added is never missed.
    println!("cargo:rerun-if-changed=cuda");
    let Some(nvcc) = find_nvcc() else {
        println!(
            "cargo:warning=cuzk-kernels: nvcc not found (NVCC, CUDA_HOME, CUDA_PATH, PATH, .cuda/); \
             building without GPU kernels: the CPU backend only"
        );
        println!("cargo:rustc-env=CUZK_KERNEL_ARCHS=");
        println!("cargo:rustc-env=CUZK_CUDA_RELEASE=");
        return;
    };
    let sppark = PathBuf::from(env::var("DEP_SPPARK_ROOT").expect("sppark exports its root"));
    let blst_src = PathBuf::from(env::var("DEP_BLST_C_SRC").expect("blst exports its sources"));
    let blst_bindings =
        PathBuf::from(env::var("DEP_BLST_BINDINGS").expect("blst exports its bindings"));

    // cc-rs takes the CUDA compiler from NVCC.
    // SAFETY: build scripts are single-threaded.
    unsafe { env::set_var("NVCC", &nvcc) };
    let targets = targets();
    // Each file's targets compile in parallel, the files themselves in
    // parallel too (up to cargo's job count): half the cores each bounds
    // ptxas' memory on a many-core machine.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let base = || {
        let mut build = cc::Build::new();
        build
            .cuda(true)
            .cudart("static")
            // Device code is always optimised: `-G` debug kernels are unusably slow.
            .debug(false)
            .opt_level(3);
        for t in &targets {
            build.flag("-gencode").flag(t.gencode());
        }
        build.flag(format!(
            "--threads={}",
            targets.len().min(cores.div_ceil(2)).max(1)
        ));
        build
            .flag("-DFEATURE_BLS12_381")
            .flag("-DTAKE_RESPONSIBILITY_FOR_ERROR_MESSAGE")
            .flag("-Xcompiler")
            .flag("-Wno-unused-function")
            .include(&sppark)
            .include(&blst_src)
            .include(&blst_bindings);
        if blst_uses_adx() {
            build.flag("-D__ADX__");
        }
        build
    };
    // Every file is compiled on its own, as a whole program: cc compiles
    // several CUDA files of one build as relocatable device code
    // (--device-c), under which ptxas gave level 0 of G1 210 registers
    // where the same PTX takes 140 whole (8 warps an SM in blocks of 64
    // instead of 14). No kernel calls device code of another file.
    let objects = compile_each(&base, &SOURCES);
    let mut build = base();
    build.objects(&objects);
    // sppark's device registry (select_gpu, all_gpus): its own build script
    // compiles it when it finds nvcc on its own (nvcc on PATH, or NVCC), and
    // lib.rs keeps that library linked; otherwise (CUDA_HOME, CUDA_PATH,
    // .cuda/) we compile it. Either way exactly one copy is linked.
    if env::var("DEP_SPPARK_TARGET").as_deref() != Ok("cuda") {
        build.file(sppark.join("util/all_gpus.cpp"));
    }
    build.compile("cuzk_kernels");
    println!("cargo:rustc-cfg=cuzk_kernels");
    let names: Vec<String> = targets
        .iter()
        .map(|t| format!("{}_{}", if t.ptx { "compute" } else { "sm" }, t.arch))
        .collect();
    println!("cargo:rustc-env=CUZK_KERNEL_ARCHS={}", names.join(","));
    println!("cargo:rustc-env=CUZK_CUDA_RELEASE={}", nvcc_release(&nvcc));
}

/// The objects of `sources`, each compiled by its own `base()` build (one
/// CUDA file a build: whole-program device code), as many at once as cargo
/// gives this build jobs.
fn compile_each(base: &(dyn Fn() -> cc::Build + Sync), sources: &[&str]) -> Vec<PathBuf> {
    let jobs = env::var("NUM_JOBS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(1)
        .clamp(1, sources.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let built = std::sync::Mutex::new(vec![Vec::new(); sources.len()]);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(src) = sources.get(i) else { break };
                    let objects = base().file(src).compile_intermediates();
                    built.lock().unwrap()[i] = objects;
                }
            });
        }
    });
    built.into_inner().unwrap().into_iter().flatten().collect()
}
