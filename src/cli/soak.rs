//! `cuzk soak`: a daemon of our own under Filecoin's duty cycle for hours,
//! SIGKILLed and restarted on a schedule, every proof checked with
//! Filecoin's verifier against the request it answered. Reports WinningPoSt
//! latency against its solo latency, invalid proofs, failed and lost
//! requests, and the daemon's RSS drift per hour.
//!
//! Clients behave as Curio does: a request whose call breaks (the daemon was
//! killed) is sent again under the same id until it is answered, and a
//! request that has no answer when the run and its grace period are over is
//! lost.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use cuzk::daemon::client::{Client, connect, request_from_fixtures};
use cuzk::daemon::proto::{
    Priority, ProveRequest, SubmitProofRequest, await_proof_response::Status,
};
use cuzk::filecoin::ProofKind;

#[derive(clap::Args)]
pub struct Args {
    /// A fixtures directory (`cuzk fil gen`) the requests are made from.
    #[arg(long)]
    fixtures: PathBuf,
    /// How long to send requests: `90s`, `30m`, `8h`.
    #[arg(long, default_value = "30m", value_parser = duration)]
    duration: Duration,
    /// One WinningPoSt this often.
    #[arg(long, default_value = "30s", value_parser = duration)]
    winning_every: Duration,
    /// A burst of WindowPoSts this often.
    #[arg(long, default_value = "5m", value_parser = duration)]
    window_every: Duration,
    /// WindowPoSts per burst.
    #[arg(long, default_value_t = 3)]
    window_burst: usize,
    /// PoReps kept in flight throughout (the sealing backlog).
    #[arg(long, default_value_t = 20)]
    porep_backlog: usize,
    /// SIGKILL the daemon and start it again this often (`0s`: never).
    #[arg(long, default_value = "20m", value_parser = duration)]
    restart_every: Duration,
    /// After the run, how long requests still in flight may take.
    #[arg(long, default_value = "10m", value_parser = duration)]
    grace: Duration,
    /// Also write the report as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `90s`, `30m`, `8h`, `1h30m`.
fn duration(s: &str) -> Result<Duration, String> {
    let (mut total, mut digits) = (0u64, String::new());
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => return Err(format!("`{s}`: use s, m or h, e.g. 30m")),
        };
        let n: u64 = digits
            .parse()
            .map_err(|_| format!("`{s}`: a number must precede {c}"))?;
        total += n * unit;
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(format!("`{s}`: give a unit (s, m or h)"));
    }
    Ok(Duration::from_secs(total))
}

/// The daemon under test, replaced on every restart.
struct Daemon {
    child: Child,
    /// Which life this is (0 first), for the RSS drift of each.
    life: usize,
}

impl Daemon {
    fn spawn(config: Option<&Path>, addr: &str, log: &Path, life: usize) -> anyhow::Result<Self> {
        let mut cmd = Command::new(std::env::current_exe()?);
        if let Some(c) = config {
            cmd.arg("--config").arg(c);
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        let child = cmd
            .args(["daemon", "--listen", addr])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting `cuzk daemon`")?;
        Ok(Self { child, life })
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The resident set of `pid`, in bytes.
fn rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// One request's end.
#[derive(Clone, Debug)]
struct Answer {
    kind: ProofKind,
    /// When it was sent, from the start of the run.
    sent_s: f64,
    /// The daemon's life (0 before the first restart) when it was sent.
    life: usize,
    latency: Duration,
    /// Calls it took (more than one when a restart broke the first).
    calls: usize,
    outcome: Outcome,
}

#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Verified,
    /// COMPLETED with bytes Filecoin's verifier rejects for this request.
    Invalid,
    /// FAILED, CANCELLED or TIMEOUT, with the daemon's message.
    Failed(String),
    /// No answer by the end of the grace period.
    Lost,
}

/// What every client shares.
struct Run {
    addr: String,
    started: Instant,
    /// No new requests after this.
    end: Instant,
    /// Requests still unanswered after this are lost.
    give_up: Instant,
    answers: Mutex<Vec<Answer>>,
    /// The daemon's current life (restarts so far).
    life: std::sync::atomic::AtomicUsize,
}

impl Run {
    async fn client(&self) -> Option<Client> {
        while Instant::now() < self.give_up {
            if let Ok(c) = connect(&self.addr, None).await {
                return Some(c);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        None
    }

    /// Sends `req` until it is answered (same id, as Curio retries), checks
    /// the proof against it, and records the answer.
    async fn prove(&self, kind: ProofKind, req: SubmitProofRequest) -> Outcome {
        let sent = Instant::now();
        let life = self.life.load(std::sync::atomic::Ordering::Relaxed);
        let mut calls = 0;
        let outcome = loop {
            let Some(mut c) = self.client().await else {
                break Outcome::Lost;
            };
            calls += 1;
            let call = c.prove(ProveRequest {
                submit: Some(req.clone()),
            });
            let left = self.give_up.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, call).await {
                Err(_) => break Outcome::Lost,
                // The connection broke (a restart): call again.
                Ok(Err(_)) => tokio::time::sleep(Duration::from_millis(200)).await,
                Ok(Ok(r)) => {
                    let r = r.into_inner().result.unwrap_or_default();
                    break match Status::try_from(r.status) {
                        Ok(Status::Completed) => verify(&req, r.proof).await,
                        _ => Outcome::Failed(r.error_message),
                    };
                }
            }
        };
        self.answers.lock().unwrap().push(Answer {
            kind,
            sent_s: (sent - self.started).as_secs_f64(),
            life,
            latency: sent.elapsed(),
            calls,
            outcome: outcome.clone(),
        });
        outcome
    }
}

/// Filecoin's verifier on `proof`, for the request it answered.
async fn verify(req: &SubmitProofRequest, proof: Vec<u8>) -> Outcome {
    let req = req.clone();
    let ok = tokio::task::spawn_blocking(move || {
        cuzk::daemon::request::parse(&req)
            .ok()
            .is_some_and(|p| p.job.verify(&proof).unwrap_or(false))
    })
    .await
    .unwrap_or(false);
    if ok {
        Outcome::Verified
    } else {
        Outcome::Invalid
    }
}

/// Percentile `q` of sorted `xs`.
fn percentile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs[((xs.len() - 1) as f64 * q).round() as usize]
}

/// Least-squares slope of (seconds, bytes), in bytes per hour.
fn slope_per_hour(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 3 {
        return None;
    }
    let n = points.len() as f64;
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let (num, den) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| {
        (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
    });
    (den > 0.0).then(|| num / den * 3600.0)
}

/// The figures of one kind.
#[derive(serde::Serialize)]
struct KindReport {
    kind: String,
    sent: usize,
    verified: usize,
    invalid: usize,
    failed: usize,
    lost: usize,
    retried: usize,
    p50_s: f64,
    p99_s: f64,
    max_s: f64,
    /// Over the requests answered on their first call (no restart in between).
    max_first_call_s: f64,
    first_failure: Option<String>,
}

/// One WinningPoSt of the run, for the goal and for finding the slow ones.
#[derive(serde::Serialize)]
struct WinningSample {
    sent_s: f64,
    life: usize,
    latency_s: f64,
    calls: usize,
    verified: bool,
    /// Its daemon's first WinningPoSt after a restart (it loads the parameters).
    cold: bool,
}

fn winning_samples(answers: &[Answer]) -> Vec<WinningSample> {
    let winning: Vec<&Answer> = answers
        .iter()
        .filter(|a| a.kind == ProofKind::WinningPost)
        .collect();
    // Life 0's daemon proved the solo WinningPoSts first: none of it is cold.
    let first_of = |life: usize| {
        winning
            .iter()
            .filter(|a| a.life == life)
            .map(|a| a.sent_s)
            .fold(f64::INFINITY, f64::min)
    };
    winning
        .iter()
        .map(|a| WinningSample {
            sent_s: a.sent_s,
            life: a.life,
            latency_s: a.latency.as_secs_f64(),
            calls: a.calls,
            verified: a.outcome == Outcome::Verified,
            cold: a.life > 0 && a.sent_s == first_of(a.life),
        })
        .collect()
}

/// The slowest WinningPoSt answered on its first call among the warm
/// (`cold` false) or the cold ones.
fn slowest(samples: &[WinningSample], cold: bool) -> Option<&WinningSample> {
    samples
        .iter()
        .filter(|w| w.cold == cold && w.calls == 1 && w.verified)
        .max_by(|a, b| a.latency_s.total_cmp(&b.latency_s))
}

fn kind_report(kind: ProofKind, answers: &[Answer]) -> KindReport {
    let mine: Vec<&Answer> = answers.iter().filter(|a| a.kind == kind).collect();
    let mut lat: Vec<f64> = mine
        .iter()
        .filter(|a| a.outcome == Outcome::Verified)
        .map(|a| a.latency.as_secs_f64())
        .collect();
    lat.sort_by(f64::total_cmp);
    let count = |f: &dyn Fn(&Outcome) -> bool| mine.iter().filter(|a| f(&a.outcome)).count();
    KindReport {
        kind: kind.as_str().into(),
        sent: mine.len(),
        verified: count(&|o| *o == Outcome::Verified),
        invalid: count(&|o| *o == Outcome::Invalid),
        failed: count(&|o| matches!(o, Outcome::Failed(_))),
        lost: count(&|o| *o == Outcome::Lost),
        retried: mine.iter().filter(|a| a.calls > 1).count(),
        p50_s: percentile(&lat, 0.5),
        p99_s: percentile(&lat, 0.99),
        max_s: lat.last().copied().unwrap_or(0.0),
        max_first_call_s: mine
            .iter()
            .filter(|a| a.calls == 1 && a.outcome == Outcome::Verified)
            .map(|a| a.latency.as_secs_f64())
            .fold(0.0, f64::max),
        first_failure: mine.iter().find_map(|a| match &a.outcome {
            Outcome::Failed(m) => Some(m.clone()),
            _ => None,
        }),
    }
}

/// The whole run's report.
#[derive(serde::Serialize)]
struct Report {
    duration_s: f64,
    restarts: usize,
    winning_solo_s: f64,
    /// The first solo WinningPoSt, which loads the parameters: what a
    /// daemon's first WinningPoSt after a restart is held to.
    winning_cold_solo_s: f64,
    /// Every WinningPoSt of the run, in the order they were answered.
    winning: Vec<WinningSample>,
    kinds: Vec<KindReport>,
    rss_max_bytes: u64,
    /// Mean over the daemon's lives of the RSS slope after its first 2 minutes.
    rss_drift_bytes_per_hour: Option<f64>,
    daemon_log: PathBuf,
}

pub fn run(config: Option<&Path>, args: Args) -> anyhow::Result<ExitCode> {
    let loaded = cuzk::config::load(config)?;
    cuzk::filecoin::params::use_cache(loaded.config.fil.parameter_cache.as_deref())?;
    let request =
        |kind, id: &str| request_from_fixtures(&args.fixtures, kind, id, Priority::Unspecified);
    let templates = [
        ProofKind::WinningPost,
        ProofKind::WindowPost,
        ProofKind::Porep,
    ]
    .map(|k| request(k, "").map(|r| (k, r)))
    .into_iter()
    .collect::<anyhow::Result<Vec<_>>>()?;
    let template = move |kind: ProofKind| {
        templates
            .iter()
            .find(|(k, _)| *k == kind)
            .unwrap()
            .1
            .clone()
    };
    let dir = tempfile::tempdir()?;
    let addr = format!("unix://{}", dir.path().join("soak.sock").display());
    let log = std::env::temp_dir().join(format!("cuzk-soak-{}.log", std::process::id()));
    let daemon = Arc::new(Mutex::new(Daemon::spawn(config, &addr, &log, 0)?));
    println!(
        "soak: {:?} of WinningPoSt every {:?}, {} WindowPoSt every {:?}, {} PoReps in flight, SIGKILL every {:?}; daemon log {}",
        args.duration,
        args.winning_every,
        args.window_burst,
        args.window_every,
        args.porep_backlog,
        args.restart_every,
        log.display()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let tag = std::process::id();
    let report = rt.block_on(async {
        // Solo latency: three WinningPoSts alone, the median (the first also
        // loads the parameters, so it is not counted).
        let warm = Run {
            addr: addr.clone(),
            started: Instant::now(),
            end: Instant::now(),
            give_up: Instant::now() + Duration::from_secs(600),
            answers: Mutex::new(vec![]),
            life: Default::default(),
        };
        for i in 0..4 {
            let mut r = template(ProofKind::WinningPost);
            r.request_id = format!("soak-{tag}-solo-{i}");
            let o = warm.prove(ProofKind::WinningPost, r).await;
            anyhow::ensure!(
                o == Outcome::Verified,
                "the solo WinningPoSt did not verify: {o:?}"
            );
        }
        let cold_solo = warm.answers.lock().unwrap()[0].latency.as_secs_f64();
        let mut solo: Vec<f64> = warm.answers.lock().unwrap()[1..]
            .iter()
            .map(|a| a.latency.as_secs_f64())
            .collect();
        solo.sort_by(f64::total_cmp);
        let started = Instant::now();
        let run = Arc::new(Run {
            addr: addr.clone(),
            started,
            end: started + args.duration,
            give_up: started + args.duration + args.grace,
            answers: Mutex::new(vec![]),
            life: Default::default(),
        });
        let mut tasks = tokio::task::JoinSet::new();
        let next_id = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let make = {
            let next_id = next_id.clone();
            move |kind: ProofKind| {
                let mut r = template(kind);
                let n = next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                r.request_id = format!("soak-{tag}-{}-{n}", kind.as_str());
                r
            }
        };
        // The sealing backlog: each lane keeps one PoRep in flight.
        for _ in 0..args.porep_backlog {
            let (run, make) = (run.clone(), make.clone());
            tasks.spawn(async move {
                while Instant::now() < run.end {
                    run.prove(ProofKind::Porep, make(ProofKind::Porep)).await;
                }
            });
        }
        // PoSt on their clocks, each request on its own task.
        for (kind, every, burst) in [
            (ProofKind::WinningPost, args.winning_every, 1),
            (ProofKind::WindowPost, args.window_every, args.window_burst),
        ] {
            let (run, make) = (run.clone(), make.clone());
            tasks.spawn(async move {
                let mut tick = tokio::time::interval(every);
                let mut posts = tokio::task::JoinSet::new();
                loop {
                    tick.tick().await;
                    if Instant::now() >= run.end {
                        break;
                    }
                    for _ in 0..burst {
                        let (run, req) = (run.clone(), make(kind));
                        posts.spawn(async move { run.prove(kind, req).await });
                    }
                }
                posts.join_all().await;
            });
        }
        // SIGKILL and restart; RSS every 5 s.
        let mut restarts = 0;
        let mut samples: Vec<(usize, f64, u64)> = vec![];
        let mut last_restart = Instant::now();
        let mut life_start = Instant::now();
        let mut sample = tokio::time::interval(Duration::from_secs(5));
        loop {
            tokio::select! {
                _ = sample.tick() => {}
                Some(_) = tasks.join_next() => {}
                else => break,
            }
            if tasks.is_empty() {
                break;
            }
            let now = Instant::now();
            let mut d = daemon.lock().unwrap();
            if let Some(b) = rss(d.child.id()) {
                samples.push((d.life, (now - life_start).as_secs_f64(), b));
            }
            if !args.restart_every.is_zero()
                && now < run.end
                && now - last_restart >= args.restart_every
            {
                d.kill();
                let life = d.life + 1;
                *d = Daemon::spawn(config, &addr, &log, life)?;
                restarts += 1;
                run.life.store(life, std::sync::atomic::Ordering::Relaxed);
                last_restart = now;
                life_start = now;
                println!(
                    "soak: {:.0} s: SIGKILL, restarted",
                    (now - run.started).as_secs_f64()
                );
            }
        }
        let answers = run.answers.lock().unwrap().clone();
        let lives = samples.iter().map(|s| s.0).max().map_or(0, |l| l + 1);
        let slopes: Vec<f64> = (0..lives)
            .filter_map(|l| {
                let pts: Vec<(f64, f64)> = samples
                    .iter()
                    .filter(|s| s.0 == l && s.1 >= 120.0)
                    .map(|s| (s.1, s.2 as f64))
                    .collect();
                slope_per_hour(&pts)
            })
            .collect();
        Ok(Report {
            duration_s: started.elapsed().as_secs_f64(),
            restarts,
            winning_solo_s: percentile(&solo, 0.5),
            winning_cold_solo_s: cold_solo,
            winning: winning_samples(&answers),
            kinds: [
                ProofKind::WinningPost,
                ProofKind::WindowPost,
                ProofKind::Porep,
            ]
            .into_iter()
            .map(|k| kind_report(k, &answers))
            .collect(),
            rss_max_bytes: samples.iter().map(|s| s.2).max().unwrap_or(0),
            rss_drift_bytes_per_hour: (!slopes.is_empty())
                .then(|| slopes.iter().sum::<f64>() / slopes.len() as f64),
            daemon_log: log.clone(),
        })
    });
    daemon.lock().unwrap().kill();
    let report = report?;
    print(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    let bad: usize = report.kinds.iter().map(|k| k.invalid + k.lost).sum();
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print(r: &Report) {
    println!(
        "soak: {:.0} s, {} restart(s) by SIGKILL",
        r.duration_s, r.restarts
    );
    println!(
        "{:<13} {:>5} {:>8} {:>7} {:>6} {:>4} {:>7} {:>7} {:>7} {:>7} {:>12}",
        "kind",
        "sent",
        "verified",
        "invalid",
        "failed",
        "lost",
        "retried",
        "p50 s",
        "p99 s",
        "max s",
        "max 1st call"
    );
    for k in &r.kinds {
        println!(
            "{:<13} {:>5} {:>8} {:>7} {:>6} {:>4} {:>7} {:>7.2} {:>7.2} {:>7.2} {:>12.2}",
            k.kind,
            k.sent,
            k.verified,
            k.invalid,
            k.failed,
            k.lost,
            k.retried,
            k.p50_s,
            k.p99_s,
            k.max_s,
            k.max_first_call_s
        );
        if let Some(m) = &k.first_failure {
            println!("  first failure: {m}");
        }
    }
    let bar = |cold: bool| {
        2.0 + if cold {
            r.winning_cold_solo_s
        } else {
            r.winning_solo_s
        }
    };
    println!(
        "WinningPoSt solo {:.2} s (a daemon's first, loading its parameters: {:.2} s)",
        r.winning_solo_s, r.winning_cold_solo_s
    );
    for (cold, what) in [(false, "warm"), (true, "a restarted daemon's first")] {
        let Some(w) = slowest(&r.winning, cold) else {
            continue;
        };
        println!(
            "  slowest {what} on a first call: {:.2} s, sent {:.0} s in (daemon life {}): {} the goal of {:.2} s",
            w.latency_s,
            w.sent_s,
            w.life,
            if w.latency_s <= bar(cold) {
                "meets"
            } else {
                "misses"
            },
            bar(cold)
        );
    }
    println!(
        "daemon RSS: {:.0} MiB at most, drift {} per hour of a daemon's life (after its first 2 minutes)",
        r.rss_max_bytes as f64 / (1u64 << 20) as f64,
        r.rss_drift_bytes_per_hour.map_or("n/a".into(), |b| format!(
            "{:+.1} MiB",
            b / (1u64 << 20) as f64
        ))
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_slopes() {
        assert_eq!(duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert!(duration("30").is_err());
        assert!(duration("5d").is_err());
        let line: Vec<(f64, f64)> = (0..10).map(|i| (i as f64 * 60.0, 1e6 * i as f64)).collect();
        assert!((slope_per_hour(&line).unwrap() - 60e6).abs() < 1.0);
        assert_eq!(percentile(&[1.0, 2.0, 3.0], 0.5), 2.0);
    }
}
