//! `cuzk waterfall`: TIMELINE logs turned into a waterfall chart (SVG and a
//! self-contained HTML page) and the numbers behind a bottleneck verdict.

pub mod analyze;
pub mod model;
pub mod parse;
pub mod svg;

use std::path::{Path, PathBuf};

pub use analyze::Summary;
pub use model::Timeline;

/// A parsed log and its analysis.
pub struct Waterfall {
    pub timeline: Timeline,
    pub summary: Summary,
}

/// Parses and analyses a log; idle gaps under `min_gap_ms` are not counted.
pub fn from_log(text: &str, min_gap_ms: f64) -> Waterfall {
    let timeline = model::build(&parse::parse(text));
    let summary = analyze::analyze(&timeline, min_gap_ms);
    Waterfall { timeline, summary }
}

/// Orders lane names as people read them: runs of digits by value, so
/// `SYNTH w2` comes before `SYNTH w10`.
pub fn natural_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> Vec<(bool, u64, &str)> {
        let mut out = Vec::new();
        let mut rest = s;
        while let Some(c) = rest.chars().next() {
            let digit = c.is_ascii_digit();
            let end = rest
                .find(|ch: char| ch.is_ascii_digit() != digit)
                .unwrap_or(rest.len());
            let (head, tail) = rest.split_at(end);
            let value = if digit {
                head.parse().unwrap_or(u64::MAX)
            } else {
                0
            };
            out.push((digit, value, head));
            rest = tail;
        }
        out
    }
    chunks(a).cmp(&chunks(b))
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A self-contained page: the chart inline (hover a bar for its details)
/// and the text summary.
pub fn html(svg: &str, summary: &Summary, title: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>body{{font-family:Helvetica,Arial,sans-serif;margin:16px;color:#222}}pre{{background:#f6f6f6;padding:10px;border:1px solid #ddd;font-size:12px}}.chart{{overflow-x:auto}}</style>\n</head><body>\n<h2>{t}</h2>\n<div class=\"chart\">\n{svg}</div>\n<h3>Summary</h3>\n<pre>{s}</pre>\n</body></html>\n",
        t = esc(title),
        s = esc(&summary.render()),
    )
}

impl Waterfall {
    /// Writes `<out>.svg` and `<out>.html` (whichever extension `out` has).
    pub fn write(&self, out: &Path, title: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
        let svg = svg::render(&self.timeline, &self.summary, title);
        let (svg_path, html_path) = (out.with_extension("svg"), out.with_extension("html"));
        if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&svg_path, &svg)?;
        std::fs::write(&html_path, html(&svg, &self.summary, title))?;
        Ok((svg_path, html_path))
    }
}

#[cfg(test)]
mod tests {
    use super::natural_order;

    #[test]
    fn lanes_sort_by_the_numbers_in_their_names() {
        let mut lanes = vec![
            "SYNTH w10",
            "SYNTH w2",
            "SYNTH w1",
            "PREP w0",
            "SYNTH w11",
            "SYNTH w0",
        ];
        lanes.sort_by(|a, b| natural_order(a, b));
        assert_eq!(
            lanes,
            [
                "PREP w0",
                "SYNTH w0",
                "SYNTH w1",
                "SYNTH w2",
                "SYNTH w10",
                "SYNTH w11"
            ]
        );
        assert!(natural_order("gpu d0 w1 #2", "gpu d0 w1 #10").is_lt());
    }
}
