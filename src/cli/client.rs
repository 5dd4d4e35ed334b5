//! `cuzk client`: call a running daemon, as Curio does.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use cuzk::daemon::client::{Client, connect_with, request_from_fixtures};
use cuzk::daemon::proto::{self, Priority, SubmitProofRequest};
use cuzk::filecoin::ProofKind;

#[derive(clap::Args)]
pub struct Args {
    /// The daemon: HOST:PORT, https://HOST:PORT (TLS) or unix:///path.sock.
    #[arg(long, default_value = "127.0.0.1:9820")]
    pub addr: String,
    /// The daemon's bearer token.
    #[arg(long, env = "CUZK_DAEMON__TOKEN")]
    pub token: Option<String>,
    #[command(flatten)]
    pub tls: super::tls_args::TlsArgs,
    #[command(subcommand)]
    pub call: Call,
}

/// What a submitted proof is.
#[derive(clap::Args)]
pub struct ProofArgs {
    /// porep, window-post, winning-post or snap.
    #[arg(long)]
    pub kind: String,
    /// A fixtures directory (`cuzk fil gen`) to take the inputs from.
    #[arg(long)]
    pub fixtures: Option<PathBuf>,
    /// PoRep: the C1 output (curio's wrapper or the raw JSON) instead.
    #[arg(long)]
    pub c1: Option<PathBuf>,
    #[arg(long)]
    pub miner: Option<u64>,
    #[arg(long)]
    pub sector: Option<u64>,
    /// The request id (job id and idempotency key).
    #[arg(long, default_value = "")]
    pub id: String,
    /// low, normal, high or critical (default: the kind's, as curio sends).
    #[arg(long)]
    pub priority: Option<String>,
}

#[derive(clap::Subcommand)]
pub enum Call {
    /// Submit and wait; write the proof.
    Prove {
        #[command(flatten)]
        proof: ProofArgs,
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Submit; print the job id.
    Submit {
        #[command(flatten)]
        proof: ProofArgs,
    },
    /// Wait for a job; write its proof.
    Await {
        job: String,
        /// 0: as long as it takes.
        #[arg(long, default_value_t = 0)]
        timeout_ms: u64,
        #[arg(long)]
        out: Option<PathBuf>,
    },
    Cancel {
        job: String,
    },
    Status {
        #[arg(long)]
        json: bool,
    },
    Metrics,
    /// Load a circuit's parameters now (`porep-32g`, or a file).
    Preload {
        circuit: String,
    },
    Evict {
        circuit: String,
    },
}

fn priority(p: Option<&str>) -> anyhow::Result<Priority> {
    Ok(match p {
        None => Priority::Unspecified,
        Some(s) => Priority::from_str_name(&s.to_ascii_uppercase())
            .with_context(|| format!("--priority: `{s}` is not low, normal, high or critical"))?,
    })
}

fn request(a: &ProofArgs) -> anyhow::Result<SubmitProofRequest> {
    let kind = ProofKind::parse(&a.kind)?;
    let prio = priority(a.priority.as_deref())?;
    let mut req = match &a.fixtures {
        Some(dir) => request_from_fixtures(dir, kind, &a.id, prio)?,
        None => SubmitProofRequest {
            request_id: a.id.clone(),
            proof_kind: cuzk::daemon::request::wire_kind(kind) as i32,
            priority: prio as i32,
            ..Default::default()
        },
    };
    if let Some(c1) = &a.c1 {
        req.vanilla_proof =
            std::fs::read(c1).with_context(|| format!("reading {}", c1.display()))?;
    }
    if let Some(m) = a.miner {
        req.miner_id = m;
    }
    if let Some(s) = a.sector {
        req.sector_number = s;
    }
    Ok(req)
}

fn print_result(r: &proto::AwaitProofResponse, out: Option<&PathBuf>) -> anyhow::Result<ExitCode> {
    let status = proto::await_proof_response::Status::try_from(r.status)
        .map_or("UNKNOWN", |s| s.as_str_name());
    println!(
        "job {}: {status} ({} bytes) total {} ms: queue {} ms, srs load {} ms, synthesis {} ms, device {} ms",
        r.job_id,
        r.proof.len(),
        r.total_ms,
        r.queue_wait_ms,
        r.srs_load_ms,
        r.synthesis_ms,
        r.gpu_compute_ms
    );
    if !r.error_message.is_empty() {
        println!("error: {}", r.error_message);
    }
    if let (Some(out), false) = (out, r.proof.is_empty()) {
        std::fs::write(out, &r.proof).with_context(|| format!("writing {}", out.display()))?;
        println!("proof written to {}", out.display());
    }
    Ok(
        if r.status == proto::await_proof_response::Status::Completed as i32 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        },
    )
}

async fn call(mut c: Client, call: Call) -> anyhow::Result<ExitCode> {
    match call {
        Call::Prove { proof, out } => {
            let submit = request(&proof)?;
            let r = c
                .prove(proto::ProveRequest {
                    submit: Some(submit),
                })
                .await?
                .into_inner();
            print_result(&r.result.unwrap_or_default(), out.as_ref())
        }
        Call::Submit { proof } => {
            let r = c.submit_proof(request(&proof)?).await?.into_inner();
            println!("job {} queued at position {}", r.job_id, r.queue_position);
            Ok(ExitCode::SUCCESS)
        }
        Call::Await {
            job,
            timeout_ms,
            out,
        } => {
            let r = c
                .await_proof(proto::AwaitProofRequest {
                    job_id: job,
                    timeout_ms,
                })
                .await?
                .into_inner();
            print_result(&r, out.as_ref())
        }
        Call::Cancel { job } => {
            let r = c
                .cancel_proof(proto::CancelProofRequest {
                    job_id: job.clone(),
                })
                .await?
                .into_inner();
            println!(
                "job {job} cancelled ({})",
                if r.was_running {
                    "it was running"
                } else {
                    "it was not running"
                }
            );
            Ok(ExitCode::SUCCESS)
        }
        Call::Status { json } => {
            let s = c.get_status(proto::GetStatusRequest {}).await?.into_inner();
            if json {
                println!("{}", serde_json::to_string_pretty(&status_json(&s))?);
            } else {
                println!("{:#?}", s);
            }
            Ok(ExitCode::SUCCESS)
        }
        Call::Metrics => {
            print!(
                "{}",
                c.get_metrics(proto::GetMetricsRequest {})
                    .await?
                    .into_inner()
                    .prometheus_text
            );
            Ok(ExitCode::SUCCESS)
        }
        Call::Preload { circuit } => {
            let r = c
                .preload_srs(proto::PreloadSrsRequest {
                    circuit_id: circuit.clone(),
                })
                .await?
                .into_inner();
            println!(
                "{circuit}: {} in {} ms",
                if r.already_loaded {
                    "already loaded"
                } else {
                    "loaded"
                },
                r.load_time_ms
            );
            Ok(ExitCode::SUCCESS)
        }
        Call::Evict { circuit } => {
            let r = c
                .evict_srs(proto::EvictSrsRequest {
                    circuit_id: circuit.clone(),
                })
                .await?
                .into_inner();
            println!(
                "{circuit}: {}",
                if r.was_loaded {
                    format!("evicted, {} bytes freed", r.freed_bytes)
                } else {
                    "was not loaded".into()
                }
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn status_json(s: &proto::GetStatusResponse) -> serde_json::Value {
    serde_json::json!({
        "gpus": s.gpus.iter().map(|g| serde_json::json!({"ordinal": g.ordinal, "name": g.name, "vram_total_bytes": g.vram_total_bytes, "vram_free_bytes": g.vram_free_bytes, "current_job_id": g.current_job_id, "current_proof_kind": g.current_proof_kind})).collect::<Vec<_>>(),
        "loaded_srs": s.loaded_srs.iter().map(|x| serde_json::json!({"circuit_id": x.circuit_id, "tier": proto::srs_status::Tier::try_from(x.tier).map_or("?", |t| t.as_str_name()), "size_bytes": x.size_bytes, "ref_count": x.ref_count})).collect::<Vec<_>>(),
        "queues": s.queues.iter().map(|q| serde_json::json!({"proof_kind": q.proof_kind, "pending": q.pending, "in_progress": q.in_progress})).collect::<Vec<_>>(),
        "total_proofs_completed": s.total_proofs_completed,
        "total_proofs_failed": s.total_proofs_failed,
        "uptime_seconds": s.uptime_seconds,
        "pinned_memory_bytes": s.pinned_memory_bytes,
        "pinned_memory_limit_bytes": s.pinned_memory_limit_bytes,
    })
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let tls = args.tls.client();
        let c = connect_with(&args.addr, args.token.as_deref(), tls.as_ref()).await?;
        call(c, args.call)
            .await
            .map_err(|e| match e.downcast::<tonic::Status>() {
                Ok(s) => anyhow::anyhow!("{:?}: {}", s.code(), s.message()),
                Err(e) => e,
            })
    })
}
