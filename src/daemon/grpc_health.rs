//! The standard gRPC health service (`grpc.health.v1.Health`), for load
//! balancers, Kubernetes gRPC probes and `grpc_health_probe`: SERVING while
//! the daemon proves, NOT_SERVING while it drains or while its devices are
//! unhealthy (see [`super::health`]), so a supervisor can route around a
//! wedged GPU instead of seeing a live process.
//!
//! It answers for the whole server (`""`) and for `cuzk.v1.ProvingEngine`.
//! Like a liveness probe it carries no token: it reveals only that status.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tonic::server::NamedService;
use tonic_health::ServingStatus;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::server::HealthReporter;

use super::core::Core;
use super::proto::proving_engine_server::ProvingEngineServer;
use super::service::Service;

/// How often the reported status follows the daemon's.
const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// The service name clients ask about besides the server's `""`.
pub const ENGINE_SERVICE: &str = <ProvingEngineServer<Service> as NamedService>::NAME;

/// What the daemon would answer now.
pub fn status_of(core: &Core) -> ServingStatus {
    if core.is_draining() || core.health.unhealthy().is_some() {
        ServingStatus::NotServing
    } else {
        ServingStatus::Serving
    }
}

/// The health service, reporting `core`'s status until `core` is dropped.
pub async fn serve(core: &Arc<Core>) -> HealthServer<impl Health> {
    let (reporter, service) = tonic_health::server::health_reporter();
    let now = status_of(core);
    set(&reporter, now).await;
    tokio::spawn(follow(Arc::downgrade(core), reporter, now));
    service
}

async fn set(reporter: &HealthReporter, status: ServingStatus) {
    reporter.set_service_status("", status).await;
    reporter.set_service_status(ENGINE_SERVICE, status).await;
}

async fn follow(core: Weak<Core>, reporter: HealthReporter, mut last: ServingStatus) {
    let mut tick = tokio::time::interval(FOLLOW_EVERY);
    loop {
        tick.tick().await;
        let Some(core) = core.upgrade() else { return };
        let now = status_of(&core);
        drop(core);
        if now != last {
            tracing::info!(status = ?now, "gRPC health");
            set(&reporter, now).await;
            last = now;
        }
    }
}
