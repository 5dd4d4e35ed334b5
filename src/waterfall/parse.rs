//! Reading TIMELINE lines: `TIMELINE,<offset_ms>,<event>,<job_id>,<detail>`,
//! anywhere in a line (daemon logs prefix them with timestamps), with the
//! detail as `key=value` pairs. The seeds' original logs are read too: their
//! details may be bare partition numbers or `key:value` tokens.

use std::collections::BTreeMap;

/// One TIMELINE event.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub t_ms: f64,
    pub event: String,
    pub job: String,
    pub detail: BTreeMap<String, String>,
}

impl Record {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.detail.get(key).map(String::as_str)
    }

    fn first_of(&self, keys: &[&str]) -> Option<&str> {
        keys.iter().find_map(|k| self.get(k))
    }

    /// The partition, under any of the names logs use for it.
    pub fn partition(&self) -> Option<&str> {
        self.first_of(&["partition", "part", "p", "partition_idx", "partition_index"])
    }

    pub fn worker(&self) -> Option<&str> {
        self.first_of(&["worker", "w", "worker_id", "gpu_worker"])
    }

    pub fn device(&self) -> Option<&str> {
        self.first_of(&["device", "gpu", "dev", "device_id"])
    }
}

fn parse_detail(detail: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    // `key=value` pairs are comma-separated and values may hold spaces;
    // anything else is the seeds' looser tokens (bare partition numbers,
    // `p3`, `w1`, `key:value`), separated by spaces or semicolons too.
    for field in detail.split(',').map(str::trim).filter(|f| !f.is_empty()) {
        if let Some((k, v)) = field.split_once('=') {
            out.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            continue;
        }
        for token in field.split([';', ' ', '\t']).filter(|t| !t.is_empty()) {
            let digits = |n: &str| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit());
            if let Some((k, v)) = token.split_once(':') {
                out.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            } else if digits(token) {
                out.entry("partition".to_string())
                    .or_insert_with(|| token.to_string());
            } else if let Some(n) = token.strip_prefix('p').filter(|n| digits(n)) {
                out.entry("partition".to_string())
                    .or_insert_with(|| n.to_string());
            } else if let Some(n) = token.strip_prefix('w').filter(|n| digits(n)) {
                out.entry("worker".to_string())
                    .or_insert_with(|| n.to_string());
            }
        }
    }
    out
}

/// One line, if it carries a TIMELINE event.
pub fn parse_line(line: &str) -> Option<Record> {
    let at = line.find("TIMELINE,")?;
    let mut fields = line[at + "TIMELINE,".len()..].splitn(4, ',');
    let t_ms: f64 = fields.next()?.trim().parse().ok()?;
    let event = fields.next()?.trim().to_string();
    let job = fields.next().unwrap_or("").trim().to_string();
    let detail = parse_detail(fields.next().unwrap_or("").trim());
    if event.is_empty() || !t_ms.is_finite() {
        return None;
    }
    Some(Record {
        t_ms,
        event,
        job,
        detail,
    })
}

/// Every TIMELINE event in `text`, sorted by time (stable for equal times).
pub fn parse(text: &str) -> Vec<Record> {
    let mut out: Vec<Record> = text.lines().filter_map(parse_line).collect();
    out.sort_by(|a, b| a.t_ms.partial_cmp(&b.t_ms).expect("finite"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_our_lines_and_the_seeds_forms() {
        let r = parse_line(
            "TIMELINE,12.500,GPU_START,7,partition=3,worker=1,device=0,stage=gpu_ntt_msm",
        )
        .unwrap();
        assert_eq!(
            (r.t_ms, r.event.as_str(), r.job.as_str()),
            (12.5, "GPU_START", "7")
        );
        assert_eq!(
            (r.partition(), r.worker(), r.device()),
            (Some("3"), Some("1"), Some("0"))
        );
        let r = parse_line("2025-01-01T00:00:00Z INFO daemon: TIMELINE,4120,SYNTH_END,sector-9,4")
            .unwrap();
        assert_eq!(
            (r.t_ms, r.job.as_str(), r.partition()),
            (4120.0, "sector-9", Some("4"))
        );
        let r = parse_line("TIMELINE,1,GPU_END,a,p2 w1").unwrap();
        assert_eq!((r.partition(), r.worker()), (Some("2"), Some("1")));
        assert!(parse_line("no event here").is_none());
        assert!(parse_line("TIMELINE,notanumber,X,1,").is_none());
        let r = parse_line("TIMELINE,2,DEVICE_FAULT,1,partition=4,error=device 1 failed: boom")
            .unwrap();
        assert_eq!(r.get("error"), Some("device 1 failed: boom"));
    }
}
