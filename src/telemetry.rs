//! Logs to stderr (human or JSON) and, when `tracing.otlp` is on, spans
//! exported over OTLP/gRPC to a collector such as Jaeger.

use cuzk_config::{Config, LogFormat};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::filter::{EnvFilter, LevelFilter, Targets};
use tracing_subscriber::prelude::*;

/// Installed telemetry; `shutdown` flushes spans still buffered.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Flushes and stops the span exporter. Blocks: call it off the async
    /// runtime's worker threads (e.g. in `spawn_blocking`) or after it.
    pub fn shutdown(self) {
        if let Some(p) = self.provider
            && let Err(e) = p.shutdown()
        {
            eprintln!("warning: flushing spans to the OTLP endpoint failed: {e}");
        }
    }
}

/// Installs the global subscriber. With OTLP on it must run inside a tokio
/// runtime, which must outlive the exporter.
pub fn init(config: &Config) -> anyhow::Result<Telemetry> {
    let fmt = log_layer(config)?;

    let (otel, provider) = if config.tracing.otlp {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(&config.tracing.endpoint)
            .build()
            .map_err(|e| anyhow::anyhow!("config error at `tracing.endpoint`: {e}"))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                Resource::builder()
                    .with_service_name(config.tracing.service_name.clone())
                    .build(),
            )
            .build();
        let layer = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("cuzk"))
            // Only the engine's job/partition/stage spans: never the
            // exporter's own h2, tonic, hyper or tower spans.
            .with_filter(Targets::new().with_target(cuzk_engine::spans::TARGET, LevelFilter::INFO));
        (Some(layer), Some(provider))
    } else {
        (None, None)
    };
    tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init()
        .map_err(|e| anyhow::anyhow!("installing the tracing subscriber: {e}"))?;
    Ok(Telemetry { provider })
}

/// Logs to stderr only (no trace export), for commands that run no engine
/// (`cuzk setup`, `cuzk fil params`): their progress and warnings show.
pub fn init_logs(config: &Config) -> anyhow::Result<()> {
    tracing_subscriber::registry()
        .with(log_layer(config)?)
        .try_init()
        .map_err(|e| anyhow::anyhow!("installing the tracing subscriber: {e}"))
}

/// stderr, human or JSON, filtered by RUST_LOG else `logging.level`.
fn log_layer(
    config: &Config,
) -> anyhow::Result<Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>>
{
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&config.logging.level))
        .map_err(|e| anyhow::anyhow!("config error at `logging.level`: {e}"))?;
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = match config.logging.format {
        LogFormat::Human => fmt.boxed(),
        LogFormat::Json => fmt.json().boxed(),
    };
    Ok(fmt.with_filter(filter).boxed())
}
