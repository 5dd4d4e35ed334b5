//! `cuzk graph`: the built-in graphs, and checking and drawing declarations.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

#[derive(clap::Subcommand)]
pub enum Action {
    /// The built-in graphs (`pipeline.variant`) and what each does differently.
    List,
    /// Validate a declaration file (or a built-in graph by name) under the
    /// config's overrides; errors name the file, node, edge or resource.
    Check { graph: String },
    /// Print a declaration as resolved (every value explicit), or draw it.
    Show {
        graph: String,
        /// Graphviz DOT instead of TOML.
        #[arg(long, conflicts_with = "svg")]
        dot: bool,
        /// A self-contained SVG instead of TOML.
        #[arg(long)]
        svg: bool,
        /// Write here instead of stdout.
        #[arg(long, short)]
        out: Option<PathBuf>,
    },
}

/// A built-in name or a file.
fn resolve(graph: &str, config: &cuzk::config::Config) -> anyhow::Result<cuzk::runtime::GraphSpec> {
    let path = Path::new(graph);
    if !path.exists()
        && let Some(text) = cuzk::pipelines::builtin(graph)
    {
        return Ok(cuzk::pipelines::parse(
            text,
            &format!("built-in graph `{graph}`"),
            config,
        )?);
    }
    Ok(cuzk::pipelines::load_file(path, config)?)
}

pub fn run(file: Option<&Path>, action: Action) -> anyhow::Result<ExitCode> {
    let config = super::load_config(file)?.config;
    match action {
        Action::List => {
            for name in cuzk::pipelines::builtin_names() {
                let spec = resolve(name, &config)?;
                println!("{name:<20} {}", spec.description);
            }
        }
        Action::Check { graph } => {
            let spec = resolve(&graph, &config)?;
            let chain = spec.validate()?;
            let order: Vec<&str> = chain
                .order
                .iter()
                .map(|&i| spec.nodes[i].name.as_str())
                .collect();
            println!(
                "{graph}: graph `{}` is valid: {}; at most {} partitions in flight on one device",
                spec.name,
                order.join(" -> "),
                spec.max_in_flight(1).map_or("?".into(), |n| n.to_string())
            );
        }
        Action::Show {
            graph,
            dot,
            svg,
            out,
        } => {
            let spec = resolve(&graph, &config)?;
            let text = if dot {
                cuzk::graph_view::dot(&spec)
            } else if svg {
                cuzk::graph_view::svg(&spec)?
            } else {
                cuzk::pipelines::Declaration::of(&spec).to_toml()
            };
            match out {
                Some(p) => {
                    std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?
                }
                None => print!("{text}"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
