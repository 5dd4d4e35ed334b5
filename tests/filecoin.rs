//! Filecoin's proofs at 2 KiB through the engine's graph: PoRep C2,
//! WindowPoSt over two sectors, WinningPoSt and SnapDeals, each accepted by
//! Filecoin's own verifier, the same bytes with one byte flipped rejected;
//! and every class of bad input answered with an error naming what is wrong
//! while the engine goes on proving.
//!
//! Parameters are generated once into `CUZK_FIL_PARAMS` (default
//! `~/.cache/cuzk/fil-2k`) and reused by later runs; fixtures are sealed
//! afresh by each run.

mod common;

use common::fil::{SIZE, fixtures, flipped, hex32, read, verify};
use cuzk::Engine;
use cuzk::fil::{FilProof, FilProveError};
use cuzk::filecoin::ids;
use cuzk::filecoin::{FilError, FilJob, ProofKind, params, porep, post, snap};
use cuzk::srs_cache::SrsCache;
use cuzk::stages::circuit::ProvableCircuit;

fn engine() -> Engine {
    let mut c = common::config("single_lock");
    c.engine.self_verify = true;
    Engine::from_config(c).unwrap()
}

async fn prove(engine: &Engine, srs: &SrsCache, job: FilJob) -> Result<FilProof, FilProveError> {
    cuzk::fil::prove(engine, srs, job).await
}

fn porep_job() -> FilJob {
    let (meta, _) = fixtures();
    let c1 = porep::C1::parse(&read(&meta.porep.wrapper)).unwrap();
    porep::job(&c1, meta.miner, None, None).unwrap()
}

fn window_request() -> post::PostRequest {
    let (meta, _) = fixtures();
    post::PostRequest {
        registered_proof: ids::post_proof(meta.window.registered_proof).unwrap(),
        miner: meta.miner,
        randomness: hex32(&meta.window.randomness),
        vanilla_proofs: meta.window.vanilla.iter().map(|v| read(v)).collect(),
        partition: 0,
    }
}

fn winning_request() -> post::PostRequest {
    let (meta, _) = fixtures();
    post::PostRequest {
        registered_proof: ids::post_proof(meta.winning.registered_proof).unwrap(),
        miner: meta.miner,
        randomness: hex32(&meta.winning.randomness),
        vanilla_proofs: meta.winning.vanilla.iter().map(|v| read(v)).collect(),
        partition: 0,
    }
}

fn snap_request() -> snap::SnapRequest {
    let (meta, _) = fixtures();
    let snap = meta.snap.as_ref().unwrap();
    snap::SnapRequest {
        registered_proof: ids::update_proof(snap.registered_proof).unwrap(),
        partition_proofs: snap.vanilla.iter().map(|v| read(v)).collect(),
        comm_r_old: hex32(&snap.comm_r_old),
        comm_r_new: hex32(&snap.comm_r_new),
        comm_d_new: hex32(&snap.comm_d_new),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn porep_c2_is_accepted_by_verify_seal_and_a_flipped_byte_is_not() {
    let (meta, _) = fixtures();
    let (engine, srs) = (engine(), SrsCache::new());
    let proof = prove(&engine, &srs, porep_job()).await.unwrap();
    assert_eq!(proof.bytes.len(), 192, "one partition at 2 KiB");
    assert!(
        verify::porep(&proof.bytes),
        "Filecoin's verify_seal accepts the engine's proof"
    );
    assert!(
        !verify::porep(&flipped(&proof.bytes)),
        "and rejects it with one byte flipped"
    );
    // The raw C1 JSON with the sector given makes the same job.
    let raw = porep::C1::parse(&read(&meta.porep.c1)).unwrap();
    let job = porep::job(&raw, meta.miner, Some(meta.porep.sector), None).unwrap();
    assert_eq!(job.public_inputs, porep_job().public_inputs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_winning_and_snap_are_accepted_by_filecoins_verifiers() {
    let (engine, srs) = (engine(), SrsCache::new());

    // WindowPoSt, one partition of the two sectors.
    let req = window_request();
    assert_eq!(req.vanilla_proofs.len(), 2);
    let proof = prove(&engine, &srs, post::window_job(&req).unwrap())
        .await
        .unwrap();
    // verify::window merges the partition proof as merge_window_post_partition_proofs does.
    assert!(
        verify::window(&proof.bytes),
        "verify_window_post accepts the merged partition proof"
    );
    assert!(!verify::window(&flipped(&proof.bytes)));

    // WinningPoSt of sector 1.
    let proof = prove(
        &engine,
        &srs,
        post::winning_job(&winning_request()).unwrap(),
    )
    .await
    .unwrap();
    assert!(
        verify::winning(&proof.bytes),
        "verify_winning_post accepts it"
    );
    assert!(!verify::winning(&flipped(&proof.bytes)));

    // SnapDeals.
    let proof = prove(&engine, &srs, snap::job(&snap_request()).unwrap())
        .await
        .unwrap();
    assert!(
        verify::snap(&proof.bytes),
        "verify_empty_sector_update_proof accepts it"
    );
    assert!(!verify::snap(&flipped(&proof.bytes)));
}

fn error_of(r: Result<FilJob, FilError>) -> String {
    r.map(|_| ()).unwrap_err().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_get_clear_errors_and_the_next_job_proves() {
    let (meta, _) = fixtures();
    let (engine, srs) = (engine(), SrsCache::new());
    let wrapper: serde_json::Value = serde_json::from_slice(&read(&meta.porep.wrapper)).unwrap();

    // Malformed JSON, and a wrapper whose base64 is not.
    let err = porep::C1::parse(b"{\"registered_proof\":")
        .unwrap_err()
        .to_string();
    assert!(err.contains("the C1 input: is not JSON"), "{err}");
    let mut bad = wrapper.clone();
    bad["Phase1Out"] = "%%% not base64 %%%".into();
    let err = porep::C1::parse(bad.to_string().as_bytes())
        .unwrap_err()
        .to_string();
    assert!(err.contains("Phase1Out: is not base64"), "{err}");

    // A C1 for another sector size than it says; another registered proof
    // than the request's; another miner than it was sealed for.
    let mut bad = wrapper.clone();
    bad["SectorSize"] = (32u64 << 30).into();
    let c1 = porep::C1::parse(bad.to_string().as_bytes()).unwrap();
    let err = error_of(porep::job(&c1, meta.miner, None, None));
    assert!(
        err.contains("declares a 32GiB sector but the C1 output is for 2KiB"),
        "{err}"
    );
    let c1 = porep::C1::parse(&read(&meta.porep.wrapper)).unwrap();
    let other = filecoin_proofs_api::RegisteredSealProof::StackedDrg8MiBV1_1;
    let err = error_of(porep::job(&c1, meta.miner, None, Some(other)));
    assert!(err.contains("registered_proof: mismatch"), "{err}");
    let err = error_of(porep::job(&c1, meta.miner + 1, None, None));
    assert!(err.contains("not made for miner 1001"), "{err}");

    // A missing parameter file, named with its directory.
    let err = params::require(ProofKind::Porep, 8 << 20)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("missing parameter file v28-stacked-proof-of-replication-")
            && err.contains(&params::cache_dir().display().to_string())
            && err.contains("cuzk fil params --sector-size 8MiB"),
        "{err}"
    );

    // Corrupted vanilla proofs: bytes that do not decode, and a proof that
    // decodes but does not verify; both name the sector's place.
    let mut req = window_request();
    req.vanilla_proofs[1].truncate(10);
    let err = error_of(post::window_job(&req));
    assert!(
        err.contains("vanilla_proofs[1]: is not a bincode FallbackPoStSectorProof"),
        "{err}"
    );
    let mut req = window_request();
    let n = req.vanilla_proofs[0].len();
    req.vanilla_proofs[0][n - 40] ^= 0x04;
    let err = error_of(post::window_job(&req));
    assert!(
        err.contains("vanilla_proofs[0]")
            || (err.contains("partition 0") && err.contains("do not verify")),
        "{err}"
    );
    let mut req = snap_request();
    req.partition_proofs[0].truncate(3);
    let err = error_of(snap::job(&req));
    assert!(
        err.contains("vanilla_proofs[0]: is not a bincode partition proof"),
        "{err}"
    );
    let mut req = winning_request();
    req.vanilla_proofs.clear();
    let err = error_of(post::winning_job(&req));
    assert!(err.contains("vanilla_proofs: is empty"), "{err}");

    // An unsatisfiable circuit: the right witness for another comm_r.
    let mut c1 = porep::C1::parse(&read(&meta.porep.wrapper)).unwrap();
    c1.output.comm_r[0] ^= 0x01;
    let job = porep::job(&c1, meta.miner, None, None).unwrap();
    let err = prove(&engine, &srs, job).await.unwrap_err().to_string();
    assert!(
        err.contains("is not satisfied"),
        "the failing constraint is named: {err}"
    );

    // The engine goes on: the next job proves.
    let proof = prove(&engine, &srs, post::window_job(&window_request()).unwrap())
        .await
        .unwrap();
    assert_eq!(proof.bytes.len(), 192);
    engine.idle().await;
    assert_eq!(engine.arena_stats().in_use, 0);
}

#[test]
fn counts_come_from_the_circuits() {
    let infos = cuzk::filecoin::info::all(SIZE).unwrap();
    let count = |k: ProofKind| {
        infos
            .iter()
            .find(|i| i.kind == k)
            .unwrap()
            .shape
            .constraints
    };
    assert_eq!(count(ProofKind::Porep), 2_687_921);
    assert_eq!(count(ProofKind::Snap), 1_705_039);
    assert_eq!(count(ProofKind::WindowPost), 21_866);
    assert_eq!(count(ProofKind::WinningPost), 90_750);
    let porep = infos.iter().find(|i| i.kind == ProofKind::Porep).unwrap();
    assert_eq!((porep.public_inputs(), porep.partitions), (39, 1));
}

#[test]
fn counts_at_32gib_are_the_published_ones() {
    let porep = cuzk::filecoin::info::kind(ProofKind::Porep, 32 << 30).unwrap();
    assert_eq!(porep.shape.constraints, 130_278_541);
    assert_eq!(porep.partitions, 10);
    let winning = cuzk::filecoin::info::kind(ProofKind::WinningPost, 32 << 30).unwrap();
    assert_eq!(winning.shape.constraints, 370_590);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pce_equals_full_synthesis_for_porep_post_and_snap_and_proves() {
    use std::sync::Arc;
    fixtures();
    let dir = tempfile::tempdir().unwrap();
    // PoRep's partition computes its witness challenge by challenge in
    // parallel (two at 2 KiB), its labels natively: the same assignment as
    // the gadgets', bit for bit.
    let job = porep_job();
    let srs = Arc::new(cuzk::stages::Srs::read(&job.params, false).unwrap());
    common::pce::matches_full_synthesis(&srs, dir.path(), || porep_job().circuits).await;
    // PoSt's partitions compute theirs sector by sector and leaf by leaf in
    // parallel: the same too.
    let job = post::window_job(&window_request()).unwrap();
    let srs = Arc::new(cuzk::stages::Srs::read(&job.params, false).unwrap());
    common::pce::matches_full_synthesis(&srs, dir.path(), || {
        post::window_job(&window_request()).unwrap().circuits
    })
    .await;
    let job = post::winning_job(&winning_request()).unwrap();
    let srs = Arc::new(cuzk::stages::Srs::read(&job.params, false).unwrap());
    common::pce::matches_full_synthesis(&srs, dir.path(), || {
        post::winning_job(&winning_request()).unwrap().circuits
    })
    .await;
    // SnapDeals computes its challenges in parallel, its paths natively
    // (Poseidon in tree R, SHA-256 in tree D): the same again.
    let job = snap::job(&snap_request()).unwrap();
    let srs = Arc::new(cuzk::stages::Srs::read(&job.params, false).unwrap());
    common::pce::matches_full_synthesis(&srs, dir.path(), || {
        snap::job(&snap_request()).unwrap().circuits
    })
    .await;
    // Through the pce graph, twice (the recording read from disk, then from
    // memory), witness-only: Filecoin's verifier accepts both.
    let mut c = common::config("pce");
    c.pce.dir = Some(dir.path().into());
    let engine = Engine::from_config(c).unwrap();
    let cache = SrsCache::new();
    for origin in ["disk", "memory"] {
        let proof = prove(&engine, &cache, porep_job()).await.unwrap();
        assert!(
            verify::porep(&proof.bytes),
            "verify_seal accepts the {origin} path's proof"
        );
        let notes: Vec<_> = proof.partitions[0]
            .timings
            .iter()
            .filter_map(|t| t.note("pce"))
            .collect();
        assert_eq!(notes, [origin]);
    }
    let proof = prove(&engine, &cache, snap::job(&snap_request()).unwrap())
        .await
        .unwrap();
    assert!(
        verify::snap(&proof.bytes),
        "verify_empty_sector_update_proof accepts the native witness's proof"
    );
}

/// A native witness wrong in one wire is caught before any proving (the
/// recording's row check names the constraint), the partition falls back
/// to full synthesis, and the proof is right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_wire_in_the_witness_is_caught_naming_its_row_and_the_proof_is_right() {
    fixtures();
    let dir = tempfile::tempdir().unwrap();
    let mut c = common::config("pce");
    c.pce.dir = Some(dir.path().into());
    let drill = cuzk::faults::Fault {
        stage: "synth_pce".into(),
        job: String::new(),
        kind: cuzk::faults::FaultKind::WrongWitness,
    };
    let options = cuzk::EngineOptions {
        faults: vec![drill],
        ..Default::default()
    };
    let engine = Engine::with_options(c, options).unwrap();
    let cache = SrsCache::new();
    // The first proof records the matrices (no witness-only synthesis).
    let proof = prove(&engine, &cache, porep_job()).await.unwrap();
    assert!(verify::porep(&proof.bytes));
    let proof = prove(&engine, &cache, porep_job()).await.unwrap();
    let notes = |key: &str| -> Vec<String> {
        proof
            .partitions
            .iter()
            .flat_map(|p| p.timings.iter().filter_map(|t| t.note(key)))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(notes("pce"), ["fallback"]);
    let why = notes("pce_mismatch");
    assert!(
        why.len() == 1 && why[0].starts_with("constraint ") && why[0].contains("not satisfied"),
        "the mismatch names the row: {why:?}"
    );
    assert!(
        verify::porep(&proof.bytes),
        "verify_seal accepts the fallback's proof"
    );
}

/// `cuzk` itself, with the test parameter cache.
fn cuzk(args: &[&str]) -> (bool, String) {
    cuzk_with(args, &common::fil::param_cache())
}

fn cuzk_with(args: &[&str], params: &std::path::Path) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(args)
        .env("CUZK_FIL__PARAMETER_CACHE", params)
        .env("CUZK_GPU__BACKEND", "cpu")
        .env("CUZK_THREADS__SYNTHESIS", "2")
        .env("CUZK_THREADS__GROTH16", "2")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn the_cli_proves_from_fixtures_and_benches_a_filecoin_input() {
    let (_, dir) = fixtures();
    let dir = dir.to_str().unwrap();
    let out = tempfile::tempdir().unwrap();
    let proof = out.path().join("wpost.proof");
    let (ok, text) = cuzk(&[
        "fil",
        "prove",
        "window-post",
        "--fixtures",
        dir,
        "--out",
        proof.to_str().unwrap(),
    ]);
    assert!(ok, "{text}");
    assert!(
        text.contains("Filecoin's verification: OK (192 bytes"),
        "{text}"
    );
    assert!(verify::window(&std::fs::read(&proof).unwrap()));
    let (ok, text) = cuzk(&[
        "bench",
        "--quiet",
        "--fixtures",
        dir,
        "--fil-kind",
        "winning-post",
        "-c",
        "2",
        "-j",
        "1",
    ]);
    assert!(ok, "{text}");
    assert!(
        text.contains("fil-winning-post-2KiB")
            && text.contains("verified:   2/2 proofs (Filecoin's own verifier)"),
        "{text}"
    );
    let (ok, text) = cuzk(&["fil", "info", "--sector-size", "2KiB"]);
    assert!(
        ok && text.contains("2,687,921") && text.contains("21,866"),
        "{text}"
    );
    // A card's plan before any parameters exist: WinningPoSt 2 KiB resident
    // on 1 GiB; PoRep 2 KiB (1 GiB of SRS, 2^22 domain) streamed with
    // compact buffers on 512 MiB, and not at all on 64 MiB.
    let plan = |kind: &str, vram: &str| {
        let (ok, text) = cuzk(&[
            "fil",
            "info",
            "--sector-size",
            "2KiB",
            "--kinds",
            kind,
            "--vram",
            vram,
        ]);
        assert!(ok, "{text}");
        text
    };
    let roomy = plan("winning-post", "1GiB");
    assert!(
        roomy.contains("winning-post 2KiB:") && roomy.contains("=> SRS resident, room for"),
        "{roomy}"
    );
    let small = plan("porep", "512MiB");
    assert!(
        small.contains("device memory plan for a 512 MiB budget")
            && small.contains("=> the SRS does not fit: every MSM streams its points")
            && small.contains("compact partition buffers"),
        "{small}"
    );
    let tiny = plan("porep", "64MiB");
    assert!(tiny.contains("=> this card cannot prove it"), "{tiny}");
    // A missing parameter file is named with its directory and the fix.
    let empty = tempfile::tempdir().unwrap();
    let c1 = format!("{dir}/c1-wrapper.json");
    let (ok, text) = cuzk_with(
        &["fil", "prove", "porep", "--c1", &c1, "--miner", "1000"],
        empty.path(),
    );
    assert!(!ok);
    assert!(
        text.contains("missing parameter file v28-stacked-proof-of-replication")
            && text.contains(&empty.path().display().to_string())
            && text.contains("cuzk fil params --sector-size 2KiB"),
        "{text}"
    );
}

/// A sector that was never sealed: its C1 output proves through the engine,
/// and Filecoin's verify_seal accepts the proof (and rejects it flipped).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synthetic_sector_proves_and_verify_seal_accepts_it() {
    use cuzk::filecoin::synthetic::{SectorSpec, porep_c1};
    use filecoin_proofs_api::SectorId;
    let _ = fixtures(); // the 2 KiB parameters
    let mut seed = [0x5au8; 32];
    seed[31] &= 0x3f;
    let spec = SectorSpec {
        sector_size: SIZE,
        miner: 1000,
        sector: 77,
        ticket: [0x42; 32],
        seed,
    };
    let s = porep_c1(&spec).unwrap();
    let c1 = porep::C1::parse(&porep::C1::wrap(&s.c1, spec.sector)).unwrap();
    let job = porep::job(&c1, spec.miner, None, None).unwrap();
    let (engine, srs) = (engine(), SrsCache::new());
    let proof = prove(&engine, &srs, job).await.unwrap();
    let verify_seal = |bytes: &[u8]| {
        filecoin_proofs_api::seal::verify_seal(
            s.c1.registered_proof,
            s.c1.comm_r,
            s.c1.comm_d,
            ids::prover_id(spec.miner),
            SectorId::from(spec.sector),
            spec.ticket,
            spec.seed,
            bytes,
        )
        .unwrap_or(false)
    };
    assert!(
        verify_seal(&proof.bytes),
        "verify_seal accepts the synthetic sector's proof"
    );
    assert!(
        !verify_seal(&flipped(&proof.bytes)),
        "and rejects it with one byte flipped"
    );
}

/// PoSt over never-sealed sectors: WinningPoSt of one and WindowPoSt of two,
/// proved through the engine and accepted by Filecoin's verifiers against
/// the synthetic sectors' comm_r (and rejected flipped).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synthetic_post_proofs_are_accepted_by_filecoins_verifiers() {
    use cuzk::filecoin::synthetic::post_vanilla;
    use filecoin_proofs_api::{PublicReplicaInfo, SectorId};
    use std::collections::BTreeMap;
    let _ = fixtures(); // the 2 KiB parameters
    let (engine, srs) = (engine(), SrsCache::new());
    let miner = 1000;
    let mut randomness = [0x21u8; 32];
    randomness[31] &= 0x3f;
    let replicas = |rp, sectors: &[cuzk::filecoin::synthetic::SyntheticPost]| {
        sectors
            .iter()
            .map(|s| {
                (
                    SectorId::from(s.sector),
                    PublicReplicaInfo::new(rp, s.comm_r),
                )
            })
            .collect::<BTreeMap<_, _>>()
    };

    // The sectors' vanilla proofs, and a request carrying them.
    let request = |rp, sectors: &[u64]| {
        let made = post_vanilla(rp, &randomness, miner, sectors).unwrap();
        let req = post::PostRequest {
            registered_proof: rp,
            miner,
            randomness,
            vanilla_proofs: made.iter().map(|s| s.vanilla.clone()).collect(),
            partition: 0,
        };
        (made, req)
    };

    let rp = ids::winning_proof_for(SIZE).unwrap();
    let (sectors, req) = request(rp, &[5]);
    let proof = prove(&engine, &srs, post::winning_job(&req).unwrap())
        .await
        .unwrap();
    let verify = |bytes: &[u8]| {
        filecoin_proofs_api::post::verify_winning_post(
            &randomness,
            bytes,
            &replicas(rp, &sectors),
            ids::prover_id(miner),
        )
        .unwrap_or(false)
    };
    assert!(
        verify(&proof.bytes),
        "verify_winning_post accepts the synthetic sector's proof"
    );
    assert!(!verify(&flipped(&proof.bytes)));

    let rp = ids::window_proof_for(SIZE).unwrap();
    let (sectors, req) = request(rp, &[5, 6]);
    let proof = prove(&engine, &srs, post::window_job(&req).unwrap())
        .await
        .unwrap();
    let replicas = replicas(rp, &sectors);
    let verify = |bytes: &[u8]| {
        verify::window_partition(rp, &randomness, &replicas, ids::prover_id(miner), bytes)
    };
    assert!(
        verify(&proof.bytes),
        "verify_window_post accepts the synthetic sectors' proof"
    );
    assert!(!verify(&flipped(&proof.bytes)));
}

/// The CLI end to end on a sector that was never sealed: `cuzk fil gen
/// --synthetic` writes the inputs, `cuzk fil prove porep` proves them and
/// Filecoin's verify_seal (run by the command, and here) accepts the proof.
#[test]
fn the_cli_makes_and_proves_a_synthetic_sector() {
    let _ = fixtures(); // the 2 KiB parameters
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("syn");
    let (ok, text) = cuzk(&[
        "fil",
        "gen",
        "--synthetic",
        "--sector-size",
        "2KiB",
        "--sector",
        "12",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        ok && text.contains("checked with Filecoin's vanilla verifier"),
        "{text}"
    );
    let meta: cuzk::filecoin::synthetic::SyntheticMeta =
        serde_json::from_slice(&std::fs::read(dir.join("synthetic.json")).unwrap()).unwrap();
    assert_eq!((meta.porep.sector, meta.window.vanilla.len()), (12, 2));
    // The daemon's clients (cuzk soak) make requests from it as from fixtures.
    {
        use cuzk::daemon::client::request_from_fixtures;
        use cuzk::daemon::proto::Priority;
        use cuzk::filecoin::ProofKind;
        for kind in [
            ProofKind::Porep,
            ProofKind::WinningPost,
            ProofKind::WindowPost,
        ] {
            let req = request_from_fixtures(&dir, kind, "syn", Priority::Unspecified)
                .unwrap_or_else(|e| panic!("{kind:?}: {e:#}"));
            assert_eq!(req.request_id, "syn");
        }
        let snap = request_from_fixtures(&dir, ProofKind::Snap, "syn", Priority::Unspecified);
        let e = format!("{:#}", snap.unwrap_err());
        assert!(e.contains("no SnapDeals inputs"), "{e}");
    }
    let proof = out.path().join("porep.proof");
    let (ok, text) = cuzk(&[
        "fil",
        "prove",
        "porep",
        "--c1",
        dir.join("c1-wrapper.json").to_str().unwrap(),
        "--miner",
        "1000",
        "--out",
        proof.to_str().unwrap(),
    ]);
    assert!(ok && text.contains("Filecoin's verification: OK"), "{text}");
    let accepted = filecoin_proofs_api::seal::verify_seal(
        ids::seal_proof(meta.porep.registered_proof).unwrap(),
        hex32(&meta.porep.comm_r),
        hex32(&meta.porep.comm_d),
        ids::prover_id(1000),
        filecoin_proofs_api::SectorId::from(12),
        hex32(&meta.porep.ticket),
        hex32(&meta.porep.seed),
        &std::fs::read(&proof).unwrap(),
    )
    .unwrap_or(false);
    assert!(
        accepted,
        "verify_seal accepts the CLI's proof of the synthetic sector"
    );
}

/// A small sector (16 KiB: 32 GiB's 8-8-0 trees) with 32 GiB's 11 layers,
/// two challenges: the native witness (labels, columns and paths hashed
/// natively) equals the gadgets', value for value.
#[test]
fn a_sector_with_32gib_layers_gets_the_gadgets_witness_natively() {
    use cuzk::stages::pce::WitnessCs;
    use ff::Field;
    let work = tempfile::tempdir().unwrap();
    let shaped = cuzk::filecoin::shaped::porep_partition(16 << 10, 11, 2, work.path()).unwrap();
    let shape = shaped.circuit.duplicate().unwrap().shape().unwrap();
    let witness = |native: bool| {
        let mut z = vec![blstrs::Scalar::ZERO; shape.inputs + shape.aux];
        let mut cs = WitnessCs::new(&mut z, shape.inputs);
        let circuit = shaped.circuit.duplicate().unwrap();
        match native {
            true => circuit.synthesize_witness(&mut cs).unwrap(),
            false => circuit
                .synthesize_witness_gadgets(&mut cs)
                .unwrap()
                .unwrap(),
        }
        assert!(cs.take_error().is_none());
        drop(cs);
        z
    };
    let (native, gadgets) = (witness(true), witness(false));
    let first = native.iter().zip(&gadgets).position(|(n, g)| n != g);
    assert_eq!(first, None, "the first variable where the two differ");
    assert!(
        shape.constraints > 10_000_000,
        "{} constraints",
        shape.constraints
    );
}

/// The first partition of a shape records its matrices from the circuit's
/// parts in parallel (no values, no full synthesis): the recording must be
/// full synthesis's, byte for byte, or every later partition would be held
/// to the wrong constraints.
#[test]
fn a_partition_records_in_parts_what_full_synthesis_records() {
    // Before synthesis reads Filecoin's settings: the cache the other tests use.
    cuzk::filecoin::params::use_cache(Some(&common::fil::param_cache())).unwrap();
    for (size, layers, challenges) in [(2048u64, 2, 2), (16 << 10, 11, 2)] {
        let work = tempfile::tempdir().unwrap();
        let shaped =
            cuzk::filecoin::shaped::porep_partition(size, layers, challenges, work.path()).unwrap();
        let make = || shaped.circuit.duplicate().unwrap();
        let report = cuzk::stages::measure::measure(make, 1, false).unwrap();
        println!(
            "{}",
            report.render(&format!(
                "{size} B, {layers} layers, {challenges} challenges"
            ))
        );
        assert_eq!(
            report.record_parts_equal,
            Some(true),
            "{size} B, {layers} layers, {challenges} challenges: the recording in parts"
        );
    }
    // PoSt's sectors, each its commitments and leaves, in parallel.
    let first = |kind: &str| -> Box<dyn ProvableCircuit> {
        let mut job = match kind {
            "WindowPoSt" => post::window_job(&window_request()),
            _ => post::winning_job(&winning_request()),
        }
        .unwrap();
        job.circuits.remove(0)
    };
    for kind in ["WindowPoSt", "WinningPoSt"] {
        let report = cuzk::stages::measure::measure(|| first(kind), 1, false).unwrap();
        println!("{}", report.render(kind));
        assert_eq!(
            report.record_parts_equal,
            Some(true),
            "{kind}: the recording in parts"
        );
    }
}
