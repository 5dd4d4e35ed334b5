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
    /// `cuzk-{name}-{i}` so profilers show which pool burns time), at the
    /// process's priority.
    pub fn add(&mut self, name: &str, threads: usize) -> anyhow::Result<()> {
        self.add_niced(name, threads, 0)
    }

    /// Adds a pool whose threads run `nice` levels below the process's
    /// priority (Linux; elsewhere at the process's own), so work on pools
    /// that are not niced (the express pool) takes the cores when both
    /// have work: bulk proofs yield to a WinningPoSt.
    pub fn add_niced(&mut self, name: &str, threads: usize, nice: u8) -> anyhow::Result<()> {
        let prefix = format!("cuzk-{name}");
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .thread_name(move |i| format!("{prefix}-{i}"))
            .start_handler(move |_| lower_thread_priority(nice))
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

/// Lowers the calling thread's priority by `by` nice levels (capped at 19,
/// the lowest). Lowering needs no privilege; a failure leaves the thread
/// at the process's priority, which is only slower for a WinningPoSt.
fn lower_thread_priority(by: u8) {
    if by == 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: plain syscalls on the calling thread's own id; no memory is passed.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        // getpriority returns -1 both for nice -1 and for an error: errno tells.
        *libc::__errno_location() = 0;
        let now = libc::getpriority(libc::PRIO_PROCESS, tid);
        if now == -1 && *libc::__errno_location() != 0 {
            return;
        }
        // On Linux PRIO_PROCESS with a thread id sets that thread alone.
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid, (now + i32::from(by)).min(19));
    }
}

/// The calling thread's nice value (Linux; 0 elsewhere).
pub fn thread_nice() -> i32 {
    #[cfg(target_os = "linux")]
    // SAFETY: as in `lower_thread_priority`.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        return libc::getpriority(libc::PRIO_PROCESS, tid);
    }
    #[allow(unreachable_code)]
    0
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A niced pool's threads run that many levels below the thread that
    /// built it; a plain pool's at its level.
    #[test]
    #[cfg(target_os = "linux")]
    fn niced_pools_run_below_the_process() {
        let base = thread_nice();
        let mut pools = CpuPools::new();
        pools.add_niced("bulk", 2, 5).unwrap();
        pools.add("express", 1).unwrap();
        let on = |name: &str| pools.get(name).unwrap().install(thread_nice);
        assert_eq!(on("bulk"), (base + 5).min(19));
        assert_eq!(on("express"), base);
    }
}
