//! The daemon over the wire, in-process, on loopback TCP and on a unix
//! socket: every RPC, Filecoin proofs accepted by Filecoin's verifiers,
//! priority order, idempotent request ids, authentication, malformed
//! requests, and cancelling mid-flight. The child-process cases (SIGTERM,
//! a thousand queued jobs) are in `tests/daemon_process.rs`.

mod common;

use std::time::Duration;

use common::fil::{self, fixtures, prove, verify};
use cuzk::daemon::client::{Client, connect, request_from_fixtures};
use cuzk::daemon::proto::{
    self, Priority, SubmitProofRequest, await_proof_response::Status as AwaitStatus,
};
use cuzk::daemon::{Running, start};
use cuzk::filecoin::ProofKind;
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

fn config(listen: &str) -> cuzk::config::Config {
    let mut c = common::config("single_lock");
    c.daemon.listen = listen.into();
    c.fil.parameter_cache = Some(fil::param_cache());
    c
}

async fn daemon(c: cuzk::config::Config) -> (Running, Client) {
    fixtures();
    let running = start(c, cuzk::EngineOptions::default()).await.unwrap();
    let client = connect(
        &running.listen.to_string(),
        running.core.config.daemon.token.as_deref(),
    )
    .await
    .unwrap();
    (running, client)
}

/// Engine options with one fault drill: `kind` at `stage` for jobs whose
/// id contains `job`.
fn one_fault(stage: &str, job: &str, kind: cuzk::faults::FaultKind) -> cuzk::EngineOptions {
    cuzk::EngineOptions {
        faults: vec![cuzk::faults::Fault {
            stage: stage.into(),
            job: job.into(),
            kind,
        }],
        ..Default::default()
    }
}

fn req(kind: ProofKind, id: &str) -> SubmitProofRequest {
    request_from_fixtures(&fixtures().1, kind, id, Priority::Unspecified).unwrap()
}

/// A WinningPoSt that completed, its proof accepted by Filecoin's verifier.
fn assert_winning_proved(r: &cuzk::daemon::proto::AwaitProofResponse) {
    assert_eq!(
        r.status,
        AwaitStatus::Completed as i32,
        "{}",
        r.error_message
    );
    assert!(verify::winning(&r.proof));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rpc_over_tcp_proves_porep_and_winning_post_that_filecoin_accepts() {
    let (running, mut c) = daemon(config("127.0.0.1:0")).await;

    // PreloadSRS by curio's circuit id, then again: already loaded.
    let p = c
        .preload_srs(proto::PreloadSrsRequest {
            circuit_id: "winning-2k".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!p.already_loaded);
    let p = c
        .preload_srs(proto::PreloadSrsRequest {
            circuit_id: "winning-2k".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(p.already_loaded);
    let e = c
        .preload_srs(proto::PreloadSrsRequest {
            circuit_id: "porep-8m".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(
        e.message().contains("missing parameter file"),
        "{}",
        e.message()
    );

    // Prove a WinningPoSt: Filecoin's verifier accepts it, a flipped byte not.
    let r = prove(&mut c, req(ProofKind::WinningPost, "winpost-1000-a")).await;
    assert_winning_proved(&r);
    assert!(!verify::winning(&fil::flipped(&r.proof)));
    assert!(
        r.total_ms >= r.synthesis_ms && r.synthesis_ms > 0 && r.gpu_compute_ms > 0,
        "{r:?}"
    );

    // SubmitProof + AwaitProof a PoRep C2 (curio's wrapper).
    let s = c
        .submit_proof(req(ProofKind::Porep, "porep-1000-1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.job_id, "porep-1000-1");
    let timeout = c
        .await_proof(proto::AwaitProofRequest {
            job_id: s.job_id.clone(),
            timeout_ms: 1,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(timeout.status, AwaitStatus::Timeout as i32);
    let status = c
        .get_status(proto::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    let porep_queue = status
        .queues
        .iter()
        .find(|q| q.proof_kind == "porep")
        .expect("a porep queue");
    assert_eq!(porep_queue.pending + porep_queue.in_progress, 1);
    let r = c
        .await_proof(proto::AwaitProofRequest {
            job_id: s.job_id,
            timeout_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        r.status,
        AwaitStatus::Completed as i32,
        "{}",
        r.error_message
    );
    assert_eq!(r.proof.len(), 192);
    assert!(
        verify::porep(&r.proof),
        "verify_seal accepts the daemon's proof"
    );
    assert!(!verify::porep(&fil::flipped(&r.proof)));

    // GetStatus, GetMetrics.
    let status = c
        .get_status(proto::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.total_proofs_completed, 2);
    assert_eq!(status.gpus.len(), 1, "one (CPU) device");
    let ids: Vec<_> = status
        .loaded_srs
        .iter()
        .map(|s| s.circuit_id.as_str())
        .collect();
    assert!(
        ids.contains(&"winning-2k") && ids.contains(&"porep-2k"),
        "{ids:?}"
    );
    let m = c
        .get_metrics(proto::GetMetricsRequest {})
        .await
        .unwrap()
        .into_inner()
        .prometheus_text;
    assert!(
        m.contains("cuzk_proofs_completed_total") && m.contains("cuzk_daemon_rss_bytes"),
        "{m}"
    );

    // EvictSRS frees it; a second evict finds nothing.
    let ev = c
        .evict_srs(proto::EvictSrsRequest {
            circuit_id: "winning-2k".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ev.was_loaded && ev.freed_bytes > 0);
    let ev = c
        .evict_srs(proto::EvictSrsRequest {
            circuit_id: "winning-2k".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!ev.was_loaded);

    // Unknown job ids.
    let e = c
        .await_proof(proto::AwaitProofRequest {
            job_id: "nope".into(),
            timeout_ms: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let e = c
        .cancel_proof(proto::CancelProofRequest {
            job_id: "nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    running.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unix_socket_serves_window_post_and_ids_are_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("cuzk.sock");
    let (running, mut c) = daemon(config(&format!("unix://{}", sock.display()))).await;
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777,
        0o660
    );

    let a = c
        .submit_proof(req(ProofKind::WindowPost, "wdpost-1000-0-x"))
        .await
        .unwrap()
        .into_inner();
    let b = c
        .submit_proof(req(ProofKind::WindowPost, "wdpost-1000-0-x"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(a.job_id, b.job_id, "the same request id is the same job");
    let r = prove(&mut c, req(ProofKind::WindowPost, "wdpost-1000-0-x")).await;
    assert_eq!(
        r.status,
        AwaitStatus::Completed as i32,
        "{}",
        r.error_message
    );
    assert!(verify::window(&r.proof));
    assert!(!verify::window(&fil::flipped(&r.proof)));
    // Submitted again after it finished: still that job, no second proof.
    let again = c
        .submit_proof(req(ProofKind::WindowPost, "wdpost-1000-0-x"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.job_id, a.job_id);
    let status = c
        .get_status(proto::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status.total_proofs_completed, 1,
        "three submissions of one id, one proof"
    );
    assert_eq!(
        running
            .core
            .engine
            .status()
            .nodes
            .iter()
            .find(|n| n.name == "assemble")
            .unwrap()
            .done,
        1
    );
    running.shutdown(Duration::from_secs(5)).await.unwrap();
    assert!(!sock.exists(), "the socket is removed at shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_required_when_configured_and_for_non_loopback_addresses() {
    let mut cfg = config("127.0.0.1:0");
    cfg.daemon.token = Some("s3cret".into());
    cfg.daemon.status_listen = Some("127.0.0.1:0".parse().unwrap());
    let (running, mut good) = daemon(cfg).await;
    let addr = running.listen.to_string();
    for token in [None, Some("wrong"), Some("s3cret2"), Some("")] {
        let mut bad = connect(&addr, token).await.unwrap();
        // Every RPC, admin ones included, refuses before doing anything.
        let codes = [
            bad.get_status(proto::GetStatusRequest {}).await.map(|_| ()),
            bad.get_metrics(proto::GetMetricsRequest {})
                .await
                .map(|_| ()),
            bad.submit_proof(req(ProofKind::WindowPost, "sneaky"))
                .await
                .map(|_| ()),
            bad.prove(proto::ProveRequest {
                submit: Some(req(ProofKind::WindowPost, "sneaky")),
            })
            .await
            .map(|_| ()),
            bad.await_proof(proto::AwaitProofRequest {
                job_id: "x".into(),
                timeout_ms: 1,
            })
            .await
            .map(|_| ()),
            bad.cancel_proof(proto::CancelProofRequest { job_id: "x".into() })
                .await
                .map(|_| ()),
            bad.preload_srs(proto::PreloadSrsRequest {
                circuit_id: "winning-2k".into(),
            })
            .await
            .map(|_| ()),
            bad.evict_srs(proto::EvictSrsRequest {
                circuit_id: "winning-2k".into(),
            })
            .await
            .map(|_| ()),
        ];
        for (i, c) in codes.into_iter().enumerate() {
            assert_eq!(
                c.unwrap_err().code(),
                Code::Unauthenticated,
                "rpc {i} with {token:?}"
            );
        }
    }
    assert!(
        running.core.srs.entries().is_empty(),
        "nothing was preloaded for an unauthenticated call"
    );

    // The status endpoint is behind the same token, answers loopback host
    // names only, and drops a client that never finishes its headers.
    let web = running.status.unwrap();
    let get = |path: &str, host: &str, auth: &str| {
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Connection: close\r\n\r\n");
        async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut s = tokio::net::TcpStream::connect(web).await.unwrap();
            s.write_all(request.as_bytes()).await.unwrap();
            let mut answer = String::new();
            s.read_to_string(&mut answer).await.unwrap();
            answer[9..12].parse::<u16>().unwrap()
        }
    };
    let host = format!("127.0.0.1:{}", web.port());
    for path in ["/", "/status", "/waterfall.svg", "/metrics"] {
        assert_eq!(get(path, &host, "").await, 401, "{path} without the token");
        assert_eq!(
            get(path, &host, "Authorization: Bearer wrong\r\n").await,
            401,
            "{path}"
        );
        assert_eq!(
            get(path, &host, "Authorization: bearer s3cret\r\n").await,
            200,
            "{path}"
        );
    }
    assert_eq!(
        get("/status?token=s3cret", "localhost", "").await,
        200,
        "a browser's ?token="
    );
    assert_eq!(
        get("/status?token=s3cret", "rebound.example.com", "").await,
        421,
        "DNS rebinding: a foreign host name"
    );
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut slow = tokio::net::TcpStream::connect(web).await.unwrap();
        slow.write_all(b"GET / HTTP/1.1\r\nHo").await.unwrap();
        let mut rest = vec![];
        let closed = tokio::time::timeout(
            cuzk::daemon::web::HEADER_TIMEOUT + Duration::from_secs(5),
            slow.read_to_end(&mut rest),
        )
        .await;
        assert!(
            closed.is_ok(),
            "a slowloris client is dropped after the header timeout"
        );
    }
    assert!(
        running.core.jobs.get("sneaky").is_none(),
        "nothing ran for an unauthenticated call"
    );
    assert!(good.get_status(proto::GetStatusRequest {}).await.is_ok());
    running.shutdown(Duration::from_secs(5)).await.unwrap();

    let err = start(config("0.0.0.0:0"), cuzk::EngineOptions::default())
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(
        format!("{err:#}").contains("refusing to listen on 0.0.0.0:0 without a token"),
        "{err:#}"
    );
    let mut open_status = config("127.0.0.1:0");
    open_status.daemon.status_listen = Some("0.0.0.0:0".parse().unwrap());
    let err = start(open_status, cuzk::EngineOptions::default())
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(
        format!("{err:#}")
            .contains("refusing to serve the status page on 0.0.0.0:0 without a token"),
        "{err:#}"
    );
    // Named client networks let a tokenless daemon listen beyond loopback
    // (Curio on another host); loopback is still served.
    let mut networks = config("0.0.0.0:0");
    networks.daemon.allow_from = vec!["10.0.0.0/8".into()];
    let running = start(networks, cuzk::EngineOptions::default())
        .await
        .unwrap();
    let port = match running.listen {
        cuzk::daemon::Listen::Tcp(a) => a.port(),
        _ => unreachable!(),
    };
    let mut local = connect(&format!("127.0.0.1:{port}"), None).await.unwrap();
    assert!(local.get_status(proto::GetStatusRequest {}).await.is_ok());
    running.shutdown(Duration::from_secs(5)).await.unwrap();
    let mut bad = config("0.0.0.0:0");
    bad.daemon.allow_from = vec!["10.0.0/8".into()];
    let err = start(bad, cuzk::EngineOptions::default())
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(
        format!("{err:#}").contains("daemon.allow_from: `10.0.0/8`"),
        "{err:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_are_invalid_arguments_naming_the_field() {
    let (running, mut c) = daemon(config("127.0.0.1:0")).await;
    let wrapper: serde_json::Value =
        serde_json::from_slice(&fil::read(&fixtures().0.porep.wrapper)).unwrap();
    let mut cases: Vec<(&str, SubmitProofRequest)> = vec![];
    let mut r = req(ProofKind::Porep, "m1");
    r.vanilla_proof.clear();
    cases.push(("vanilla_proof: is empty", r));
    let mut r = req(ProofKind::Porep, "m2");
    r.vanilla_proof = b"{\"SectorNum\": 1, ".to_vec();
    cases.push(("vanilla_proof: the C1 input: is not JSON", r));
    let mut r = req(ProofKind::Porep, "m3");
    let mut w = wrapper.clone();
    w["Phase1Out"] = "@@not base64@@".into();
    r.vanilla_proof = w.to_string().into_bytes();
    cases.push(("Phase1Out: is not base64", r));
    let mut r = req(ProofKind::WindowPost, "m4");
    r.vanilla_proofs[0] = vec![1, 2, 3];
    cases.push((
        "vanilla_proofs[0]: is not a bincode FallbackPoStSectorProof",
        r,
    ));
    let mut r = req(ProofKind::WindowPost, "m5");
    r.vanilla_proofs.clear();
    cases.push(("vanilla_proofs: is empty", r));
    let mut r = req(ProofKind::Porep, "m6");
    r.vanilla_proofs = vec![vec![1]];
    cases.push(("is proof_kind right?", r));
    let mut r = req(ProofKind::WinningPost, "m7");
    r.registered_proof = 77;
    cases.push(("registered_proof: 77 is not a registered PoSt proof", r));
    let mut r = req(ProofKind::WinningPost, "m8");
    r.registered_proof = 10; // a Window PoSt proof for a Winning request
    cases.push(("is not a Winning PoSt", r));
    let mut r = req(ProofKind::Porep, "m9");
    r.sector_size = 8 << 20;
    cases.push(("does not match the proof's 2KiB sector", r));
    let mut r = req(ProofKind::Snap, "m10");
    r.comm_r_new = vec![9; 5];
    cases.push(("comm_r_new: is 5 bytes", r));
    let mut r = req(ProofKind::WindowPost, "m11");
    r.proof_kind = 0;
    cases.push(("proof_kind: is unspecified", r));
    for (want, r) in cases {
        let e = c.submit_proof(r).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{want}: {}", e.message());
        assert!(
            e.message().contains(want),
            "wanted `{want}` in: {}",
            e.message()
        );
    }
    let e = c
        .prove(proto::ProveRequest { submit: None })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    // The daemon goes on: the next job proves.
    let r = prove(&mut c, req(ProofKind::WindowPost, "after")).await;
    assert!(verify::window(&r.proof), "{}", r.error_message);
    running.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Host bytes of one partition of a kind's circuit at 2 KiB.
fn partition_bytes(kind: ProofKind) -> u64 {
    let path = cuzk::filecoin::params::require(kind, fil::SIZE).unwrap();
    let srs = cuzk::stages::Srs::read(&path, false).unwrap();
    cuzk::stages::partition::PartitionLayout::new(srs.shape()).bytes as u64
}

fn srs_bytes(kind: ProofKind) -> u64 {
    let path = cuzk::filecoin::params::require(kind, fil::SIZE).unwrap();
    cuzk::stages::Srs::read(&path, false)
        .unwrap()
        .memory_bytes() as u64
}

/// A PoRep admitted alone beyond the memory budget (as a 32 GiB PoRep is
/// on a 128 GiB host) leaves WinningPoSt the room held back for PoSt: the
/// WinningPoSt is admitted and proves while the PoRep still runs (here it
/// hangs in synthesis until cancelled), instead of waiting for it to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_porep_beyond_the_budget_leaves_winning_post_its_reserve() {
    use cuzk::faults::FaultKind;
    fixtures();
    let (porep, winning) = (
        partition_bytes(ProofKind::Porep),
        partition_bytes(ProofKind::WinningPost),
    );
    let srs = srs_bytes(ProofKind::Porep) + srs_bytes(ProofKind::WinningPost);
    let mut cfg = config("127.0.0.1:0");
    // Half a PoRep partition beside the parameters: the PoRep gets in only
    // because nothing else holds memory. A quarter of the budget (the
    // reserve's bound) still holds a WinningPoSt.
    let budget = srs + porep / 2;
    assert!(budget / 4 >= winning, "the reserve holds a WinningPoSt");
    cfg.memory.budget = cuzk::config::ByteSize(budget);
    let options = one_fault("synth", "porep-beyond", FaultKind::HangUntilCancel);
    let running = start(cfg, options).await.unwrap();
    let mut c = connect(&running.listen.to_string(), None).await.unwrap();
    let core = running.core.clone();
    let id = "porep-beyond-1000";
    c.submit_proof(req(ProofKind::Porep, id)).await.unwrap();
    while !core.jobs.get(id).unwrap().is_running() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Without the reserve it would wait for the PoRep, which never ends.
    let r = tokio::time::timeout(
        Duration::from_secs(120),
        prove(&mut c, req(ProofKind::WinningPost, "winpost-1000-beside")),
    )
    .await
    .expect("the WinningPoSt is admitted beside the PoRep, not after it");
    assert_winning_proved(&r);
    assert!(
        core.jobs.get(id).unwrap().is_running(),
        "the PoRep still runs: the WinningPoSt did not wait for it"
    );
    c.cancel_proof(proto::CancelProofRequest { job_id: id.into() })
        .await
        .unwrap();
    let r = c
        .await_proof(proto::AwaitProofRequest {
            job_id: id.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        r.status,
        AwaitStatus::Cancelled as i32,
        "{}",
        r.error_message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn winning_post_overtakes_queued_porep_and_cancel_frees_arenas() {
    fixtures();
    // Room for one PoRep partition and one WinningPoSt partition at a time.
    let mut cfg = config("127.0.0.1:0");
    let (porep, winning) = (
        partition_bytes(ProofKind::Porep),
        partition_bytes(ProofKind::WinningPost),
    );
    // One account: the loaded parameters and the queued inputs come out of
    // the budget too.
    let inputs = 20 * req(ProofKind::Porep, "x").vanilla_proof.len() as u64
        + req(ProofKind::WinningPost, "x")
            .vanilla_proofs
            .iter()
            .map(|p| p.len() as u64)
            .sum::<u64>();
    let srs = srs_bytes(ProofKind::Porep) + srs_bytes(ProofKind::WinningPost);
    cfg.memory.budget = cuzk::config::ByteSize(porep + winning + srs + inputs + (1 << 20));
    // Nothing held back for PoSt: the WinningPoSt gets in past the queued
    // seals by priority alone. And seconds of waiting age the seals by
    // levels, which must not put them ahead of it.
    cfg.daemon.reserve_post = cuzk::config::ByteSize(0);
    cfg.daemon.aging_s = 1;
    let (running, mut c) = daemon(cfg).await;
    let core = running.core.clone();
    for circuit in ["porep-2k", "winning-2k"] {
        c.preload_srs(proto::PreloadSrsRequest {
            circuit_id: circuit.into(),
        })
        .await
        .unwrap();
    }
    let porep_ids: Vec<String> = (0..20).map(|i| format!("porep-1000-{i}")).collect();
    for id in &porep_ids {
        c.submit_proof(req(ProofKind::Porep, id)).await.unwrap();
    }
    // Wait until the first PoRep runs: the others wait for memory.
    while !core.jobs.get(&porep_ids[0]).unwrap().is_running() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pending = || -> Vec<String> {
        porep_ids
            .iter()
            .filter(|id| core.jobs.get(id).unwrap().is_pending())
            .cloned()
            .collect()
    };
    assert_eq!(pending().len(), 19, "budget admits one PoRep at a time");
    // Five levels of aging: NORMAL would pass CRITICAL without the ceiling
    // (a PoRep or two may finish meanwhile, one at a time).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let queued = pending();
    assert!(queued.len() >= 15, "{} still queued", queued.len());

    let r = prove(&mut c, req(ProofKind::WinningPost, "winpost-1000-urgent")).await;
    assert_winning_proved(&r);
    for id in &queued {
        assert!(
            core.jobs.get(id).unwrap().outcome().is_none(),
            "the WinningPoSt finished before PoRep {id}, aged ahead of it"
        );
    }

    // Cancel every unfinished PoRep, in submission order: the running one
    // first (mid-flight), then the queued ones (one may be admitted in
    // between, and is then cancelled mid-flight too). Those that finished
    // before verify.
    let mut mid_flight = 0;
    for id in &porep_ids {
        if core.jobs.get(id).unwrap().outcome().is_some() {
            continue;
        }
        let r = c
            .cancel_proof(proto::CancelProofRequest { job_id: id.clone() })
            .await
            .unwrap()
            .into_inner();
        mid_flight += usize::from(r.was_running);
    }
    assert!(mid_flight >= 1, "a PoRep was cancelled mid-flight");
    let mut finished = 0;
    for id in &porep_ids {
        let r = c
            .await_proof(proto::AwaitProofRequest {
                job_id: id.clone(),
                timeout_ms: 0,
            })
            .await
            .unwrap()
            .into_inner();
        if r.status == AwaitStatus::Completed as i32 {
            assert!(verify::porep(&r.proof), "{id}");
            finished += 1;
        } else {
            assert_eq!(
                r.status,
                AwaitStatus::Cancelled as i32,
                "{id}: {}",
                r.error_message
            );
        }
    }
    assert!(
        finished <= porep_ids.len() - queued.len() + 1,
        "{finished} finished"
    );
    core.engine.idle().await;
    let arenas = core.engine.arena_stats();
    assert_eq!(
        arenas.in_use, 0,
        "cancelled partitions gave their arenas back"
    );
    assert_eq!(
        core.in_flight.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "and their admitted bytes"
    );
    let status = c
        .get_status(proto::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (status.total_proofs_completed, status.total_proofs_failed),
        (1 + finished as u64, 0)
    );
    running.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_drops_its_prove_call_cancels_the_job() {
    let (running, c) = daemon(config("127.0.0.1:0")).await;
    let core = running.core.clone();
    let call = {
        let mut c = c.clone();
        tokio::spawn(async move { prove(&mut c, req(ProofKind::Porep, "porep-dropped")).await })
    };
    let started = std::time::Instant::now();
    while !core
        .jobs
        .get("porep-dropped")
        .is_some_and(|j| j.is_running())
    {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the job never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The client goes away mid-proof (Curio's ProveTimeout, a restart).
    call.abort();
    let job = core.jobs.get("porep-dropped").unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(60), job.wait(None))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        outcome.ending,
        cuzk::daemon::jobs::Ending::Cancelled,
        "{}",
        outcome.error
    );
    core.engine.idle().await;
    assert_eq!(core.engine.arena_stats().in_use, 0);
    // Curio retries with the same request id: a fresh job, not the cancelled one.
    let mut c = c;
    c.submit_proof(req(ProofKind::Porep, "porep-dropped"))
        .await
        .unwrap();
    let retry = core.jobs.get("porep-dropped").unwrap();
    assert!(!std::sync::Arc::ptr_eq(&retry, &job) && retry.outcome().is_none());
    c.cancel_proof(proto::CancelProofRequest {
        job_id: "porep-dropped".into(),
    })
    .await
    .unwrap();
    // And the daemon goes on proving.
    let r = prove(&mut c, req(ProofKind::WinningPost, "winpost-after-drop")).await;
    assert!(verify::winning(&r.proof), "{}", r.error_message);
    running.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_id_names_a_job_only_with_its_inputs() {
    let (running, mut c) = daemon(config("127.0.0.1:0")).await;
    let assembled = |r: &Running| {
        r.core
            .engine
            .status()
            .nodes
            .iter()
            .find(|n| n.name == "assemble")
            .unwrap()
            .done
    };

    // 32 concurrent calls of one id and one payload: one job, one proof.
    let calls: Vec<_> = (0..32)
        .map(|_| {
            let mut c = c.clone();
            tokio::spawn(async move { prove(&mut c, req(ProofKind::WindowPost, "sector-7")).await })
        })
        .collect();
    let mut proofs = vec![];
    for call in calls {
        let r = call.await.unwrap();
        assert_eq!(
            r.status,
            AwaitStatus::Completed as i32,
            "{}",
            r.error_message
        );
        assert_eq!(r.job_id, "sector-7");
        proofs.push(r.proof);
    }
    assert!(proofs.windows(2).all(|w| w[0] == w[1]), "byte-identical");
    assert!(verify::window(&proofs[0]));
    assert_eq!(assembled(&running), 1, "one engine job for 32 calls");

    // The same id with other inputs (a redo, or another client's request):
    // a new job with an id of its own, whose proof verifies for *its*
    // request; the first proof is never returned for it.
    let other = prove(&mut c, req(ProofKind::WinningPost, "sector-7")).await;
    assert_eq!(
        other.status,
        AwaitStatus::Completed as i32,
        "{}",
        other.error_message
    );
    assert_ne!(other.job_id, "sector-7");
    assert!(other.job_id.starts_with("sector-7@"), "{}", other.job_id);
    assert_ne!(other.proof, proofs[0]);
    assert!(
        verify::winning(&other.proof),
        "the proof is for the request that got it"
    );
    assert_eq!(assembled(&running), 2);
    // Each id still answers with its own job's proof, and the first inputs
    // again are the first job.
    let first = c
        .await_proof(proto::AwaitProofRequest {
            job_id: "sector-7".into(),
            timeout_ms: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.proof, proofs[0]);
    let again = c
        .submit_proof(req(ProofKind::WindowPost, "sector-7"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.job_id, "sector-7");
    let again = c
        .submit_proof(req(ProofKind::WinningPost, "sector-7"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.job_id, other.job_id);
    assert_eq!(assembled(&running), 2, "no proof made twice");

    // Ids clients cannot send: log injection, floods, our own separator.
    for (id, want) in [
        ("a\nb", "request_id: contains"),
        ("x@y", "request_id: contains '@'"),
        (&"x".repeat(300)[..], "request_id: is 300 bytes"),
    ] {
        let e = c
            .submit_proof(req(ProofKind::WinningPost, id))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains(want), "{}", e.message());
    }

    // Id-less requests get ids that a restart does not hand out again.
    let before = c
        .submit_proof(req(ProofKind::WinningPost, ""))
        .await
        .unwrap()
        .into_inner()
        .job_id;
    let cfg = running.core.config.clone();
    running.shutdown(Duration::from_secs(60)).await.unwrap();
    let (running, mut c) = daemon(cfg).await;
    let after = c
        .submit_proof(req(ProofKind::WinningPost, ""))
        .await
        .unwrap()
        .into_inner()
        .job_id;
    assert!(before.starts_with("winning-post-auto-"), "{before}");
    assert_ne!(before, after, "auto ids are unique across restarts");
    let e = c
        .await_proof(proto::AwaitProofRequest {
            job_id: before,
            timeout_ms: 1,
        })
        .await
        .unwrap_err();
    assert_eq!(
        e.code(),
        Code::NotFound,
        "a pre-restart id names nothing now"
    );
    running.shutdown(Duration::from_secs(60)).await.unwrap();
}

/// One malformed request of the chaos mix and the words its refusal names.
fn malformed(which: usize) -> (SubmitProofRequest, &'static str) {
    let mut r = req(ProofKind::Porep, &format!("bad-{which}"));
    let want = match which % 5 {
        0 => {
            r = req(ProofKind::WindowPost, "bad-vanilla");
            r.vanilla_proofs[0] = vec![1, 2, 3];
            "vanilla_proofs[0]: is not a bincode"
        }
        1 => {
            // Two bytes an element: a generic JSON tree would take 16 times it.
            r.vanilla_proof = format!("[{}0]", "0,".repeat(1 << 19)).into_bytes();
            "vanilla_proof: the C1 input: is not a JSON object"
        }
        2 => {
            r.vanilla_proof = format!("{}{}", "[".repeat(200), "]".repeat(200)).into_bytes();
            "vanilla_proof: the C1 input"
        }
        3 => {
            r.request_id = "porep-1\u{1b}[31m-forged".into();
            "request_id: contains"
        }
        _ => {
            r.registered_proof = 99;
            "registered_proof: 99"
        }
    };
    (r, want)
}

/// Mixed traffic from concurrent clients, seeded: PoSt proofs under fresh
/// ids, the same ids again, one id shared by requests with other inputs,
/// malformed requests, cancels, parameter eviction and reloading while jobs
/// run, and status polls throughout. Every completed proof must verify for
/// the request that received it (I1); every accepted call answers once,
/// never FAILED here and CANCELLED only when someone cancelled that job
/// (I2); GetStatus answers within a second all along (I3); once quiet,
/// nothing is held (I4); every malformed request is INVALID_ARGUMENT
/// naming what is wrong (I6).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_chaos_keeps_every_invariant() {
    use rand::{Rng, SeedableRng};
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    let (running, c) = daemon(config("127.0.0.1:0")).await;
    let core = running.core.clone();
    let cancelled: Arc<Mutex<HashSet<String>>> = Arc::default();
    let quiet = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (mut c, quiet) = (c.clone(), quiet.clone());
        tokio::spawn(async move {
            let mut slowest = Duration::ZERO;
            while !quiet.load(Ordering::SeqCst) {
                let t = std::time::Instant::now();
                c.get_status(proto::GetStatusRequest {}).await.unwrap();
                slowest = slowest.max(t.elapsed());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            slowest
        })
    };
    let clients: Vec<_> = (0..6u64)
        .map(|k| {
            let (mut c, cancelled) = (c.clone(), cancelled.clone());
            tokio::spawn(async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(k);
                let mut mine: Vec<(String, ProofKind)> = vec![];
                let (mut proved, mut refused) = (0, 0);
                for step in 0..10 {
                    let kind = if rng.gen_bool(0.5) {
                        ProofKind::WindowPost
                    } else {
                        ProofKind::WinningPost
                    };
                    let roll = rng.gen_range(0..100);
                    let (id, kind) = match roll {
                        0..55 => (format!("chaos-{k}-{step}"), kind),
                        55..68 if !mine.is_empty() => mine[rng.gen_range(0..mine.len())].clone(),
                        55..80 => (format!("chaos-shared-{}", rng.gen_range(0..3)), kind),
                        80..92 => {
                            let (r, want) = malformed(rng.gen_range(0..5));
                            let e = c.submit_proof(r).await.unwrap_err();
                            assert_eq!(e.code(), Code::InvalidArgument, "{}", e.message());
                            assert!(e.message().contains(want), "{want}: {}", e.message());
                            refused += 1;
                            continue;
                        }
                        92..96 => {
                            if let Some((id, _)) = mine.get(rng.gen_range(0..mine.len().max(1))) {
                                cancelled.lock().unwrap().insert(id.clone());
                                let _ = c
                                    .cancel_proof(proto::CancelProofRequest { job_id: id.clone() })
                                    .await;
                            }
                            continue;
                        }
                        _ => {
                            if rng.gen_bool(0.5) {
                                c.evict_srs(proto::EvictSrsRequest {
                                    circuit_id: "winning-2k".into(),
                                })
                                .await
                                .unwrap();
                            } else {
                                c.preload_srs(proto::PreloadSrsRequest {
                                    circuit_id: "winning-2k".into(),
                                })
                                .await
                                .unwrap();
                            }
                            let e = c
                                .preload_srs(proto::PreloadSrsRequest {
                                    circuit_id: "/etc/passwd".into(),
                                })
                                .await
                                .unwrap_err();
                            assert_eq!(e.code(), Code::InvalidArgument);
                            assert!(
                                e.message()
                                    .contains("is not a .params file in the parameter cache")
                            );
                            continue;
                        }
                    };
                    let r = prove(&mut c, req(kind, &id)).await;
                    match AwaitStatus::try_from(r.status).unwrap() {
                        AwaitStatus::Completed => {
                            let ok = match kind {
                                ProofKind::WindowPost => verify::window(&r.proof),
                                _ => verify::winning(&r.proof),
                            };
                            assert!(ok, "{} ({kind}) got a proof that is not its own", r.job_id);
                            proved += 1;
                        }
                        AwaitStatus::Cancelled => assert!(
                            cancelled.lock().unwrap().contains(&r.job_id),
                            "{} was cancelled by no one",
                            r.job_id
                        ),
                        other => panic!("{}: {other:?}: {}", r.job_id, r.error_message),
                    }
                    mine.push((r.job_id.clone(), kind));
                }
                (proved, refused)
            })
        })
        .collect();
    let (mut proved, mut refused) = (0, 0);
    for client in clients {
        let (p, r) = client.await.unwrap();
        proved += p;
        refused += r;
    }
    quiet.store(true, Ordering::SeqCst);
    let slowest = watcher.await.unwrap();
    eprintln!(
        "chaos: {proved} proofs verified, {refused} malformed refused, slowest GetStatus {slowest:?}"
    );
    assert!(
        proved >= 20 && refused >= 3,
        "the mix ran ({proved}, {refused})"
    );
    assert!(
        slowest < Duration::from_secs(1),
        "GetStatus took {slowest:?}"
    );
    core.engine.idle().await;
    assert_eq!(core.engine.arena_stats().in_use, 0, "arenas back");
    assert_eq!(core.in_flight.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(core.queue.lock().unwrap().is_empty());
    assert!(
        core.jobs.all().iter().all(|j| j.outcome().is_some()),
        "every job ended"
    );
    running.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Fault drills at every stage and at the daemon's own points, each on its
/// own job, with bystander jobs beside them: each drilled job ends as its
/// fault says (FAILED naming the fault, CANCELLED once cancelled, or proven
/// after a delay), a corrupted proof is FAILED by Filecoin's verifier and
/// never COMPLETED, every bystander's proof verifies, and nothing is held
/// afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_drills_fail_only_their_jobs_and_bystanders_verify() {
    use cuzk::faults::{Fault, FaultKind};
    let fault = |stage: &str, kind: FaultKind, tag: &str| Fault {
        stage: stage.into(),
        job: format!("drill-{stage}-{tag}"),
        kind,
    };
    let mut faults = vec![];
    // (job id, what its answer must be: status and words in its error)
    let mut expect: Vec<(String, AwaitStatus, &str)> = vec![];
    for stage in ["synth", "prep_msm", "gpu_ntt_msm", "b_g2_msm", "assemble"] {
        let mut kinds = vec![
            (
                FaultKind::Panic,
                "panic",
                AwaitStatus::Failed,
                "injected panic",
            ),
            (
                FaultKind::Error,
                "error",
                AwaitStatus::Failed,
                "injected error",
            ),
            (
                FaultKind::HangUntilCancel,
                "hang",
                AwaitStatus::Cancelled,
                "",
            ),
        ];
        if matches!(stage, "gpu_ntt_msm" | "b_g2_msm") {
            kinds.push((
                FaultKind::DeviceFault,
                "device",
                AwaitStatus::Failed,
                "injected device fault",
            ));
        }
        for (kind, tag, status, words) in kinds {
            faults.push(fault(stage, kind, tag));
            expect.push((format!("drill-{stage}-{tag}"), status, words));
        }
    }
    faults.push(fault(
        "synth",
        FaultKind::Delay(Duration::from_secs(2)),
        "delay",
    ));
    expect.push(("drill-synth-delay".into(), AwaitStatus::Completed, ""));
    faults.push(fault("assemble", FaultKind::CorruptProof, "corrupt"));
    expect.push((
        "drill-assemble-corrupt".into(),
        AwaitStatus::Failed,
        "does not pass Filecoin's verification",
    ));
    faults.push(fault("daemon.complete", FaultKind::Panic, "panic"));
    expect.push((
        "drill-daemon.complete-panic".into(),
        AwaitStatus::Failed,
        "completion task",
    ));
    faults.push(fault("daemon.admit", FaultKind::Panic, "panic"));
    expect.push((
        "drill-daemon.admit-panic".into(),
        AwaitStatus::Failed,
        "admitting this job",
    ));

    fixtures();
    let options = cuzk::EngineOptions {
        faults,
        ..Default::default()
    };
    let running = start(config("127.0.0.1:0"), options).await.unwrap();
    let c = connect(&running.listen.to_string(), None).await.unwrap();
    let calls: Vec<_> = expect
        .iter()
        .map(|(id, _, _)| (id.clone(), ProofKind::WinningPost))
        .chain((0..3).map(|i| (format!("bystander-{i}"), ProofKind::WindowPost)))
        .map(|(id, kind)| {
            let mut c = c.clone();
            tokio::spawn(async move { prove(&mut c, req(kind, &id)).await })
        })
        .collect();
    // The hung ones are cancelled, wherever they are by then.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut c2 = c.clone();
    for (id, status, _) in &expect {
        if *status == AwaitStatus::Cancelled {
            c2.cancel_proof(proto::CancelProofRequest { job_id: id.clone() })
                .await
                .unwrap();
        }
    }
    let answers = tokio::time::timeout(Duration::from_secs(300), async {
        let mut answers = vec![];
        for call in calls {
            answers.push(call.await.unwrap());
        }
        answers
    })
    .await
    .expect("every drilled and bystander job is answered");
    for (r, (id, status, words)) in answers.iter().zip(&expect) {
        assert_eq!(&r.job_id, id);
        assert_eq!(
            AwaitStatus::try_from(r.status).unwrap(),
            *status,
            "{id}: {}",
            r.error_message
        );
        assert!(r.error_message.contains(words), "{id}: {}", r.error_message);
        if *status == AwaitStatus::Completed {
            assert!(verify::winning(&r.proof), "{id}");
        } else {
            assert!(r.proof.is_empty(), "{id} carries no proof");
        }
    }
    for r in &answers[expect.len()..] {
        assert_eq!(
            r.status,
            AwaitStatus::Completed as i32,
            "{}: {}",
            r.job_id,
            r.error_message
        );
        assert!(verify::window(&r.proof), "bystander {} verifies", r.job_id);
    }
    let core = running.core.clone();
    core.engine.idle().await;
    assert_eq!(core.engine.arena_stats().in_use, 0, "arenas back");
    assert_eq!(
        core.in_flight.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "admitted bytes back"
    );
    // The daemon goes on: a clean WinningPoSt proves.
    let mut c = c;
    let r = prove(&mut c, req(ProofKind::WinningPost, "after-drills")).await;
    assert!(verify::winning(&r.proof), "{}", r.error_message);
    running.shutdown(Duration::from_secs(10)).await.unwrap();
}

/// The inner C1 JSON of the fixture's wrapper, changed by `f`, wrapped again.
fn rewrapped(f: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut w: serde_json::Value =
        serde_json::from_slice(&fil::read(&fixtures().0.porep.wrapper)).unwrap();
    let mut inner: serde_json::Value =
        serde_json::from_slice(&b64.decode(w["Phase1Out"].as_str().unwrap()).unwrap()).unwrap();
    f(&mut inner);
    w["Phase1Out"] = b64.encode(inner.to_string()).into();
    w.to_string().into_bytes()
}

/// The fixture's wrapper with its field `key` set to `value`.
fn wrapper_with(key: &str, value: serde_json::Value) -> Vec<u8> {
    let mut w: serde_json::Value =
        serde_json::from_slice(&fil::read(&fixtures().0.porep.wrapper)).unwrap();
    w[key] = value;
    w.to_string().into_bytes()
}

/// Winning PoSt's leaf challenge `n` at 2 KiB (64 leaves), as Filecoin
/// derives it: SHA-256(randomness ‖ sector id ‖ n), first 8 bytes.
fn winning_challenge(randomness: &[u8], sector: u64, n: u64) -> u64 {
    use sha2::{Digest, Sha256};
    let h = Sha256::new()
        .chain_update(randomness)
        .chain_update(sector.to_le_bytes())
        .chain_update(n.to_le_bytes())
        .finalize();
    u64::from_le_bytes(h[..8].try_into().unwrap()) % 64
}

/// Other randomness whose first challenged leaf is the request's own but
/// whose second is not: a check of the first challenge alone passes it.
fn same_first_challenge(r: &SubmitProofRequest) -> Vec<u8> {
    // bincode's FallbackPoStSectorProof begins with its sector id.
    let sector = u64::from_le_bytes(r.vanilla_proofs[0][..8].try_into().unwrap());
    let first = |x: &[u8], n| winning_challenge(x, sector, n);
    // Each variant qualifies with odds 63/4096: over one byte's 255 the
    // search missed about one fixture in fifty (the randomness is fresh per
    // fixture); over two bytes' 65,535 it misses about e^-1000 of the time.
    // The two low bytes keep the value below the field's modulus.
    (1..=u16::MAX)
        .map(|b| {
            let mut x = r.randomness.clone();
            x[0] ^= b as u8;
            x[1] ^= (b >> 8) as u8;
            x
        })
        .find(|x| first(x, 0) == first(&r.randomness, 0) && first(x, 1) != first(&r.randomness, 1))
        .expect("one of 65,535 variants shares the first of 64 leaves")
}

/// The malformed catalogue: (what it is, the request, words its refusal
/// must contain). Every one is INVALID_ARGUMENT.
fn catalogue() -> Vec<(&'static str, SubmitProofRequest, &'static str)> {
    let porep = || req(ProofKind::Porep, "cat-porep");
    let window = || req(ProofKind::WindowPost, "cat-window");
    let winning = || req(ProofKind::WinningPost, "cat-winning");
    let snap = || req(ProofKind::Snap, "cat-snap");
    let with = |mut r: SubmitProofRequest, f: &dyn Fn(&mut SubmitProofRequest)| {
        f(&mut r);
        r
    };
    let bincode_junk: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
    vec![
        // The envelope.
        (
            "kind 0",
            with(window(), &|r| r.proof_kind = 0),
            "proof_kind: is unspecified",
        ),
        (
            "kind 99",
            with(window(), &|r| r.proof_kind = 99),
            "proof_kind: 99 is not a proof kind",
        ),
        (
            "priority 99",
            with(window(), &|r| r.priority = 99),
            "priority: 99 is not a priority",
        ),
        (
            "1 MiB request id",
            with(window(), &|r| r.request_id = "x".repeat(1 << 20)),
            "request_id: is 1048576 bytes",
        ),
        (
            "newline in the id",
            with(window(), &|r| r.request_id = "a\nforged log line".into()),
            "request_id: contains",
        ),
        (
            "ANSI escapes in the id",
            with(window(), &|r| r.request_id = "a\u{1b}[2J".into()),
            "request_id: contains",
        ),
        (
            "our separator in the id",
            with(window(), &|r| r.request_id = "a@b".into()),
            "request_id: contains '@'",
        ),
        (
            "PoRep sector size mismatch",
            with(porep(), &|r| r.sector_size = 8 << 20),
            "does not match the proof's 2KiB sector",
        ),
        (
            "PoSt sector size mismatch",
            with(window(), &|r| r.sector_size = 32 << 30),
            "does not match the proof's 2KiB sector",
        ),
        // PoRep.
        (
            "PoRep empty",
            with(porep(), &|r| r.vanilla_proof.clear()),
            "vanilla_proof: is empty",
        ),
        (
            "PoRep not JSON",
            with(porep(), &|r| r.vanilla_proof = b"\x00\x01binary".to_vec()),
            "vanilla_proof: the C1 input: is not JSON",
        ),
        (
            "PoRep 8 MiB of [0,0,...]",
            with(porep(), &|r| {
                r.vanilla_proof = format!("[{}0]", "0,".repeat(4 << 20)).into_bytes()
            }),
            "is not a JSON object",
        ),
        (
            "PoRep nested 200 deep",
            with(porep(), &|r| {
                r.vanilla_proof = format!("{}{}", "[".repeat(200), "]".repeat(200)).into_bytes()
            }),
            "is not a JSON object",
        ),
        (
            "PoRep nested a million deep",
            with(porep(), &|r| {
                r.vanilla_proof =
                    format!("{}{}", "[".repeat(1_000_000), "]".repeat(1_000_000)).into_bytes()
            }),
            "is not a JSON object",
        ),
        (
            "PoRep trailing bytes",
            with(porep(), &|r| r.vanilla_proof.extend_from_slice(b" {}")),
            "is not JSON: trailing characters",
        ),
        (
            "Phase1Out not base64",
            with(porep(), &|r| {
                r.vanilla_proof = wrapper_with("Phase1Out", "@@not base64@@".into())
            }),
            "Phase1Out: is not base64",
        ),
        (
            "Phase1Out base64 of junk",
            with(porep(), &|r| {
                r.vanilla_proof = wrapper_with("Phase1Out", "QUJDREVGRw==".into())
            }),
            "the C1 output inside the wrapper: is not a SealCommitPhase1Output",
        ),
        (
            "wrapper SectorSize mismatch",
            with(porep(), &|r| {
                r.vanilla_proof = wrapper_with("SectorSize", (8u64 << 20).into())
            }),
            "the wrapper declares a 8MiB sector",
        ),
        (
            "wrapper for another sector",
            with(porep(), &|r| r.sector_number += 1),
            "was asked for but the wrapper is for sector",
        ),
        (
            "C1 for another miner",
            with(porep(), &|r| r.miner_id += 1),
            "was not made for miner",
        ),
        (
            "PoRep registered proof 99",
            with(porep(), &|r| r.registered_proof = 99),
            "registered_proof: 99",
        ),
        (
            "PoRep with vanilla_proofs",
            with(porep(), &|r| r.vanilla_proofs = vec![vec![1]]),
            "is proof_kind right?",
        ),
        (
            "comm_r all zeros",
            with(porep(), &|r| {
                r.vanilla_proof = rewrapped(|c| c["comm_r"] = serde_json::json!(vec![0u8; 32]))
            }),
            "comm_r is all zeroes",
        ),
        (
            "seed all zeros",
            with(porep(), &|r| {
                r.vanilla_proof = rewrapped(|c| c["seed"] = serde_json::json!(vec![0u8; 32]))
            }),
            "seed is all zeroes",
        ),
        (
            "C1 without a seed",
            with(porep(), &|r| {
                r.vanilla_proof = rewrapped(|c| {
                    c.as_object_mut().unwrap().remove("seed");
                })
            }),
            "is not a SealCommitPhase1Output",
        ),
        (
            "C1 with another replica id",
            with(porep(), &|r| {
                r.vanilla_proof = rewrapped(|c| c["replica_id"] = serde_json::json!(vec![1u8; 32]))
            }),
            "replica id",
        ),
        // PoSt.
        (
            "Window no vanilla proofs",
            with(window(), &|r| r.vanilla_proofs.clear()),
            "vanilla_proofs: is empty",
        ),
        (
            "Window 100000 empty elements",
            with(window(), &|r| r.vanilla_proofs = vec![vec![]; 100_000]),
            "vanilla_proofs[0]: is empty",
        ),
        (
            "Window 1000 sectors",
            with(window(), &|r| {
                r.vanilla_proofs = vec![r.vanilla_proofs[0].clone(); 1000]
            }),
            "one Window partition holds at most",
        ),
        (
            "Window junk bincode",
            with(window(), &|r| r.vanilla_proofs[0] = bincode_junk.clone()),
            "vanilla_proofs[0]: is not a bincode FallbackPoStSectorProof",
        ),
        (
            "Window trailing bytes",
            with(window(), &|r| {
                r.vanilla_proofs[0].extend_from_slice(&[0; 9])
            }),
            "vanilla_proofs[0]: is not a bincode",
        ),
        (
            "Window comm_r altered",
            with(window(), &|r| r.vanilla_proofs[0][8] ^= 1),
            "do not verify",
        ),
        (
            "Window length prefix 2^62",
            with(window(), &|r| {
                r.vanilla_proofs[0][40..48].copy_from_slice(&(1u64 << 62).to_le_bytes())
            }),
            "vanilla_proofs[0]: is not a bincode",
        ),
        (
            "Window truncated",
            with(window(), &|r| {
                let n = r.vanilla_proofs[0].len() / 2;
                r.vanilla_proofs[0].truncate(n);
            }),
            "vanilla_proofs[0]: is not a bincode",
        ),
        (
            "Window with vanilla_proof",
            with(window(), &|r| r.vanilla_proof = b"{}".to_vec()),
            "is set, but WindowPoSt's vanilla proofs",
        ),
        (
            "Window with a Winning proof type",
            with(window(), &|r| {
                r.registered_proof = winning().registered_proof
            }),
            "is not a Window PoSt",
        ),
        (
            "Window registered proof 77",
            with(window(), &|r| r.registered_proof = 77),
            "registered_proof: 77 is not a registered PoSt proof",
        ),
        (
            "Winning two sectors",
            with(winning(), &|r| {
                r.vanilla_proofs.push(r.vanilla_proofs[0].clone())
            }),
            "Winning PoSt proves exactly",
        ),
        (
            "Winning with a Window proof type",
            with(winning(), &|r| {
                r.registered_proof = window().registered_proof
            }),
            "is not a Winning PoSt",
        ),
        (
            "Winning 31-byte randomness",
            with(winning(), &|r| r.randomness.truncate(31)),
            "randomness: is 31 bytes",
        ),
        (
            "Winning other randomness",
            with(winning(), &|r| r.randomness[0] ^= 1),
            "does not verify",
        ),
        (
            "Winning other randomness with the same first challenge",
            with(winning(), &|r| r.randomness = same_first_challenge(r)),
            "does not verify",
        ),
        (
            "Winning randomness not a field element",
            with(winning(), &|r| r.randomness = vec![0xff; 32]),
            "randomness",
        ),
        // SnapDeals.
        (
            "Snap one partition too many",
            with(snap(), &|r| {
                r.vanilla_proofs.push(r.vanilla_proofs[0].clone());
            }),
            "partition proofs;",
        ),
        (
            "Snap comm_r_old empty",
            with(snap(), &|r| r.comm_r_old.clear()),
            "comm_r_old: is empty",
        ),
        (
            "Snap comm_r_old 31 bytes",
            with(snap(), &|r| r.comm_r_old.truncate(31)),
            "comm_r_old: is 31 bytes",
        ),
        (
            "Snap comm_r_new 33 bytes",
            with(snap(), &|r| r.comm_r_new.push(0)),
            "comm_r_new: is 33 bytes",
        ),
        (
            "Snap junk bincode",
            with(snap(), &|r| r.vanilla_proofs[0] = bincode_junk.clone()),
            "vanilla_proofs[0]: is not a bincode partition proof",
        ),
        (
            "Snap comm_d_new not a field element",
            with(snap(), &|r| r.comm_d_new = vec![0xff; 32]),
            "comm_d_new",
        ),
        (
            "Snap registered proof 99",
            with(snap(), &|r| r.registered_proof = 99),
            "registered_proof: 99",
        ),
    ]
}

/// Every malformed class, over TCP and over a unix socket: INVALID_ARGUMENT
/// naming what is wrong, nothing queued, GetStatus answering within a
/// second after each; the admin calls refuse bad names; valid requests
/// (a commitment sent as a CID, unknown fields) are accepted; then a proof.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_malformed_catalogue_is_refused_by_name_over_tcp_and_unix() {
    let dir = tempfile::tempdir().unwrap();
    let sock = format!("unix://{}", dir.path().join("cat.sock").display());
    let fifo = dir.path().join("fifo.params");
    let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a C string that lives through the call.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    for listen in ["127.0.0.1:0", sock.as_str()] {
        let (running, mut c) = daemon(config(listen)).await;
        let cases = catalogue();
        assert!(cases.len() >= 48, "{} classes", cases.len());
        for (what, r, words) in cases {
            let e = c.submit_proof(r).await.expect_err(what);
            assert_eq!(e.code(), Code::InvalidArgument, "{what}: {}", e.message());
            assert!(
                e.message().contains(words),
                "{what}: wanted `{words}` in: {}",
                e.message()
            );
            assert!(e.message().len() < 4096, "{what}: a bounded message");
            let t = std::time::Instant::now();
            c.get_status(proto::GetStatusRequest {}).await.unwrap();
            assert!(t.elapsed() < Duration::from_secs(1), "{what}: alive");
        }
        let e = c
            .prove(proto::ProveRequest { submit: None })
            .await
            .unwrap_err();
        assert!(e.code() == Code::InvalidArgument && e.message().contains("submit: is missing"));
        for circuit in [
            "/etc/passwd",
            "/tmp",
            fifo.to_str().unwrap(),
            "../../etc/shadow.params",
        ] {
            let e = c
                .preload_srs(proto::PreloadSrsRequest {
                    circuit_id: circuit.into(),
                })
                .await
                .unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{circuit}");
            assert!(
                e.message()
                    .contains("is not a .params file in the parameter cache"),
                "{}",
                e.message()
            );
        }
        let e = c
            .evict_srs(proto::EvictSrsRequest {
                circuit_id: "porep-7x".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{}", e.message());
        let huge = "y".repeat(1 << 20);
        let e = c
            .await_proof(proto::AwaitProofRequest {
                job_id: huge.clone(),
                timeout_ms: 1,
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::NotFound);
        assert!(
            e.message().len() < 300,
            "the unknown id is not echoed whole"
        );
        let e = c
            .cancel_proof(proto::CancelProofRequest { job_id: huge })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::NotFound);
        assert!(
            running.core.queue.lock().unwrap().is_empty(),
            "nothing was queued"
        );
        assert!(running.core.jobs.all().is_empty(), "no job was made");

        // Commitments as CIDs are accepted (and that job cancelled).
        let mut cid = snap_request_with_cids();
        cid.request_id = "cat-snap-cid".into();
        let ok = c.submit_proof(cid).await.unwrap().into_inner();
        c.cancel_proof(proto::CancelProofRequest { job_id: ok.job_id })
            .await
            .unwrap();
        let r = prove(&mut c, req(ProofKind::WinningPost, "cat-after")).await;
        assert!(verify::winning(&r.proof), "{}", r.error_message);
        running.shutdown(Duration::from_secs(10)).await.unwrap();
    }
}

/// The fixture's SnapDeals request with its commitments as CIDs
/// (v1, fil-commitment codecs, a 32-byte multihash).
fn snap_request_with_cids() -> SubmitProofRequest {
    let mut r = req(ProofKind::Snap, "");
    let cid = |raw: &[u8], codec: &[u8], hash: &[u8]| {
        let mut c = vec![0x01];
        c.extend_from_slice(codec);
        c.extend_from_slice(hash);
        c.push(0x20);
        c.extend_from_slice(raw);
        c
    };
    // fil-commitment-sealed / poseidon, fil-commitment-unsealed / sha2-254-trunc254-padded.
    r.comm_r_old = cid(&r.comm_r_old, &[0x82, 0xe2, 0x03], &[0x92, 0x20]);
    r.comm_r_new = cid(&r.comm_r_new, &[0x82, 0xe2, 0x03], &[0x92, 0x20]);
    r.comm_d_new = cid(&r.comm_d_new, &[0x81, 0xe2, 0x03], &[0x92, 0x20]);
    r
}

/// The standard gRPC health service (no token, as probes send none)
/// answers `status` for the server and for the engine within 5 s.
async fn grpc_health_becomes(running: &Running, status: ServingStatus) {
    use cuzk::daemon::grpc_health::ENGINE_SERVICE;
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", running.listen))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = HealthClient::new(channel);
    for service in ["", ENGINE_SERVICE] {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let now = client
                .check(HealthCheckRequest {
                    service: service.into(),
                })
                .await
                .unwrap()
                .into_inner()
                .status;
            if now == status as i32 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "`{service}` reports {now}, not {status:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Jobs failing on device faults in a row (a wedged GPU) make the daemon
/// report itself unhealthy, naming the device; a job that completes makes
/// it healthy again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_faults_in_a_row_are_reported_until_a_job_completes() {
    use cuzk::daemon::health::UNHEALTHY_AFTER;
    use cuzk::faults::FaultKind;
    fixtures();
    let options = one_fault("gpu_ntt_msm", "wedged-", FaultKind::DeviceFault);
    let running = start(config("127.0.0.1:0"), options).await.unwrap();
    let mut c = connect(&running.listen.to_string(), None).await.unwrap();
    grpc_health_becomes(&running, ServingStatus::Serving).await;
    for i in 0..UNHEALTHY_AFTER {
        assert!(
            running.core.snapshot().unhealthy.is_none(),
            "healthy after {i}"
        );
        let r = prove(&mut c, req(ProofKind::WinningPost, &format!("wedged-{i}"))).await;
        assert_eq!(r.status, AwaitStatus::Failed as i32);
        assert!(
            r.error_message.contains("injected device fault"),
            "{}",
            r.error_message
        );
    }
    let why = running.core.snapshot().unhealthy.expect("unhealthy");
    assert!(why.contains("device 0") && why.contains("Xid"), "{why}");
    grpc_health_becomes(&running, ServingStatus::NotServing).await;
    let r = prove(&mut c, req(ProofKind::WinningPost, "well")).await;
    assert!(verify::winning(&r.proof), "{}", r.error_message);
    assert!(running.core.snapshot().unhealthy.is_none(), "healthy again");
    grpc_health_becomes(&running, ServingStatus::Serving).await;
    running.shutdown(Duration::from_secs(10)).await.unwrap();
}

/// 100 evict/preload cycles of one circuit's parameters while WinningPoSt
/// jobs run: every proof verifies, and at most one host copy of the
/// parameters exists at any time (a load while a job holds an evicted copy
/// takes that copy back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameter_churn_keeps_one_copy_and_every_proof_verifies() {
    let (running, c) = daemon(config("127.0.0.1:0")).await;
    let core = running.core.clone();
    let one_copy = srs_bytes(ProofKind::WinningPost);
    let jobs: Vec<_> = (0..4)
        .map(|i| {
            let mut c = c.clone();
            tokio::spawn(async move {
                prove(&mut c, req(ProofKind::WinningPost, &format!("churn-{i}"))).await
            })
        })
        .collect();
    let mut c = c;
    for cycle in 0..100 {
        let circuit = || "winning-2k".to_string();
        if cycle % 2 == 0 {
            c.evict_srs(proto::EvictSrsRequest {
                circuit_id: circuit(),
            })
            .await
            .unwrap();
        } else {
            c.preload_srs(proto::PreloadSrsRequest {
                circuit_id: circuit(),
            })
            .await
            .unwrap();
        }
        let held = core.srs.resident_bytes() as u64;
        assert!(
            held <= one_copy,
            "cycle {cycle}: {held} bytes of parameters for one file of {one_copy}"
        );
    }
    for j in jobs {
        let r = j.await.unwrap();
        assert!(
            verify::winning(&r.proof),
            "{}: {}",
            r.job_id,
            r.error_message
        );
    }
    running.shutdown(Duration::from_secs(10)).await.unwrap();
}
