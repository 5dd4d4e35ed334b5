//! Jobs waiting for admission, served by aged priority: the highest level
//! first, oldest first within a level, and a job gains one level for every
//! `aging` it waits up to just below CRITICAL, so LOW work is delayed but
//! never starved, and no amount of waiting puts it ahead of a WinningPoSt.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_engine::aged_priority;

use super::jobs::JobEntry;

/// Curio's priorities: LOW 1 .. CRITICAL 4 (0 is never queued).
pub const LEVELS: usize = 5;

pub struct PendingQueue {
    levels: [VecDeque<Arc<JobEntry>>; LEVELS],
    aging: Duration,
    input_bytes: u64,
}

impl PendingQueue {
    pub fn new(aging: Duration) -> Self {
        Self {
            levels: Default::default(),
            aging,
            input_bytes: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.levels.iter().map(VecDeque::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.levels.iter().all(VecDeque::is_empty)
    }

    /// Bytes of the waiting jobs' inputs.
    pub fn input_bytes(&self) -> u64 {
        self.input_bytes
    }

    pub fn push(&mut self, job: Arc<JobEntry>) {
        let level = usize::from(job.priority).min(LEVELS - 1);
        self.input_bytes += job.input_bytes;
        self.levels[level].push_back(job);
    }

    pub fn remove(&mut self, id: &str) -> Option<Arc<JobEntry>> {
        for level in &mut self.levels {
            if let Some(i) = level.iter().position(|j| j.id == id) {
                let job = level.remove(i)?;
                self.input_bytes -= job.input_bytes;
                return Some(job);
            }
        }
        None
    }

    /// Every waiting job in the order admission takes them now.
    pub fn ordered(&self) -> Vec<Arc<JobEntry>> {
        let now = Instant::now();
        let mut all: Vec<(f64, Instant, Arc<JobEntry>)> = self
            .levels
            .iter()
            .enumerate()
            .flat_map(|(level, q)| {
                q.iter().map(move |j| {
                    let waited = now.saturating_duration_since(j.submitted);
                    (
                        aged_priority(level, waited, self.aging),
                        j.submitted,
                        j.clone(),
                    )
                })
            })
            .collect();
        // Highest effective priority first; ties to the older job.
        all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        all.into_iter().map(|(_, _, j)| j).collect()
    }

    /// 1-based place of `id` in admission order.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.ordered()
            .iter()
            .position(|j| j.id == id)
            .map(|i| i + 1)
    }
}
