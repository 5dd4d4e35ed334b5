//! A client of the daemon (`cuzk client`, `cuzk bench --addr`, the tests):
//! connecting over TCP or a unix socket with an optional bearer token, and
//! requests made from a fixtures directory (`cuzk fil gen`) as curio would
//! send them.

use std::path::{Path, PathBuf};

use anyhow::Context;
use cuzk_filecoin::ProofKind;
use cuzk_filecoin::fixtures::Meta;
use cuzk_filecoin::ids::{from_hex, sector_size_name};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use super::proto::proving_engine_client::ProvingEngineClient;
use super::proto::{Priority, SubmitProofRequest};
use super::request::wire_kind;
use super::server::{Listen, MAX_MESSAGE};

/// Adds `authorization: Bearer <token>` to every call.
#[derive(Clone)]
pub struct Bearer(Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut r: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            r.metadata_mut().insert("authorization", v.clone());
        }
        Ok(r)
    }
}

/// A connected client.
pub type Client =
    ProvingEngineClient<tonic::service::interceptor::InterceptedService<Channel, Bearer>>;

/// TLS for a client: the CA certificates the daemon's certificate is
/// checked against, and the client's own certificate and key where the
/// daemon asks for one (`daemon.tls_client_ca`). PEM files.
#[derive(Clone, Debug, Default)]
pub struct ClientTls {
    pub ca: PathBuf,
    pub identity: Option<(PathBuf, PathBuf)>,
}

impl ClientTls {
    fn config(&self) -> anyhow::Result<ClientTlsConfig> {
        let read = |what: &str, p: &Path| {
            std::fs::read(p).with_context(|| format!("reading the {what} {}", p.display()))
        };
        let mut tls =
            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read("CA", &self.ca)?));
        if let Some((cert, key)) = &self.identity {
            tls = tls.identity(Identity::from_pem(
                read("client certificate", cert)?,
                read("client key", key)?,
            ));
        }
        Ok(tls)
    }
}

/// Connects to `addr` (`HOST:PORT` or `unix:///path`).
pub async fn connect(addr: &str, token: Option<&str>) -> anyhow::Result<Client> {
    connect_with(addr, token, None).await
}

/// Connects to `addr` (`HOST:PORT`, `https://HOST:PORT` or
/// `unix:///path`); an https address needs `tls`, and the daemon's
/// certificate must name its host.
pub async fn connect_with(
    addr: &str,
    token: Option<&str>,
    tls: Option<&ClientTls>,
) -> anyhow::Result<Client> {
    let channel = if addr.starts_with("https://") {
        let tls = tls.with_context(|| {
            format!("{addr} is TLS: give the CA that issued the daemon's certificate (--tls-ca)")
        })?;
        Endpoint::try_from(addr.to_string())?
            .tls_config(tls.config()?)?
            .connect()
            .await
            .with_context(|| format!("connecting to the daemon at {addr}"))?
    } else {
        plain(addr).await?
    };
    let bearer = token
        .map(|t| format!("Bearer {t}").parse())
        .transpose()
        .context("the token is not valid header text")?;
    Ok(
        ProvingEngineClient::with_interceptor(channel, Bearer(bearer))
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE),
    )
}

/// A plain-text channel over TCP or a unix socket.
async fn plain(addr: &str) -> anyhow::Result<Channel> {
    Ok(match Listen::parse(addr)? {
        Listen::Tcp(a) => Endpoint::try_from(format!("http://{a}"))?
            .connect()
            .await
            .with_context(|| format!("connecting to the daemon at {a}"))?,
        Listen::Unix(path) => {
            let p = path.clone();
            Endpoint::try_from("http://localhost")?
                .connect_with_connector(tower::service_fn(move |_| {
                    let p = p.clone();
                    async move {
                        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                            tokio::net::UnixStream::connect(p).await?,
                        ))
                    }
                }))
                .await
                .with_context(|| format!("connecting to the daemon at unix://{}", path.display()))?
        }
    })
}

fn read(dir: &Path, name: &str) -> anyhow::Result<Vec<u8>> {
    std::fs::read(dir.join(name)).with_context(|| format!("reading {}", dir.join(name).display()))
}

fn hex(what: &str, s: &str) -> anyhow::Result<Vec<u8>> {
    Ok(from_hex(what, s)?)
}

/// The request curio would send for `kind`, from a fixtures directory;
/// `priority` UNSPECIFIED takes the kind's default.
pub fn request_from_fixtures(
    dir: &Path,
    kind: ProofKind,
    request_id: &str,
    priority: Priority,
) -> anyhow::Result<SubmitProofRequest> {
    let meta = Meta::read(dir)?;
    let mut req = SubmitProofRequest {
        request_id: request_id.into(),
        proof_kind: wire_kind(kind) as i32,
        sector_size: meta.sector_size,
        priority: priority as i32,
        miner_id: meta.miner,
        ..Default::default()
    };
    match kind {
        ProofKind::Porep => {
            req.registered_proof = meta.porep.registered_proof;
            req.vanilla_proof = read(dir, &meta.porep.wrapper)?;
            req.sector_number = meta.porep.sector;
        }
        ProofKind::WindowPost | ProofKind::WinningPost => {
            let post = if kind == ProofKind::WindowPost {
                &meta.window
            } else {
                &meta.winning
            };
            req.registered_proof = post.registered_proof;
            req.randomness = hex("randomness", &post.randomness)?;
            req.partition_index = post.partition;
            req.vanilla_proofs = post
                .vanilla
                .iter()
                .map(|v| read(dir, v))
                .collect::<anyhow::Result<_>>()?;
        }
        ProofKind::Snap => {
            let snap = meta.snap.as_ref().with_context(|| {
                format!(
                    "{} has no SnapDeals inputs (a synthetic sector has none)",
                    dir.display()
                )
            })?;
            req.registered_proof = snap.registered_proof;
            req.sector_number = snap.sector;
            req.vanilla_proofs = snap
                .vanilla
                .iter()
                .map(|v| read(dir, v))
                .collect::<anyhow::Result<_>>()?;
            req.comm_r_old = hex("comm_r_old", &snap.comm_r_old)?;
            req.comm_r_new = hex("comm_r_new", &snap.comm_r_new)?;
            req.comm_d_new = hex("comm_d_new", &snap.comm_d_new)?;
        }
    }
    tracing::debug!(%kind, size = %sector_size_name(meta.sector_size), "request from fixtures");
    Ok(req)
}

/// What a load run against a daemon measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LoadReport {
    pub proofs: usize,
    pub clients: usize,
    pub completed: usize,
    pub failures: usize,
    pub first_error: Option<String>,
    pub wall_s: f64,
    pub s_per_proof: f64,
    pub latency_p50_s: f64,
    pub latency_p95_s: f64,
    pub latency_p99_s: f64,
    /// The daemon's resident set, sampled from its metrics during the run.
    pub daemon_rss_peak_bytes: u64,
    pub daemon_rss_mean_bytes: u64,
    pub daemon_rss_samples: usize,
}

impl LoadReport {
    /// The report as `cuzk bench --addr` prints it.
    pub fn render(&self) -> String {
        format!(
            "daemon load: {} proofs from {} clients in {:.1} s\n\
             throughput: {:.3} s/proof\n\
             latency:    p50 {:.3} s, p95 {:.3} s, p99 {:.3} s\n\
             completed:  {}/{} (failures {}{})\n\
             daemon RSS: peak {:.1} MiB, mean {:.1} MiB ({} samples)\n",
            self.proofs,
            self.clients,
            self.wall_s,
            self.s_per_proof,
            self.latency_p50_s,
            self.latency_p95_s,
            self.latency_p99_s,
            self.completed,
            self.proofs,
            self.failures,
            self.first_error
                .as_ref()
                .map_or(String::new(), |e| format!("; first: {e}")),
            self.daemon_rss_peak_bytes as f64 / (1 << 20) as f64,
            self.daemon_rss_mean_bytes as f64 / (1 << 20) as f64,
            self.daemon_rss_samples,
        )
    }
}

fn rss_of(metrics: &str) -> Option<u64> {
    metrics
        .lines()
        .find(|l| l.starts_with("cuzk_daemon_rss_bytes "))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map(|v| v as u64)
}

/// `proofs` Prove calls from `clients` concurrent clients, each request made
/// by `make(i)` (give each a distinct request id); the daemon's memory is
/// sampled from its metrics every 250 ms.
pub async fn load(
    addr: &str,
    token: Option<&str>,
    tls: Option<&ClientTls>,
    make: impl Fn(usize) -> SubmitProofRequest + Send + Sync + 'static,
    proofs: usize,
    clients: usize,
) -> anyhow::Result<LoadReport> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;
    let make = Arc::new(make);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients.max(1) {
        let mut c = connect_with(addr, token, tls).await?;
        let (make, next) = (make.clone(), next.clone());
        tasks.spawn(async move {
            let mut out = vec![];
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= proofs {
                    return out;
                }
                let t = Instant::now();
                let r = c
                    .prove(super::proto::ProveRequest {
                        submit: Some(make(i)),
                    })
                    .await;
                let result = match r {
                    Ok(r) => {
                        let r = r.into_inner().result.unwrap_or_default();
                        if r.status == super::proto::await_proof_response::Status::Completed as i32
                        {
                            Ok(())
                        } else {
                            Err(format!("job {}: {}", r.job_id, r.error_message))
                        }
                    }
                    Err(s) => Err(format!("{:?}: {}", s.code(), s.message())),
                };
                out.push((t.elapsed().as_secs_f64(), result));
            }
        });
    }
    let mut sampler = connect_with(addr, token, tls).await?;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampling = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut samples = vec![];
            while !stop.load(Ordering::SeqCst) {
                if let Ok(m) = sampler
                    .get_metrics(super::proto::GetMetricsRequest {})
                    .await
                    && let Some(rss) = rss_of(&m.into_inner().prometheus_text)
                {
                    samples.push(rss);
                }
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
            samples
        })
    };
    let mut latencies = vec![];
    let (mut failures, mut first_error) = (0, None);
    while let Some(done) = tasks.join_next().await {
        for (latency, result) in done? {
            match result {
                Ok(()) => latencies.push(latency),
                Err(e) => {
                    failures += 1;
                    first_error.get_or_insert(e);
                }
            }
        }
    }
    let wall_s = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::SeqCst);
    let samples = sampling.await?;
    latencies.sort_by(f64::total_cmp);
    let pct = |p| crate::bench::percentile(&latencies, p);
    Ok(LoadReport {
        proofs,
        clients,
        completed: latencies.len(),
        failures,
        first_error,
        wall_s,
        s_per_proof: wall_s / latencies.len().max(1) as f64,
        latency_p50_s: pct(50.0),
        latency_p95_s: pct(95.0),
        latency_p99_s: pct(99.0),
        daemon_rss_peak_bytes: samples.iter().copied().max().unwrap_or(0),
        daemon_rss_mean_bytes: samples.iter().sum::<u64>() / samples.len().max(1) as u64,
        daemon_rss_samples: samples.len(),
    })
}
