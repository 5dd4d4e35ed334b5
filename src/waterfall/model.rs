//! Intervals from events: `<X>_START`/`<X>_END` pairs become bars,
//! `<X>_QUEUE`/`<X>_PICKUP` pairs become queue waits, and jobs get their
//! submission and end marks.

use std::collections::{BTreeMap, HashMap, VecDeque};

use cuzk_engine::vocab::{Role, key, suffix};

use super::parse::Record;

/// One stage run (or wait) of one partition.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// The event prefix: `SYNTH`, `GPU`, `GPU_HOST`, `LOCK_WAIT`, ...
    pub kind: String,
    pub job: String,
    pub partition: Option<String>,
    pub worker: Option<String>,
    pub device: Option<String>,
    /// A device span's label, or the lock or gate waited for.
    pub label: Option<String>,
    /// The node's declared role (`role=` in the detail), if the log has it.
    pub role: Option<Role>,
    pub start: f64,
    pub end: f64,
}

/// The event prefix the seeds' logs (which carry no roles) use for device work.
const LEGACY_DEVICE: &str = "GPU";
const LEGACY_SYNTH: &str = "SYNTH";

impl Bar {
    pub fn duration(&self) -> f64 {
        self.end - self.start
    }

    /// Device work: a device-role node's stage (its device spans, for a
    /// stage that reports them separately from its host time).
    pub fn is_device_work(&self) -> bool {
        match self.role {
            Some(r) => r == Role::Device && !self.kind.ends_with(suffix::HOST),
            None => self.kind == LEGACY_DEVICE,
        }
    }

    /// On a device lane: device work, transfers, and device stages' host time.
    pub fn on_device(&self) -> bool {
        match self.role {
            Some(r) => r.on_device() && !self.kind.ends_with(suffix::WAIT),
            None => self.kind.starts_with(LEGACY_DEVICE),
        }
    }

    pub fn is_synth(&self) -> bool {
        match self.role {
            Some(r) => r == Role::Synth && !self.kind.ends_with(suffix::WAIT),
            None => self.kind == LEGACY_SYNTH,
        }
    }
}

/// A partition waiting in a node's input edge.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueWait {
    pub kind: String,
    pub role: Option<Role>,
    pub start: f64,
    pub end: f64,
}

impl QueueWait {
    /// Waiting for a node that does device work.
    pub fn for_device(&self) -> bool {
        match self.role {
            Some(r) => r == Role::Device,
            None => self.kind == LEGACY_DEVICE,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct JobMark {
    pub job: String,
    /// The label the job was submitted with (a daemon job id, a workload).
    pub label: Option<String>,
    pub submit: Option<f64>,
    pub end: Option<f64>,
    /// First and last event of the job.
    pub first: f64,
    pub last: f64,
}

/// Everything a chart and a summary are drawn from.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    pub bars: Vec<Bar>,
    pub queues: Vec<QueueWait>,
    pub jobs: Vec<JobMark>,
    /// First and last event of the log.
    pub t0: f64,
    pub t1: f64,
    pub events: usize,
}

fn role(r: &Record) -> Option<Role> {
    r.get(key::ROLE).and_then(Role::parse)
}

type Key = (String, String, Option<String>, Option<String>);

fn key(base: &str, r: &Record) -> Key {
    let label = r
        .get(key::SPAN)
        .or_else(|| r.get(key::LOCK))
        .or_else(|| r.get(key::GATE))
        .or_else(|| r.get(key::POOL))
        .map(str::to_string);
    (
        base.to_string(),
        r.job.clone(),
        r.partition().map(str::to_string),
        label,
    )
}

/// Pairs events into bars and queue waits (records sorted by time).
pub fn build(records: &[Record]) -> Timeline {
    let mut open: HashMap<Key, VecDeque<&Record>> = HashMap::new();
    let mut queued: HashMap<Key, VecDeque<f64>> = HashMap::new();
    let mut jobs: BTreeMap<String, JobMark> = BTreeMap::new();
    let mut t = Timeline {
        t0: records.first().map_or(0.0, |r| r.t_ms),
        t1: records.last().map_or(0.0, |r| r.t_ms),
        events: records.len(),
        ..Timeline::default()
    };
    for r in records {
        if !r.job.is_empty() {
            let mark = jobs.entry(r.job.clone()).or_insert_with(|| JobMark {
                job: r.job.clone(),
                label: None,
                submit: None,
                end: None,
                first: r.t_ms,
                last: r.t_ms,
            });
            mark.last = r.t_ms;
            match r.event.as_str() {
                cuzk_engine::vocab::event::JOB_SUBMIT => {
                    mark.submit = Some(r.t_ms);
                    mark.label = r.get(key::LABEL).map(str::to_string);
                }
                cuzk_engine::vocab::event::JOB_END => mark.end = Some(r.t_ms),
                _ => {}
            }
        }
        if let Some(base) = r.event.strip_suffix(suffix::START) {
            open.entry(key(base, r)).or_default().push_back(r);
        } else if let Some(base) = r.event.strip_suffix(suffix::END) {
            if let Some(start) = open.get_mut(&key(base, r)).and_then(VecDeque::pop_front) {
                t.bars.push(Bar {
                    kind: base.to_string(),
                    job: r.job.clone(),
                    partition: r.partition().map(str::to_string),
                    worker: start.worker().or(r.worker()).map(str::to_string),
                    device: start.device().or(r.device()).map(str::to_string),
                    label: key(base, r).3,
                    role: role(start).or_else(|| role(r)),
                    start: start.t_ms,
                    end: r.t_ms.max(start.t_ms),
                });
            }
        } else if let Some(base) = r.event.strip_suffix(suffix::QUEUE) {
            queued.entry(key(base, r)).or_default().push_back(r.t_ms);
        } else if let Some(base) = r.event.strip_suffix(suffix::PICKUP)
            && let Some(start) = queued.get_mut(&key(base, r)).and_then(VecDeque::pop_front)
        {
            t.queues.push(QueueWait {
                kind: base.to_string(),
                role: role(r),
                start,
                end: r.t_ms,
            });
        }
    }
    t.bars
        .sort_by(|a, b| a.start.partial_cmp(&b.start).expect("finite"));
    t.jobs = jobs.into_values().collect();
    t
}

/// Merges intervals into disjoint, sorted ones.
pub fn merge(mut intervals: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    intervals.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    let mut out: Vec<(f64, f64)> = vec![];
    for (s, e) in intervals {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::parse::parse;
    use super::*;

    #[test]
    fn pairs_by_job_partition_and_span() {
        let log = "\
TIMELINE,0,JOB_SUBMIT,1,partitions=2
TIMELINE,1,GPU_QUEUE,1,partition=0
TIMELINE,2,GPU_PICKUP,1,partition=0,worker=0
TIMELINE,2,GPU_START,1,partition=0,worker=0,span=ntt
TIMELINE,3,GPU_START,1,partition=1,worker=1
TIMELINE,5,GPU_END,1,partition=0,worker=0,span=ntt
TIMELINE,6,GPU_END,1,partition=1,worker=1
TIMELINE,7,JOB_END,1,ok=true
";
        let t = build(&parse(log));
        assert_eq!(t.bars.len(), 2);
        assert_eq!(
            (t.bars[0].start, t.bars[0].end, t.bars[0].label.as_deref()),
            (2.0, 5.0, Some("ntt"))
        );
        assert_eq!((t.bars[1].start, t.bars[1].end), (3.0, 6.0));
        assert_eq!(
            t.queues,
            [QueueWait {
                kind: "GPU".into(),
                role: None,
                start: 1.0,
                end: 2.0
            }]
        );
        assert_eq!((t.jobs[0].submit, t.jobs[0].end), (Some(0.0), Some(7.0)));
        assert_eq!(
            merge(vec![(3.0, 6.0), (2.0, 5.0), (8.0, 9.0)]),
            [(2.0, 6.0), (8.0, 9.0)]
        );
    }
}
