//! `cuzk daemon` as a child process: SIGTERM with jobs in flight loses none,
//! even when it races the submits; hundreds of jobs queued at once keep the
//! daemon's memory bounded and every proof verifies; a circuit without
//! parameters is refused by name; a truncated parameter file fails its jobs
//! and the daemon keeps serving.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::fil::{self, fixtures, prove, verify};
use cuzk::daemon::client::{Client, connect, request_from_fixtures};
use cuzk::daemon::proto::{self, Priority, await_proof_response::Status as AwaitStatus};
use cuzk::filecoin::ProofKind;

/// Starts `cuzk daemon` on a unix socket in `dir` with `extra` config lines.
fn spawn(dir: &Path, params: &Path, extra: &str) -> (Child, String) {
    let sock = dir.join("d.sock");
    spawn_on(dir, params, &format!("unix://{}", sock.display()), extra)
}

/// Starts `cuzk daemon` listening on `listen`; the address to call.
fn spawn_on(dir: &Path, params: &Path, listen: &str, extra: &str) -> (Child, String) {
    let config = dir.join("daemon.toml");
    std::fs::write(
        &config,
        format!(
            "[gpu]\nbackend = \"cpu\"\n[threads]\nsynthesis = 2\ngroth16 = 2\n[pipeline]\nvariant = \"single_lock\"\n\
             [fil]\nparameter_cache = \"{}\"\n[daemon]\nlisten = \"{listen}\"\n{extra}\n",
            params.display(),
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["daemon", "--config"])
        .arg(&config)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    (child, listen.to_string())
}

/// A loopback port free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn client(addr: &str) -> Client {
    let started = Instant::now();
    loop {
        if let Ok(mut c) = connect(addr, None).await
            && c.get_status(proto::GetStatusRequest {}).await.is_ok()
        {
            return c;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the daemon did not come up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn sigterm(child: &Child) {
    // SAFETY: a plain kill(2) of our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
}

fn req(kind: ProofKind, id: &str) -> proto::SubmitProofRequest {
    request_from_fixtures(&fixtures().1, kind, id, Priority::Unspecified).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_accepted_jobs_and_exits_zero() {
    fixtures();
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = spawn(dir.path(), &fil::param_cache(), "drain_timeout_s = 600");
    let mut c = client(&addr).await;
    let ids: Vec<String> = (0..4).map(|i| format!("wdpost-drain-{i}")).collect();
    for id in &ids {
        c.submit_proof(req(ProofKind::WindowPost, id))
            .await
            .unwrap();
    }
    let waiters: Vec<_> = ids
        .iter()
        .map(|id| {
            let (mut c, id) = (c.clone(), id.clone());
            tokio::spawn(async move {
                c.await_proof(proto::AwaitProofRequest {
                    job_id: id,
                    timeout_ms: 0,
                })
                .await
                .unwrap()
                .into_inner()
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    sigterm(&child);
    // Draining: no new work is accepted.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let e = tokio::time::timeout(
        Duration::from_secs(5),
        c.submit_proof(req(ProofKind::WindowPost, "late")),
    )
    .await
    .expect("a submit during the drain is answered at once")
    .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable, "{}", e.message());
    for w in waiters {
        let r = w.await.unwrap();
        assert_eq!(
            r.status,
            AwaitStatus::Completed as i32,
            "{}: {}",
            r.job_id,
            r.error_message
        );
        assert!(verify::window(&r.proof), "{}", r.job_id);
    }
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "exit status {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_timeout_fails_unfinished_jobs_to_their_waiters() {
    fixtures();
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = spawn(dir.path(), &fil::param_cache(), "drain_timeout_s = 0");
    let mut c = client(&addr).await;
    c.submit_proof(req(ProofKind::Porep, "porep-cut"))
        .await
        .unwrap();
    let waiter = {
        let mut c = c.clone();
        tokio::spawn(async move {
            c.await_proof(proto::AwaitProofRequest {
                job_id: "porep-cut".into(),
                timeout_ms: 0,
            })
            .await
            .unwrap()
            .into_inner()
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    sigterm(&child);
    let r = waiter.await.unwrap();
    assert_eq!(r.status, AwaitStatus::Failed as i32);
    assert!(
        r.error_message
            .contains("shut down before this job finished"),
        "{}",
        r.error_message
    );
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "exit status {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_queued_jobs_keep_memory_flat_and_all_verify() {
    fixtures();
    // Its own parameter cache holding only WindowPoSt's files: a circuit
    // without parameters is refused by name.
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("params");
    std::fs::create_dir(&params).unwrap();
    let window = cuzk::filecoin::params::require(ProofKind::WindowPost, fil::SIZE).unwrap();
    for ext in ["params", "vk", "meta"] {
        let f = window.with_extension(ext);
        std::os::unix::fs::symlink(&f, params.join(f.file_name().unwrap())).unwrap();
    }
    // Fewer queue places than jobs: the overflow is refused, clearly. A
    // memory budget that admits two jobs at a time, once the parameters
    // and every queued input are counted, so the queue does fill.
    const N: usize = 200;
    const PLACES: usize = 150;
    let srs = cuzk::stages::Srs::read(&window, false).unwrap();
    let partition = cuzk::stages::partition::PartitionLayout::new(srs.shape()).bytes as u64;
    let input: u64 = req(ProofKind::WindowPost, "x")
        .vanilla_proofs
        .iter()
        .map(|v| v.len() as u64)
        .sum();
    let budget = srs.memory_bytes() as u64 + PLACES as u64 * input + partition * 5 / 2;
    drop(srs);
    let (mut child, addr) = spawn(
        dir.path(),
        &params,
        &format!("max_queued = {PLACES}\nreserve_post = 0\n[memory]\nbudget = {budget}"),
    );
    let mut c = client(&addr).await;
    let e = c
        .submit_proof(req(ProofKind::WinningPost, "no-params"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message().contains("missing parameter file")
            && e.message().contains(&params.display().to_string()),
        "{}",
        e.message()
    );

    // A warm-up proof, then the daemon's resident set as the baseline.
    let r = prove(&mut c, req(ProofKind::WindowPost, "warm")).await;
    assert!(verify::window(&r.proof));
    let rss = |m: &str| -> u64 {
        m.lines()
            .find(|l| l.starts_with("cuzk_daemon_rss_bytes "))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .unwrap() as u64
    };
    let baseline = rss(&c
        .get_metrics(proto::GetMetricsRequest {})
        .await
        .unwrap()
        .into_inner()
        .prometheus_text);

    let template = req(ProofKind::WindowPost, "");
    let mut accepted = vec![];
    for i in 0..N {
        let mut r = template.clone();
        r.request_id = format!("wdpost-q-{i}");
        match c.submit_proof(r).await {
            Ok(_) => accepted.push(i),
            Err(e) => {
                assert_eq!(e.code(), tonic::Code::ResourceExhausted);
                assert!(e.message().contains("daemon.max_queued"), "{}", e.message());
            }
        }
    }
    assert!(
        accepted.len() >= PLACES && accepted.len() < N,
        "{} of {N} accepted with {PLACES} places: the overflow is refused",
        accepted.len()
    );
    let mut peak = baseline;
    let mut waiters = tokio::task::JoinSet::new();
    for &i in &accepted {
        let mut c = c.clone();
        waiters.spawn(async move {
            c.await_proof(proto::AwaitProofRequest {
                job_id: format!("wdpost-q-{i}"),
                timeout_ms: 0,
            })
            .await
            .unwrap()
            .into_inner()
        });
    }
    let mut done = 0;
    let mut sample = tokio::time::interval(Duration::from_millis(250));
    while done < accepted.len() {
        tokio::select! {
            r = waiters.join_next() => {
                let r = r.unwrap().unwrap();
                assert_eq!(r.status, AwaitStatus::Completed as i32, "{}: {}", r.job_id, r.error_message);
                assert!(verify::window(&r.proof), "{} verifies", r.job_id);
                done += 1;
            }
            _ = sample.tick() => {
                let m = c.get_metrics(proto::GetMetricsRequest {}).await.unwrap().into_inner().prometheus_text;
                peak = peak.max(rss(&m));
            }
        }
    }
    let growth = peak.saturating_sub(baseline);
    eprintln!(
        "daemon RSS: baseline {} MiB, peak {} MiB with {N} jobs queued",
        baseline >> 20,
        peak >> 20
    );
    assert!(
        growth < 256 << 20,
        "the daemon grew {} MiB with {N} jobs queued",
        growth >> 20
    );
    sigterm(&child);
    assert!(
        tokio::task::spawn_blocking(move || child.wait().unwrap())
            .await
            .unwrap()
            .success()
    );
}

/// A directory of symlinks to the test parameters of `kinds`.
fn param_dir(root: &Path, kinds: &[ProofKind]) -> std::path::PathBuf {
    let params = root.join("params");
    std::fs::create_dir(&params).unwrap();
    for &kind in kinds {
        let file = cuzk::filecoin::params::require(kind, fil::SIZE).unwrap();
        for ext in ["params", "vk", "meta"] {
            let f = file.with_extension(ext);
            std::os::unix::fs::symlink(&f, params.join(f.file_name().unwrap())).unwrap();
        }
    }
    params
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_parameter_file_fails_its_jobs_and_the_daemon_keeps_serving() {
    fixtures();
    let dir = tempfile::tempdir().unwrap();
    let params = param_dir(dir.path(), &[ProofKind::Porep, ProofKind::WinningPost]);
    // The PoRep parameters cut in half, as an interrupted download leaves them.
    let porep = cuzk::filecoin::params::require(ProofKind::Porep, fil::SIZE).unwrap();
    let name = porep.file_name().unwrap().to_str().unwrap().to_string();
    let bytes = std::fs::read(&porep).unwrap();
    std::fs::remove_file(params.join(&name)).unwrap();
    std::fs::write(params.join(&name), &bytes[..bytes.len() / 2]).unwrap();
    let (mut child, addr) = spawn(dir.path(), &params, "");
    let mut c = client(&addr).await;
    let bounded = Duration::from_secs(60);
    for attempt in 0..2 {
        // Two PoReps at once, so the failed load has several jobs to fail.
        let calls: Vec<_> = (0..2)
            .map(|k| {
                let mut c = c.clone();
                let r = req(ProofKind::Porep, &format!("porep-cut-{attempt}-{k}"));
                tokio::spawn(async move { c.prove(proto::ProveRequest { submit: Some(r) }).await })
            })
            .collect();
        for call in calls {
            let r = tokio::time::timeout(bounded, call)
                .await
                .expect("a job of a bad parameter file is answered, not left hanging")
                .unwrap()
                .unwrap()
                .into_inner()
                .result
                .unwrap();
            assert_eq!(r.status, AwaitStatus::Failed as i32, "{}", r.error_message);
            assert!(
                r.error_message.contains("loading the parameters")
                    && r.error_message.contains(&name),
                "{}",
                r.error_message
            );
        }
    }
    // Admission still runs: metrics answer and a WinningPoSt proves.
    tokio::time::timeout(bounded, c.get_metrics(proto::GetMetricsRequest {}))
        .await
        .expect("GetMetrics answers")
        .unwrap();
    let r = tokio::time::timeout(
        bounded,
        c.prove(proto::ProveRequest {
            submit: Some(req(ProofKind::WinningPost, "winning-after-cut")),
        }),
    )
    .await
    .expect("a WinningPoSt is admitted after the failed load")
    .unwrap()
    .into_inner()
    .result
    .unwrap();
    assert!(verify::winning(&r.proof), "{}", r.error_message);
    sigterm(&child);
    assert!(
        tokio::task::spawn_blocking(move || child.wait().unwrap())
            .await
            .unwrap()
            .success()
    );
}

/// SIGTERM at random moments against a burst of submits: every submit the
/// daemon answered OK is proven and answered (none accepted, then dropped
/// by the exit); the others were refused UNAVAILABLE or found the daemon
/// gone before it accepted them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_racing_submits_loses_no_accepted_job() {
    use rand::{Rng, SeedableRng};
    fixtures();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut accepted_total = 0;
    for round in 0..4 {
        let dir = tempfile::tempdir().unwrap();
        let (mut child, addr) = spawn(dir.path(), &fil::param_cache(), "drain_timeout_s = 600");
        let c = client(&addr).await;
        let submits: Vec<_> = (0..4)
            .map(|k| {
                let mut c = c.clone();
                let (kind, id) = if k == 0 {
                    // A PoRep body, whose validation takes longest.
                    (ProofKind::Porep, format!("porep-race-{round}"))
                } else {
                    (ProofKind::WindowPost, format!("wdpost-race-{round}-{k}"))
                };
                tokio::spawn(async move {
                    let accepted = c.submit_proof(req(kind, &id)).await;
                    let accepted = match accepted {
                        Ok(r) => r.into_inner().job_id,
                        Err(e) => {
                            assert!(
                                matches!(
                                    e.code(),
                                    tonic::Code::Unavailable
                                        | tonic::Code::Unknown
                                        | tonic::Code::Cancelled
                                ),
                                "{id}: {:?} {}",
                                e.code(),
                                e.message()
                            );
                            return None;
                        }
                    };
                    let r = c
                        .await_proof(proto::AwaitProofRequest {
                            job_id: accepted,
                            timeout_ms: 0,
                        })
                        .await
                        .expect("an accepted job is answered before the daemon exits")
                        .into_inner();
                    assert_eq!(
                        r.status,
                        AwaitStatus::Completed as i32,
                        "{id}: {}",
                        r.error_message
                    );
                    let ok = match kind {
                        ProofKind::Porep => verify::porep(&r.proof),
                        _ => verify::window(&r.proof),
                    };
                    assert!(ok, "{id}");
                    Some(id)
                })
            })
            .collect();
        // Within a few milliseconds of the submits, so some race the drain
        // (0–300 ms let every submit in first; 0–4 ms refused 1 of 16 here).
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..4))).await;
        sigterm(&child);
        for s in submits {
            accepted_total += usize::from(s.await.unwrap().is_some());
        }
        let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
            .await
            .unwrap();
        assert!(status.success(), "round {round}: exit status {status}");
    }
    eprintln!("drain races: {accepted_total} of 16 submits accepted, every one proven");
}

/// SIGKILL mid-job, a restart, and the client's retry with the same request
/// id and inputs (what Curio's task scheduler does on a transport error):
/// every job is proven in the end, and the restarted daemon is ready fast.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_daemon_restarts_and_retried_jobs_prove() {
    fixtures();
    let dir = tempfile::tempdir().unwrap();
    for round in 0..10 {
        let (mut child, addr) = spawn(dir.path(), &fil::param_cache(), "");
        let started = Instant::now();
        let c = client(&addr).await;
        let ready = started.elapsed();
        let id = format!("wdpost-kill-{round}");
        let call = {
            let mut c = c.clone();
            let r = req(ProofKind::WindowPost, &id);
            tokio::spawn(async move { c.prove(proto::ProveRequest { submit: Some(r) }).await })
        };
        // Killed once the job is known and unfinished (a proof takes
        // seconds here; the check and the kill are microseconds apart).
        let mut probe = c.clone();
        loop {
            let seen = probe
                .await_proof(proto::AwaitProofRequest {
                    job_id: id.clone(),
                    timeout_ms: 1,
                })
                .await;
            if seen.is_ok_and(|r| r.into_inner().status == AwaitStatus::Timeout as i32) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            call.await.unwrap().is_err(),
            "round {round}: the call broke with the daemon"
        );
        // Restart; the socket file of the killed daemon is stale, not in use.
        let (mut child, addr) = spawn(dir.path(), &fil::param_cache(), "");
        let mut c = client(&addr).await;
        let r = prove(&mut c, req(ProofKind::WindowPost, &id)).await;
        assert_eq!(
            r.status,
            AwaitStatus::Completed as i32,
            "{id}: {}",
            r.error_message
        );
        assert!(verify::window(&r.proof), "{id}");
        assert!(
            ready < Duration::from_secs(30),
            "round {round}: ready after {ready:?}"
        );
        sigterm(&child);
        assert!(child.wait().unwrap().success());
    }
}

/// Two thousand idle connections to the gRPC port and two hundred slowloris
/// clients on the status port: a legitimate GetStatus still answers within a
/// second, a WinningPoSt proves, and the slow clients are dropped once the
/// header timeout passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slowloris_connections_do_not_starve_real_calls() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    fixtures();
    // This process holds the client ends: 2,200 descriptors.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: get/setrlimit on a local struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    let dir = tempfile::tempdir().unwrap();
    let (grpc, web) = (free_port(), free_port());
    let (mut child, addr) = spawn_on(
        dir.path(),
        &fil::param_cache(),
        &format!("127.0.0.1:{grpc}"),
        &format!("status_listen = \"127.0.0.1:{web}\""),
    );
    let mut c = client(&addr).await;
    let mut idle = vec![];
    for _ in 0..2000 {
        idle.push(
            tokio::net::TcpStream::connect(("127.0.0.1", grpc))
                .await
                .unwrap(),
        );
    }
    let mut slow = vec![];
    for _ in 0..200 {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", web))
            .await
            .unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
            .await
            .unwrap();
        slow.push(s);
    }
    let t = Instant::now();
    c.get_status(proto::GetStatusRequest {}).await.unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "GetStatus took {:?}",
        t.elapsed()
    );
    let r = prove(&mut c, req(ProofKind::WinningPost, "winning-under-flood")).await;
    assert!(verify::winning(&r.proof), "{}", r.error_message);
    // The status page still answers a real request beside the slow ones.
    let mut real = tokio::net::TcpStream::connect(("127.0.0.1", web))
        .await
        .unwrap();
    real.write_all(b"GET /status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    real.read_to_string(&mut answer).await.unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "{}",
        &answer[..answer.len().min(80)]
    );
    // Past the header timeout every slow client has been dropped.
    tokio::time::sleep(cuzk::daemon::web::HEADER_TIMEOUT + Duration::from_secs(2)).await;
    for (i, s) in slow.iter_mut().enumerate() {
        let mut rest = vec![];
        let read = tokio::time::timeout(Duration::from_secs(1), s.read_to_end(&mut rest)).await;
        assert!(read.is_ok(), "slow client {i} is still connected");
    }
    drop(idle);
    sigterm(&child);
    assert!(child.wait().unwrap().success());
}
