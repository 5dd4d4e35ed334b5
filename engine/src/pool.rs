//! Named CPU pools (rayon) that run stage work off the async runtime.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// The pool express workers run CRITICAL stages on, when a set has one (else
/// they run on their node's pool, behind whatever it is busy with).
pub const EXPRESS: &str = "express";

/// A set of named rayon pools. Nodes name the pool their stage runs on.
#[derive(Clone, Default)]
pub struct CpuPools {
    pools: BTreeMap<String, Arc<rayon::ThreadPool>>,
}

impl CpuPools {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a pool of `threads` threads named `name` (threads are named
    /// `cuzk-{name}-{i}` so profilers show which pool burns time).
    pub fn add(&mut self, name: &str, threads: usize) -> anyhow::Result<()> {
        let prefix = format!("cuzk-{name}");
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .thread_name(move |i| format!("{prefix}-{i}"))
            .build()
            .map_err(|e| anyhow::anyhow!("cannot start CPU pool `{name}`: {e}"))?;
        self.pools.insert(name.to_string(), Arc::new(pool));
        Ok(())
    }

    /// Makes `name` another name for the existing pool `of`.
    pub fn alias(&mut self, name: &str, of: &str) -> anyhow::Result<()> {
        let pool = self
            .get(of)
            .ok_or_else(|| anyhow::anyhow!("no CPU pool `{of}` to alias as `{name}`"))?;
        self.pools.insert(name.to_string(), pool);
        Ok(())
    }

    pub fn with(mut self, name: &str, threads: usize) -> anyhow::Result<Self> {
        self.add(name, threads)?;
        Ok(self)
    }

    pub fn get(&self, name: &str) -> Option<Arc<rayon::ThreadPool>> {
        self.pools.get(name).cloned()
    }

    pub fn names(&self) -> Vec<&str> {
        self.pools.keys().map(String::as_str).collect()
    }

    pub fn threads(&self, name: &str) -> Option<usize> {
        self.pools.get(name).map(|p| p.current_num_threads())
    }
}

/// Runs `f` on `pool` and awaits its result. A panic in `f` comes back as an
/// error carrying the panic message instead of tearing down the worker.
pub(crate) async fn run_on<R: Send + 'static>(
    pool: &rayon::ThreadPool,
    f: impl FnOnce() -> R + Send + 'static,
) -> Result<R, String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    pool.spawn(move || {
        let result = catch_unwind(AssertUnwindSafe(f)).map_err(|p| panic_message(&*p));
        let _ = tx.send(result);
    });
    rx.await
        .unwrap_or_else(|_| Err("the CPU pool dropped the task".into()))
}

/// What a caught panic said ("panicked: <message>").
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = payload.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".into()
    }
}
