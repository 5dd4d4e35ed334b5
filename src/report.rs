//! Summaries of where partitions spent their time, for the CLI's reports.

use std::collections::BTreeMap;
use std::time::Duration;

use cuzk_engine::StageTiming;
use serde::{Deserialize, Serialize};

/// Mean times of one node over many partitions.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StageSummary {
    pub node: String,
    pub count: usize,
    /// Mean seconds in the node's input edge.
    pub queued_s: f64,
    /// Mean seconds waiting for arenas, gates and locks after pickup.
    pub waited_s: f64,
    /// Mean seconds running the stage.
    pub ran_s: f64,
    /// Backends that ran it (`cpu`, `gpu`), if the stage says.
    pub backend: Option<String>,
}

/// Summarises timings of many partitions, nodes in flow order.
pub fn summarise<'a>(partitions: impl IntoIterator<Item = &'a [StageTiming]>) -> Vec<StageSummary> {
    let mut order: Vec<String> = vec![];
    let mut acc: BTreeMap<String, (StageSummary, Duration, Duration, Duration)> = BTreeMap::new();
    for timings in partitions {
        for t in timings {
            let e = acc.entry(t.node.to_string()).or_insert_with(|| {
                order.push(t.node.to_string());
                (
                    StageSummary {
                        node: t.node.to_string(),
                        ..Default::default()
                    },
                    Duration::ZERO,
                    Duration::ZERO,
                    Duration::ZERO,
                )
            });
            e.0.count += 1;
            e.1 += t.queued;
            e.2 += t.waited;
            e.3 += t.ran;
            if let Some(b) = t.note("backend") {
                let seen = e.0.backend.get_or_insert_with(String::new);
                if !seen.split('+').any(|s| s == b) {
                    if !seen.is_empty() {
                        seen.push('+');
                    }
                    seen.push_str(b);
                }
            }
        }
    }
    order
        .into_iter()
        .map(|node| {
            let (mut s, q, w, r) = acc.remove(&node).expect("inserted with its order");
            let n = s.count.max(1) as f64;
            s.queued_s = q.as_secs_f64() / n;
            s.waited_s = w.as_secs_f64() / n;
            s.ran_s = r.as_secs_f64() / n;
            s
        })
        .collect()
}

/// A fixed-width table of stage summaries.
pub fn stage_table(stages: &[StageSummary]) -> String {
    let mut out = format!(
        "{:<14} {:<8} {:>10} {:>10} {:>10}\n",
        "stage", "backend", "run (s)", "wait (s)", "queue (s)"
    );
    for s in stages {
        out.push_str(&format!(
            "{:<14} {:<8} {:>10.3} {:>10.3} {:>10.3}\n",
            s.node,
            s.backend.as_deref().unwrap_or("-"),
            s.ran_s,
            s.waited_s,
            s.queued_s
        ));
    }
    out
}

/// Peak resident memory of this process so far (VmHWM), in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Starts this process's peak (VmHWM) again from its current resident set,
/// so a later [`peak_rss_bytes`] covers only what ran since: Linux's
/// `clear_refs` mode 5. False where that is not available.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Bytes as MiB with one decimal.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

#[cfg(test)]
mod tests {
    use super::{peak_rss_bytes, reset_peak_rss};

    #[test]
    fn the_peak_starts_again_from_the_resident_set() {
        // 256 MiB touched and handed back to the kernel (an allocation this
        // large is its own mapping): the peak stays up until it is reset.
        let big = vec![1u8; 256 << 20];
        std::hint::black_box(&big);
        drop(big);
        let before = peak_rss_bytes().expect("VmHWM on Linux");
        assert!(reset_peak_rss(), "/proc/self/clear_refs refused mode 5");
        let after = peak_rss_bytes().expect("VmHWM on Linux");
        assert!(
            after + (128 << 20) < before,
            "peak {after} bytes after the reset, {before} before"
        );
    }
}
