//! Seeded fuzzing of what the daemon reads from clients and from disk: every
//! kind of request (PoRep's C1 JSON, curio's wrapper, PoSt and SnapDeals
//! bincode) mutated thousands of ways, and parameter files cut and
//! corrupted. Nothing may panic, every refusal names what is wrong, and no
//! case may take more heap than 4 × its input + 64 MiB beyond what the valid
//! request takes to build its circuit (a counting global allocator measures
//! the peak): a request must not amplify into memory before it is checked.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::fil::{self, fixtures};
use cuzk::daemon::client::request_from_fixtures;
use cuzk::daemon::proto::{Priority, SubmitProofRequest};
use cuzk::daemon::request;
use cuzk::filecoin::ProofKind;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Counts live heap bytes and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call goes to the system allocator unchanged; only counts are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as given.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as given.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as given.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f`, returning its result and the heap it took above the start.
/// One measurement at a time: the counts are the whole process's.
fn peak_heap<R>(f: impl FnOnce() -> R) -> (R, usize) {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let r = f();
    (r, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

fn input_bytes(r: &SubmitProofRequest) -> usize {
    r.vanilla_proof.len() + r.vanilla_proofs.iter().map(Vec::len).sum::<usize>()
}

/// The bytes a mutation works on: the C1 body or one vanilla proof.
fn payload<'a>(r: &'a mut SubmitProofRequest, rng: &mut StdRng) -> &'a mut Vec<u8> {
    if r.vanilla_proofs.is_empty() {
        &mut r.vanilla_proof
    } else {
        let i = rng.gen_range(0..r.vanilla_proofs.len());
        &mut r.vanilla_proofs[i]
    }
}

/// One of the mutations, chosen by `rng`, and which one it was.
fn mutate(mut r: SubmitProofRequest, rng: &mut StdRng) -> (SubmitProofRequest, String) {
    let which = rng.gen_range(0..9);
    match which {
        0 => {
            let p = payload(&mut r, rng);
            for _ in 0..rng.gen_range(1..9) {
                if !p.is_empty() {
                    let i = rng.gen_range(0..p.len());
                    p[i] ^= 1 << rng.gen_range(0..8);
                }
            }
        }
        1 => {
            let p = payload(&mut r, rng);
            let keep = rng.gen_range(0..=p.len());
            p.truncate(keep);
        }
        2 => {
            let p = payload(&mut r, rng);
            let n = rng.gen_range(1..1000);
            p.extend((0..n).map(|_| rng.r#gen::<u8>()));
        }
        3 => {
            // Many tiny elements: 24 bytes of Vec per 2-3 wire bytes.
            let n = rng.gen_range(1..100_000);
            let tiny = rng.gen_range(0..2);
            r.vanilla_proofs = vec![vec![7; tiny]; n];
        }
        4 => {
            // A length prefix inflated: bincode must not trust it.
            let p = payload(&mut r, rng);
            if p.len() >= 8 {
                let at = rng.gen_range(0..p.len() - 7);
                let huge = u64::MAX >> rng.gen_range(0..40);
                p[at..at + 8].copy_from_slice(&huge.to_le_bytes());
            }
        }
        5 => {
            r.vanilla_proof = match rng.gen_range(0..4) {
                0 => format!("[{}0]", "0,".repeat(rng.gen_range(1..1 << 19))).into_bytes(),
                1 => {
                    let d = rng.gen_range(100..300);
                    format!("{}{}", "[".repeat(d), "]".repeat(d)).into_bytes()
                }
                2 => {
                    let keys: Vec<String> = (0..rng.gen_range(1..50_000))
                        .map(|i| format!("\"k{i}\":{i}"))
                        .collect();
                    format!("{{{}}}", keys.join(",")).into_bytes()
                }
                _ => format!(
                    "{{\"SectorNum\":1,\"Phase1Out\":\"{}\",\"SectorSize\":2048}}",
                    "QUFB".repeat(rng.gen_range(1..10_000))
                )
                .into_bytes(),
            };
        }
        6 => r.proof_kind = rng.gen_range(0..6),
        7 => {
            r.registered_proof = rng.gen_range(0..30);
            r.sector_size = [0, 2048, 8 << 20, 32 << 30][rng.gen_range(0..4)];
        }
        _ => {
            let n = [0, 31, 33, 32][rng.gen_range(0..4)];
            r.randomness = (0..n).map(|_| rng.r#gen::<u8>()).collect();
            r.comm_r_new = (0..[0, 5, 32, 40][rng.gen_range(0..4)])
                .map(|_| rng.r#gen::<u8>())
                .collect();
        }
    }
    (r, format!("mutation {which}"))
}

#[test]
fn mutated_requests_are_refused_by_name_within_bounded_memory() {
    let dir = &fixtures().1;
    // Some mutations make Filecoin's verifier panic, which parsing catches
    // and refuses; the default panic hook would print each one, and under
    // RUST_BACKTRACE symbolise a backtrace (hundreds of MiB of heap that
    // are the harness's, not the parser's). Parsing's own answer is what
    // is checked.
    std::panic::set_hook(Box::new(|_| {}));
    let cases: usize = std::env::var("CUZK_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    for (k, kind) in ProofKind::ALL.into_iter().enumerate() {
        let base = request_from_fixtures(dir, kind, "fuzz", Priority::Unspecified).unwrap();
        // A valid request builds its circuit: that much heap is its due,
        // and no mutation may take more than it plus the input bound.
        let (parsed, valid) = peak_heap(|| request::parse(&base).map(|_| ()));
        assert!(parsed.is_ok(), "{kind}: the unmutated request parses");
        let mut rng = StdRng::seed_from_u64(k as u64);
        let (mut refused, mut worst) = (0, 0.0f64);
        for case in 0..cases {
            let (r, how) = mutate(base.clone(), &mut rng);
            let bound = 4 * input_bytes(&r) + (64 << 20) + valid;
            let (result, heap) = peak_heap(|| request::parse(&r).map(|p| p.kind));
            assert!(
                heap <= bound,
                "{kind} case {case} ({how}): {heap} bytes of heap for {} bytes of input (kind {}, registered proof {}, sector size {})",
                input_bytes(&r),
                r.proof_kind,
                r.registered_proof,
                r.sector_size
            );
            worst = worst.max(heap as f64 / bound as f64);
            if let Err(e) = result {
                let e = e.to_string();
                assert!(
                    e.contains(": ") && e.len() < 4096,
                    "{kind} case {case}: the error names nothing: {e}"
                );
                refused += 1;
            }
        }
        eprintln!(
            "{kind}: {cases} cases, {refused} refused, worst heap {:.0} % of the bound (a valid request takes {} KiB)",
            worst * 100.0,
            valid >> 10
        );
        assert!(
            refused > cases / 2,
            "{kind}: the mutations reached the checks"
        );
    }
}

#[test]
fn cut_and_corrupted_parameter_files_are_refused() {
    fixtures();
    let path = cuzk::filecoin::params::require(ProofKind::WinningPost, fil::SIZE).unwrap();
    let good = std::fs::read(&path).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fuzz.params");
    let mut rng = StdRng::seed_from_u64(11);
    for case in 0..150 {
        let mut bytes = good.clone();
        match case % 3 {
            0 => bytes.truncate(rng.gen_range(0..bytes.len())),
            1 => {
                // A length field (the header's and the first query's) inflated.
                let at = rng.gen_range(0..2048.min(bytes.len() - 4));
                bytes[at..at + 4].copy_from_slice(&rng.r#gen::<u32>().to_be_bytes());
            }
            _ => {
                let at = rng.gen_range(0..bytes.len());
                bytes[at] ^= 0x40;
            }
        }
        std::fs::write(&file, &bytes).unwrap();
        let bound = 4 * bytes.len() + (64 << 20);
        let (result, heap) = peak_heap(|| cuzk::stages::Srs::read(&file, false).map(|_| ()));
        assert!(heap <= bound, "case {case}: {heap} bytes of heap");
        if let Err(e) = result {
            assert!(!e.to_string().is_empty(), "case {case}");
        }
    }
}

/// Pre-compiled constraint recordings cut, flipped, and with their header's
/// sizes rewritten (the digest made over the damage, as a recorder bug
/// would): every one is refused at open (size, digest) or by validation
/// before a device reads it; none panics (a size that overflows included)
/// or takes more heap than the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_and_corrupted_recordings_are_refused() {
    use cuzk::stages::pce::store::{DIGEST_BYTES, digest};
    use cuzk::stages::pce::{PceCache, Recording};
    use cuzk::stages::{ProvableCircuit, Workload};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let srs = common::srs(Workload::Chain, 10);
    let cache = Arc::new(PceCache::new(Some(dir.path().into())));
    let circuit = Box::new(Workload::Chain.instance(10, 3).circuit) as Box<dyn ProvableCircuit>;
    common::pce::synthesize("synth_pce", cache.clone(), &srs, vec![circuit]).await;
    let good = std::fs::read(cache.path_for(&srs).unwrap()).unwrap();
    let file = dir.path().join("fuzz.pce");
    let body = good.len() - DIGEST_BYTES;
    let mut rng = StdRng::seed_from_u64(12);
    let mut counts = [0usize; 3];
    for case in 0..600 {
        let mut bytes = good.clone();
        match case % 3 {
            0 => bytes.truncate(rng.gen_range(0..bytes.len())),
            1 => bytes[rng.gen_range(0..body)] ^= 1 << rng.gen_range(0..8),
            _ => {
                // A size word (table, densities, rows, terms): nearby values
                // and huge ones, then a digest over the damage.
                let word = rng.gen_range(8..18);
                let at = word * 8;
                let old = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
                let new = match rng.gen_range(0..3) {
                    0 => old.wrapping_add(rng.gen_range(1..4)),
                    1 => old.wrapping_sub(rng.gen_range(1..4)),
                    _ => rng.r#gen::<u64>() >> rng.gen_range(0..60),
                };
                bytes[at..at + 8].copy_from_slice(&new.to_le_bytes());
                let sum = digest(&bytes[..body]);
                bytes[body..].copy_from_slice(&sum);
            }
        }
        std::fs::write(&file, &bytes).unwrap();
        let bound = 4 * bytes.len() + (64 << 20);
        let (refusal, heap) = peak_heap(|| match Recording::open(&file) {
            Ok(None) => Some("at open".to_string()),
            Ok(Some(r)) => r.validate().err(),
            Err(e) => Some(e.to_string()),
        });
        assert!(heap <= bound, "case {case}: {heap} bytes of heap");
        let refusal = refusal.unwrap_or_else(|| panic!("case {case}: a damaged recording passed"));
        assert!(!refusal.is_empty(), "case {case}");
        counts[case % 3] += 1;
    }
    eprintln!("recordings refused: {counts:?} (cut, flipped, sizes rewritten)");
}
