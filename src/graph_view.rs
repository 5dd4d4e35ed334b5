//! Drawing a graph declaration: Graphviz DOT text, and a self-contained SVG
//! (nodes left to right, coloured by role; edges with their capacity;
//! under them, one band per resource showing which nodes hold it or carry it).

use std::fmt::Write as _;

use cuzk_engine::{GraphSpec, Placement, ResourceKind, Role};

fn role_colour(role: Role) -> &'static str {
    match role {
        Role::Synth => "#6ab04c",
        Role::Cpu => "#7f8fa6",
        Role::Device => "#e58e26",
        Role::Transfer => "#8e44ad",
    }
}

fn workers(n: &cuzk_engine::NodeSpec) -> String {
    match n.placement {
        Placement::Shared => format!(
            "{} worker{}",
            n.workers,
            if n.workers == 1 { "" } else { "s" }
        ),
        Placement::PerDevice => format!("{} per device", n.workers),
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Graphviz DOT: `cuzk graph show FILE --dot | dot -Tpng > graph.png`.
pub fn dot(spec: &GraphSpec) -> String {
    let mut out = format!(
        "digraph \"{}\" {{\n  rankdir=LR;\n  node [shape=box, style=\"rounded,filled\", fontname=\"sans-serif\"];\n  source [shape=circle, label=\"submit\", fillcolor=\"#dfe6e9\"];\n",
        spec.name
    );
    for n in &spec.nodes {
        let mut label = format!(
            "{}\\n{} · {}\\n{} · pool {}",
            n.name,
            n.stage,
            n.role,
            workers(n),
            n.pool
        );
        for (what, list) in [
            ("holds", &n.holds),
            ("waits for", &n.waits_for),
            ("takes", &n.takes),
            ("releases", &n.releases),
        ] {
            if !list.is_empty() {
                let _ = write!(label, "\\n{what} {}", list.join(", "));
            }
        }
        let _ = writeln!(
            out,
            "  \"{}\" [label=\"{}\", fillcolor=\"{}\"];",
            n.name,
            label,
            role_colour(n.role)
        );
    }
    for e in &spec.edges {
        let _ = writeln!(
            out,
            "  \"{}\" -> \"{}\" [label=\"cap {}\"];",
            e.from, e.to, e.capacity
        );
    }
    out.push_str("}\n");
    out
}

/// A self-contained SVG of the graph in flow order.
pub fn svg(spec: &GraphSpec) -> anyhow::Result<String> {
    let chain = spec.validate()?;
    let (w, h, gap, x0, y0) = (170.0, 96.0, 46.0, 230.0, 56.0);
    let n = chain.order.len();
    let band_h = 22.0;
    let width = x0 + n as f64 * (w + gap) + 20.0;
    let height = y0 + h + 40.0 + spec.resources.len() as f64 * (band_h + 6.0) + 30.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="12">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#2d3436"/></marker></defs>
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="10" y="22" font-size="16" font-weight="bold">{}</text><text x="10" y="40" fill="#636e72">{}</text>"##,
        escape(&spec.name),
        escape(&spec.description)
    );
    let x_of = |pos: usize| x0 + pos as f64 * (w + gap);
    // The source, then each node and the edge into it.
    let _ = writeln!(
        out,
        r##"<circle cx="{:.1}" cy="{:.1}" r="22" fill="#dfe6e9" stroke="#2d3436"/><text x="{:.1}" y="{:.1}" text-anchor="middle">submit</text>"##,
        x0 - gap - 22.0,
        y0 + h / 2.0,
        x0 - gap - 22.0,
        y0 + h / 2.0 + 4.0
    );
    for (pos, &i) in chain.order.iter().enumerate() {
        let node = &spec.nodes[i];
        let x = x_of(pos);
        let from_x = if pos == 0 { x0 - gap } else { x - gap };
        let mid = y0 + h / 2.0;
        let _ = writeln!(
            out,
            r##"<line x1="{from_x:.1}" y1="{mid:.1}" x2="{:.1}" y2="{mid:.1}" stroke="#2d3436" marker-end="url(#arrow)"/><text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#636e72" font-size="10">cap {}</text>
<rect x="{x:.1}" y="{y0:.1}" width="{w}" height="{h}" rx="8" fill="{}" fill-opacity="0.18" stroke="{}" stroke-width="2"/>
<text x="{:.1}" y="{:.1}" font-weight="bold">{}</text>
<text x="{:.1}" y="{:.1}">{} · {}</text>
<text x="{:.1}" y="{:.1}">{} · pool {}</text>
<text x="{:.1}" y="{:.1}" fill="#636e72" font-size="10">event {}</text>"##,
            x - 2.0,
            (from_x + x) / 2.0,
            mid - 6.0,
            chain.capacity_in[pos],
            role_colour(node.role),
            role_colour(node.role),
            x + 10.0,
            y0 + 20.0,
            escape(&node.name),
            x + 10.0,
            y0 + 40.0,
            escape(&node.stage),
            node.role,
            x + 10.0,
            y0 + 58.0,
            workers(node),
            escape(&node.pool),
            x + 10.0,
            y0 + 78.0,
            escape(&node.event),
        );
    }
    // One band per resource: held (a block under each holder), or carried
    // (a bar from the node that takes it to the one that releases it).
    for (r_i, r) in spec.resources.iter().enumerate() {
        let y = y0 + h + 30.0 + r_i as f64 * (band_h + 6.0);
        let scope = if r.scope == cuzk_engine::Scope::PerDevice {
            ", per device"
        } else {
            ""
        };
        let size = r.size.map(|s| format!(", size {s}")).unwrap_or_default();
        let _ = writeln!(
            out,
            r##"<text x="10" y="{:.1}" font-size="11">{} <tspan fill="#636e72">({}{scope}{size})</tspan></text>"##,
            y + 15.0,
            escape(&r.name),
            r.kind.as_str()
        );
        let pos_of = |f: &dyn Fn(&cuzk_engine::NodeSpec) -> bool| {
            chain.order.iter().position(|&i| f(&spec.nodes[i]))
        };
        if r.kind.is_pooled() {
            let Some(from) = pos_of(&|n| n.takes.contains(&r.name)) else {
                continue;
            };
            let to = chain
                .order
                .iter()
                .enumerate()
                .skip(from)
                .find(|(_, i)| spec.nodes[**i].releases.contains(&r.name))
                .map_or(n - 1, |(p, _)| p);
            let colour = if r.kind == ResourceKind::Arena {
                "#0984e3"
            } else {
                "#e17055"
            };
            let _ = writeln!(
                out,
                r##"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{band_h}" rx="5" fill="{colour}" fill-opacity="0.35"/><text x="{:.1}" y="{:.1}" font-size="10">taken at {} · released after {}</text>"##,
                x_of(from) + 6.0,
                x_of(to) - x_of(from) + w - 12.0,
                x_of(from) + 12.0,
                y + 15.0,
                escape(&spec.nodes[chain.order[from]].name),
                escape(&spec.nodes[chain.order[to]].name),
            );
        } else {
            for (pos, &i) in chain.order.iter().enumerate() {
                let node = &spec.nodes[i];
                let how = if node.holds.contains(&r.name) {
                    "holds"
                } else if node.waits_for.contains(&r.name) {
                    "waits for"
                } else {
                    continue;
                };
                let fill = if how == "holds" { "#d63031" } else { "#fdcb6e" };
                let _ = writeln!(
                    out,
                    r##"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{band_h}" rx="5" fill="{fill}" fill-opacity="0.45"/><text x="{:.1}" y="{:.1}" font-size="10">{how}</text>"##,
                    x_of(pos) + 6.0,
                    w - 12.0,
                    x_of(pos) + 12.0,
                    y + 15.0,
                );
            }
        }
    }
    out.push_str("</svg>\n");
    Ok(out)
}
