//! The waterfall chart as SVG: time across, one lane per GPU worker and per
//! stage worker (or packed when workers are unknown), one bar per
//! partition-stage coloured by stage, a GPU-busy lane with idle gaps in red,
//! job extents and ends, and a legend.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::analyze::Summary;
use super::model::{Bar, Timeline, merge};

const WIDTH: f64 = 1400.0;
const LEFT: f64 = 170.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 56.0;
const LANE: f64 = 20.0;
const BAR: f64 = 14.0;

/// Stages in pipeline order, with their colours.
const KINDS: [(&str, &str); 12] = [
    ("SYNTH", "#4e79a7"),
    ("PREP", "#f28e2b"),
    ("GPU_STAGE", "#ff9da7"),
    ("GPU_HOST", "#f1a7a9"),
    ("GPU", "#e15759"),
    ("B_G2_HOST", "#a9d6d3"),
    ("B_G2", "#76b7b2"),
    ("ASSEMBLE", "#59a14f"),
    ("ARENA_WAIT", "#bab0ac"),
    ("LEASE_WAIT", "#d4a6c8"),
    ("GATE_WAIT", "#9c755f"),
    ("LOCK_WAIT", "#b07aa1"),
];
const OTHER: [&str; 4] = ["#edc948", "#af7aa1", "#86bcb6", "#d37295"];
const BUSY: &str = "#59a14f";
const IDLE: &str = "#d62728";

fn rank(kind: &str) -> usize {
    KINDS
        .iter()
        .position(|(k, _)| *k == kind)
        .unwrap_or(KINDS.len())
}

fn colour(kind: &str, others: &mut BTreeMap<String, &'static str>) -> &'static str {
    if let Some((_, c)) = KINDS.iter().find(|(k, _)| *k == kind) {
        return c;
    }
    let n = others.len();
    others
        .entry(kind.to_string())
        .or_insert(OTHER[n % OTHER.len()])
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Lane names in display order, and each bar's lane index.
fn lanes(bars: &[Bar]) -> (Vec<String>, Vec<usize>) {
    // Lanes with a known worker are fixed; others are packed greedily.
    let base: Vec<(usize, String)> = bars
        .iter()
        .map(|b| {
            let mut name = b.kind.clone();
            if let Some(l) = b
                .label
                .as_ref()
                .filter(|_| b.kind.ends_with(cuzk_engine::vocab::suffix::WAIT))
            {
                name = format!("{name} {l}");
            }
            if let Some(d) = b.device.as_ref().filter(|_| b.on_device()) {
                name = format!("{name} d{d}");
            }
            if let Some(w) = &b.worker {
                name = format!("{name} w{w}");
            }
            (rank(&b.kind), name)
        })
        .collect();
    // Pack lanes that still overlap (no worker, or waits of many partitions).
    let mut ends: BTreeMap<(usize, String), Vec<f64>> = BTreeMap::new();
    let mut order: Vec<usize> = (0..bars.len()).collect();
    order.sort_by(|&a, &b| bars[a].start.partial_cmp(&bars[b].start).expect("finite"));
    let mut packed = vec![(0usize, String::new()); bars.len()];
    for i in order {
        let key = base[i].clone();
        let slots = ends.entry(key.clone()).or_default();
        let slot = slots
            .iter()
            .position(|&e| e <= bars[i].start)
            .unwrap_or_else(|| {
                slots.push(f64::MIN);
                slots.len() - 1
            });
        slots[slot] = bars[i].end;
        let name = if slot == 0 {
            key.1.clone()
        } else {
            format!("{} #{}", key.1, slot + 1)
        };
        packed[i] = (key.0, name);
    }
    let mut names: Vec<(usize, String)> = packed.clone();
    names.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| super::natural_order(&a.1, &b.1)));
    names.dedup();
    let index: BTreeMap<&(usize, String), usize> =
        names.iter().enumerate().map(|(i, n)| (n, i)).collect();
    let lane_of = packed.iter().map(|p| index[p]).collect();
    (names.into_iter().map(|(_, n)| n).collect(), lane_of)
}

fn tick_step(span_ms: f64) -> f64 {
    let raw = span_ms / 10.0;
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(mag * 10.0)
}

/// Renders the chart; `title` goes on top.
pub fn render(t: &Timeline, summary: &Summary, title: &str) -> String {
    let span = (t.t1 - t.t0).max(1e-6);
    let x = |ms: f64| LEFT + (ms - t.t0) / span * (WIDTH - LEFT - RIGHT);
    let (names, lane_of) = lanes(&t.bars);
    let gpu_busy = merge(
        t.bars
            .iter()
            .filter(|b| b.is_device_work())
            .map(|b| (b.start, b.end))
            .collect(),
    );
    let has_gpu = !gpu_busy.is_empty();
    // Rows: jobs (packed so concurrent jobs do not overlap), GPU busy (if any), then the lanes.
    let mut job_row = vec![];
    let mut row_ends: Vec<f64> = vec![];
    for j in &t.jobs {
        let (a, b) = (j.submit.unwrap_or(j.first), j.end.unwrap_or(j.last));
        let row = row_ends.iter().position(|&e| e <= a).unwrap_or_else(|| {
            row_ends.push(f64::MIN);
            row_ends.len() - 1
        });
        row_ends[row] = b;
        job_row.push(row);
    }
    let jobs_rows = row_ends.len().max(1);
    let extra = jobs_rows + has_gpu as usize;
    let rows = extra + names.len();
    let legend_y = TOP + rows as f64 * LANE + 34.0;
    let height = legend_y + 40.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="Helvetica, Arial, sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="18" font-size="14" font-weight="bold">{}</text>"#,
        esc(title)
    );
    let gpu_note = summary
        .gpu
        .as_ref()
        .map_or("no GPU events".to_string(), |g| {
            format!(
                "GPU utilisation {:.1}% (window {:.1}%), {} idle gaps totalling {:.3} s",
                g.utilisation * 100.0,
                g.window_utilisation * 100.0,
                g.gaps.len(),
                // + 0.0: no "-0.000 s" when nothing was idle.
                g.gap_total_ms / 1e3 + 0.0
            )
        });
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="34" fill="#333">{} · verdict: {}</text>"##,
        esc(&gpu_note),
        esc(&summary.verdict)
    );

    // Time axis with grid lines.
    let step = tick_step(span);
    let bottom = TOP + rows as f64 * LANE;
    let mut tick = (t.t0 / step).ceil() * step;
    while tick <= t.t1 {
        let tx = x(tick);
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.1}" y1="{:.1}" x2="{tx:.1}" y2="{bottom:.1}" stroke="#e6e6e6"/><text x="{tx:.1}" y="{:.1}" text-anchor="middle" fill="#555">{:.3}s</text>"##,
            TOP - 4.0,
            TOP - 8.0,
            tick / 1e3
        );
        tick += step;
    }

    // Lane labels and stripes.
    let mut labels: Vec<String> = (0..jobs_rows)
        .map(|i| if i == 0 { "jobs".into() } else { String::new() })
        .collect();
    if has_gpu {
        labels.push("GPU busy / idle".into());
    }
    labels.extend(names.iter().cloned());
    for (i, name) in labels.iter().enumerate() {
        let y = TOP + i as f64 * LANE;
        if i % 2 == 1 {
            let _ = writeln!(
                s,
                r##"<rect x="{LEFT}" y="{y:.1}" width="{:.1}" height="{LANE}" fill="#f7f7f7"/>"##,
                WIDTH - LEFT - RIGHT
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            y + LANE / 2.0 + 4.0,
            esc(name)
        );
    }

    // Jobs: extents in the first row, dashed lines at each job's end.
    for (j, row) in t.jobs.iter().zip(&job_row) {
        let name = match &j.label {
            Some(l) if l != "job" => format!("job {} ({l})", j.job),
            _ => format!("job {}", j.job),
        };
        let (a, b) = (j.submit.unwrap_or(j.first), j.end.unwrap_or(j.last));
        let (xa, xb) = (x(a), x(b));
        let y0 = TOP + *row as f64 * LANE;
        let _ = writeln!(
            s,
            r##"<rect x="{xa:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#dddddd" stroke="#999"><title>{}: {:.3}-{:.3} s</title></rect>"##,
            y0 + 4.0,
            (xb - xa).max(1.0),
            BAR - 4.0,
            esc(&name),
            a / 1e3,
            b / 1e3
        );
        if xb - xa > 40.0 {
            let _ = writeln!(
                s,
                r##"<text x="{:.1}" y="{:.1}" fill="#333">{}</text>"##,
                xa + 3.0,
                y0 + 14.0,
                esc(&name)
            );
        }
        let _ = writeln!(
            s,
            r##"<line x1="{xb:.1}" y1="{:.1}" x2="{xb:.1}" y2="{bottom:.1}" stroke="#888" stroke-dasharray="3,3"/>"##,
            TOP + jobs_rows as f64 * LANE
        );
    }

    // GPU busy and idle.
    if has_gpu {
        let y = TOP + jobs_rows as f64 * LANE + (LANE - BAR) / 2.0;
        for (a, b) in &gpu_busy {
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{BAR}" fill="{BUSY}"/>"#,
                x(*a),
                (x(*b) - x(*a)).max(0.5)
            );
        }
        if let Some(g) = &summary.gpu {
            let gpu_top = TOP + extra as f64 * LANE;
            for gap in &g.gaps {
                let (xa, xb) = (x(gap.start_ms), x(gap.end_ms));
                let _ = writeln!(
                    s,
                    r#"<rect x="{xa:.1}" y="{y:.1}" width="{:.1}" height="{BAR}" fill="{IDLE}"><title>GPU idle {:.1} ms at {:.3} s</title></rect>"#,
                    (xb - xa).max(0.5),
                    gap.duration_ms,
                    gap.start_ms / 1e3
                );
                let _ = writeln!(
                    s,
                    r#"<rect x="{xa:.1}" y="{gpu_top:.1}" width="{:.1}" height="{:.1}" fill="{IDLE}" fill-opacity="0.07"/>"#,
                    (xb - xa).max(0.5),
                    names.len() as f64 * LANE
                );
            }
        }
    }

    // Bars.
    let mut others = BTreeMap::new();
    for (bar, &lane) in t.bars.iter().zip(&lane_of) {
        let y = TOP + (extra + lane) as f64 * LANE + (LANE - BAR) / 2.0;
        let (xa, xb) = (x(bar.start), x(bar.end));
        let w = (xb - xa).max(0.8);
        let c = colour(&bar.kind, &mut others);
        let who = format!(
            "{} job {}{}{}{}: {:.1} ms ({:.3}-{:.3} s)",
            bar.kind,
            bar.job,
            bar.partition
                .as_ref()
                .map_or(String::new(), |p| format!(" partition {p}")),
            bar.device
                .as_ref()
                .map_or(String::new(), |d| format!(" device {d}")),
            bar.label
                .as_ref()
                .map_or(String::new(), |l| format!(" [{l}]")),
            bar.duration(),
            bar.start / 1e3,
            bar.end / 1e3
        );
        let wait = bar.kind.ends_with(cuzk_engine::vocab::suffix::WAIT);
        let _ = writeln!(
            s,
            r##"<rect x="{xa:.1}" y="{y:.1}" width="{w:.1}" height="{BAR}" fill="{c}" fill-opacity="{}" stroke="#ffffff" stroke-width="0.5"><title>{}</title></rect>"##,
            if wait { 0.55 } else { 0.95 },
            esc(&who)
        );
        let text = match &bar.partition {
            Some(p) => format!("{}.{}", bar.job, p),
            None => bar.job.clone(),
        };
        if w > 7.0 * text.len() as f64 {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" fill="white" font-size="9">{}</text>"#,
                xa + 2.0,
                y + BAR - 3.5,
                esc(&text)
            );
        }
    }

    // Legend.
    let mut lx = LEFT;
    let mut kinds: Vec<&str> = vec![];
    for b in &t.bars {
        if !kinds.contains(&b.kind.as_str()) {
            kinds.push(&b.kind);
        }
    }
    kinds.sort_by_key(|k| rank(k));
    let mut entries: Vec<(String, &str)> = kinds
        .iter()
        .map(|k| (k.to_string(), colour(k, &mut others)))
        .collect();
    if has_gpu {
        entries.push(("GPU busy".into(), BUSY));
        entries.push(("GPU idle gap".into(), IDLE));
    }
    entries.push(("job end".into(), "#888888"));
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" font-weight="bold">legend</text>"#,
        LEFT - 6.0 - 40.0,
        legend_y + 10.0
    );
    for (name, c) in entries {
        let _ = writeln!(
            s,
            r#"<rect x="{lx:.1}" y="{legend_y:.1}" width="12" height="12" fill="{c}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 16.0,
            legend_y + 10.0,
            esc(&name)
        );
        lx += 28.0 + 7.0 * name.len() as f64;
    }
    s.push_str("</svg>\n");
    s
}
