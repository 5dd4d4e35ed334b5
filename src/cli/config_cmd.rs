//! `cuzk config show`: the effective configuration and where each value came from.

use std::path::Path;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Action {
    /// Print every key with its effective value and its origin (default,
    /// file or environment variable), then the graph the variant declares.
    Show,
}

pub fn run(file: Option<&Path>, action: Action) -> anyhow::Result<ExitCode> {
    match action {
        Action::Show => {
            let loaded = super::load_config(file)?;
            print!("{}", loaded.show());
            let graph = cuzk::pipelines::graph(&loaded.config, cuzk::pipelines::DevicePool::Cpu)?;
            println!("# graph of variant `{}`:", graph.name);
            for e in &graph.edges {
                let node = graph.node_named(&e.to).expect("validated");
                let mut line = format!(
                    "#   {} -> {} (capacity {}), {} worker(s){} on pool {}",
                    e.from,
                    e.to,
                    e.capacity,
                    node.workers,
                    if node.placement == cuzk::runtime::Placement::PerDevice {
                        " per device"
                    } else {
                        ""
                    },
                    node.pool
                );
                if !node.holds.is_empty() {
                    line.push_str(&format!(", holds {}", node.holds.join(", ")));
                }
                if !node.waits_for.is_empty() {
                    line.push_str(&format!(", waits for {}", node.waits_for.join(", ")));
                }
                println!("{line}");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
