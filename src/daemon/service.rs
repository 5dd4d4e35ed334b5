//! The `cuzk.v1.ProvingEngine` gRPC service over the daemon's core, and the
//! bearer-token check every call passes first.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tonic::{Request, Response, Status};

use super::core::{Core, Refused};
use super::jobs::{Ending, JobEntry, Outcome};
use super::proto::{self, await_proof_response::Status as AwaitStatus};

/// The service; cheap to clone.
#[derive(Clone)]
pub struct Service {
    pub core: Arc<Core>,
}

fn refused(e: Refused) -> Status {
    match e {
        Refused::Invalid(m) => Status::invalid_argument(m),
        Refused::Exhausted(m) => Status::resource_exhausted(m),
        Refused::Draining => Status::unavailable(e.to_string()),
        Refused::Internal(m) => Status::internal(m),
    }
}

/// An id as an error message may echo it: at most 80 characters, so an
/// unknown megabyte id is not sent back whole.
fn shown(id: &str) -> String {
    match id.char_indices().nth(80) {
        Some((cut, _)) => format!("{}… ({} bytes)", &id[..cut], id.len()),
        None => id.to_string(),
    }
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// The AwaitProof answer for a job's outcome (or TIMEOUT when it has none).
fn answer(job: &JobEntry, outcome: Option<&Outcome>) -> proto::AwaitProofResponse {
    let Some(o) = outcome else {
        return proto::AwaitProofResponse {
            job_id: job.id.clone(),
            status: AwaitStatus::Timeout as i32,
            error_message: "the job has not finished yet".into(),
            total_ms: ms(job.submitted.elapsed()),
            ..Default::default()
        };
    };
    let t = &o.timings;
    proto::AwaitProofResponse {
        job_id: job.id.clone(),
        status: match o.ending {
            Ending::Completed => AwaitStatus::Completed,
            Ending::Failed => AwaitStatus::Failed,
            Ending::Cancelled => AwaitStatus::Cancelled,
        } as i32,
        proof: o.proof.clone(),
        error_message: o.error.clone(),
        queue_wait_ms: ms(t.queue_wait),
        srs_load_ms: ms(t.srs_load),
        synthesis_ms: ms(t.synthesis),
        gpu_compute_ms: ms(t.gpu_compute),
        total_ms: ms(t.total),
    }
}

/// Cancels a job `Prove` created when the last `Prove` call waiting on it
/// goes away unanswered (its client hung up: no one will read the proof,
/// and the GPU time is better spent on the next job).
struct ProveGuard(Arc<JobEntry>, Arc<Core>);

impl Drop for ProveGuard {
    fn drop(&mut self) {
        let last = self.0.prove_waiters.fetch_sub(1, Ordering::SeqCst) == 1;
        if last && self.0.made_by_prove && self.0.outcome().is_none() {
            tracing::warn!(job = %self.0.id, "the Prove call was dropped by its client: cancelling the job");
            self.1.cancel(&self.0.id);
        }
    }
}

#[tonic::async_trait]
impl proto::proving_engine_server::ProvingEngine for Service {
    async fn submit_proof(
        &self,
        request: Request<proto::SubmitProofRequest>,
    ) -> Result<Response<proto::SubmitProofResponse>, Status> {
        let (job, position) = self
            .core
            .submit(request.into_inner(), false)
            .await
            .map_err(refused)?;
        Ok(Response::new(proto::SubmitProofResponse {
            job_id: job.id.clone(),
            queue_position: position,
            assigned_gpu: String::new(),
        }))
    }

    async fn await_proof(
        &self,
        request: Request<proto::AwaitProofRequest>,
    ) -> Result<Response<proto::AwaitProofResponse>, Status> {
        let req = request.into_inner();
        let job =
            self.core.jobs.get(&req.job_id).ok_or_else(|| {
                Status::not_found(format!("job_id: no job `{}`", shown(&req.job_id)))
            })?;
        let timeout = (req.timeout_ms > 0).then(|| Duration::from_millis(req.timeout_ms));
        let outcome = job.wait(timeout).await;
        Ok(Response::new(answer(&job, outcome.as_deref())))
    }

    async fn prove(
        &self,
        request: Request<proto::ProveRequest>,
    ) -> Result<Response<proto::ProveResponse>, Status> {
        let submit = request
            .into_inner()
            .submit
            .ok_or_else(|| Status::invalid_argument("submit: is missing"))?;
        let (job, _) = self.core.submit(submit, true).await.map_err(refused)?;
        job.prove_waiters.fetch_add(1, Ordering::SeqCst);
        let _guard = ProveGuard(job.clone(), self.core.clone());
        let outcome = job.wait(None).await;
        Ok(Response::new(proto::ProveResponse {
            result: Some(answer(&job, outcome.as_deref())),
        }))
    }

    async fn cancel_proof(
        &self,
        request: Request<proto::CancelProofRequest>,
    ) -> Result<Response<proto::CancelProofResponse>, Status> {
        let id = request.into_inner().job_id;
        let was_running = self
            .core
            .cancel(&id)
            .ok_or_else(|| Status::not_found(format!("job_id: no job `{}`", shown(&id))))?;
        Ok(Response::new(proto::CancelProofResponse { was_running }))
    }

    async fn get_status(
        &self,
        _: Request<proto::GetStatusRequest>,
    ) -> Result<Response<proto::GetStatusResponse>, Status> {
        Ok(Response::new(self.core.snapshot().to_proto()))
    }

    async fn get_metrics(
        &self,
        _: Request<proto::GetMetricsRequest>,
    ) -> Result<Response<proto::GetMetricsResponse>, Status> {
        Ok(Response::new(proto::GetMetricsResponse {
            prometheus_text: super::metrics_text(&self.core),
        }))
    }

    async fn preload_srs(
        &self,
        request: Request<proto::PreloadSrsRequest>,
    ) -> Result<Response<proto::PreloadSrsResponse>, Status> {
        let id = request.into_inner().circuit_id;
        let (already_loaded, took) = self.core.preload(&id).await.map_err(srs_error)?;
        Ok(Response::new(proto::PreloadSrsResponse {
            already_loaded,
            load_time_ms: ms(took),
        }))
    }

    async fn evict_srs(
        &self,
        request: Request<proto::EvictSrsRequest>,
    ) -> Result<Response<proto::EvictSrsResponse>, Status> {
        let id = request.into_inner().circuit_id;
        let (was_loaded, freed_bytes) = self.core.evict(&id).await.map_err(srs_error)?;
        Ok(Response::new(proto::EvictSrsResponse {
            was_loaded,
            freed_bytes,
        }))
    }
}

fn srs_error(message: String) -> Status {
    if message.contains("missing parameter file") || message.contains("does not exist") {
        Status::not_found(message)
    } else {
        Status::invalid_argument(message)
    }
}

/// Whether `given` is the configured `token`, surrounding whitespace
/// ignored on both sides. Compares SHA-256 digests without an early exit,
/// so neither where they differ nor the token's length shows in the time.
pub fn token_matches(given: &str, token: &str) -> bool {
    use sha2::{Digest, Sha256};
    let (a, b) = (
        Sha256::digest(given.trim().as_bytes()),
        Sha256::digest(token.trim().as_bytes()),
    );
    let diff = a
        .iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The token of an `authorization` value: `Bearer <token>`, the scheme in
/// any case (RFC 9110), the token trimmed.
pub fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(char::is_whitespace)?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The interceptor every call passes before its body is read: the peer
/// must be in `daemon.allow_from` (when set; loopback and unix-socket peers
/// always are), and the call must carry `authorization: Bearer <token>`
/// (when a token is set). Refusals are logged with the peer.
#[derive(Clone)]
pub struct Auth {
    token: Option<Arc<str>>,
    allow_from: Arc<[super::networks::Network]>,
}

impl Auth {
    pub fn new(token: Option<&str>, allow_from: Vec<super::networks::Network>) -> Self {
        Self {
            token: token.map(Arc::from),
            allow_from: allow_from.into(),
        }
    }

    fn peer_allowed(&self, peer: Option<std::net::SocketAddr>) -> bool {
        match peer {
            _ if self.allow_from.is_empty() => true,
            None => true, // a unix socket: its mode decides
            Some(p) => p.ip().is_loopback() || self.allow_from.iter().any(|n| n.contains(p.ip())),
        }
    }
}

impl tonic::service::Interceptor for Auth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let peer = request.remote_addr();
        let who = peer.map_or_else(|| "a local socket".to_string(), |p| p.to_string());
        if !self.peer_allowed(peer) {
            tracing::warn!(peer = %who, "refused a call from outside daemon.allow_from");
            return Err(Status::permission_denied(format!(
                "{who} is not in this daemon's `daemon.allow_from`"
            )));
        }
        let Some(token) = &self.token else {
            return Ok(request);
        };
        let given = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(bearer);
        match given {
            Some(given) if token_matches(given, token) => Ok(request),
            Some(_) => {
                tracing::warn!(peer = %who, "refused a call with a wrong bearer token");
                Err(Status::unauthenticated("the bearer token is wrong"))
            }
            None => {
                tracing::warn!(peer = %who, "refused a call without a bearer token");
                Err(Status::unauthenticated(
                    "this daemon needs `authorization: Bearer <token>` metadata",
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        assert!(token_matches("secret", "secret"));
        assert!(
            token_matches(" secret\n", "secret "),
            "whitespace on either side"
        );
        assert!(!token_matches("secret", "secreT"));
        assert!(!token_matches("secret", "secret2"));
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"), "scheme in any case");
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
        let mut auth = Auth::new(Some("s3"), vec![]);
        use tonic::service::Interceptor;
        assert_eq!(
            auth.call(Request::new(())).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        let mut r = Request::new(());
        r.metadata_mut()
            .insert("authorization", "Bearer s3".parse().unwrap());
        assert!(auth.call(r).is_ok());
        let mut r = Request::new(());
        r.metadata_mut()
            .insert("authorization", "Bearer s4".parse().unwrap());
        assert_eq!(
            auth.call(r).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
    }

    #[test]
    fn peers_outside_allow_from_are_refused() {
        use tonic::service::Interceptor;
        let nets = vec![super::super::networks::Network::parse("10.0.0.0/8").unwrap()];
        let auth = Auth::new(None, nets);
        let at = |s: &str| Some(s.parse().unwrap());
        assert!(auth.peer_allowed(at("10.1.2.3:5000")));
        assert!(auth.peer_allowed(at("127.0.0.1:5000")), "loopback always");
        assert!(auth.peer_allowed(None), "unix socket");
        assert!(!auth.peer_allowed(at("192.168.0.2:5000")));
        let mut open = Auth::new(None, vec![]);
        assert!(open.call(Request::new(())).is_ok());
    }
}
