//! What the side-by-side benchmarks share: each side runs in a child
//! process (the benchmark binary, re-executed with `SIDE_ENV` set) that
//! prints `RESULT <side> <seconds> <peak RSS bytes>`.
#![allow(dead_code)]

use std::process::Command;

/// Names the side a re-executed benchmark runs.
pub const SIDE_ENV: &str = "CUZK_BENCH_SIDE";

/// Runs `side` in a child process: its seconds and peak RSS.
pub fn run_side(side: &str) -> (f64, u64) {
    let out = Command::new(std::env::current_exe().unwrap())
        .env(SIDE_ENV, side)
        .output()
        .expect("re-executing the benchmark");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{side} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("RESULT "))
        .expect("the child reports a result");
    let f: Vec<&str> = line.split_whitespace().collect();
    (f[2].parse().unwrap(), f[3].parse().unwrap())
}

/// The median (sorts `v`).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// `reps` rounds of every side in turn (so machine noise hits them alike),
/// printing each run: per side, its times and its peak RSS.
pub fn interleave(
    sides: &[String],
    reps: usize,
    mib: impl Fn(u64) -> String,
) -> (Vec<Vec<f64>>, Vec<u64>) {
    let mut times = vec![vec![]; sides.len()];
    let mut peaks = vec![0u64; sides.len()];
    for rep in 0..reps {
        for (i, side) in sides.iter().enumerate() {
            let (t, peak) = run_side(side);
            println!("  rep {rep}: {side:<20} {t:>8.3} s  peak RSS {}", mib(peak));
            times[i].push(t);
            peaks[i] = peaks[i].max(peak);
        }
    }
    (times, peaks)
}
