//! The engine embedded without default features compiles none of the
//! daemon's server stack (gRPC, HTTP, TLS, the CLI) nor the OTLP exporter.

#[test]
fn the_library_without_default_features_pulls_no_server_stack() {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "--locked",
            "--offline",
            "-p",
            "cuzk",
            "--no-default-features",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        tree.lines().any(|l| l.starts_with("cuzk-stages ")),
        "{tree}"
    );
    let server: Vec<&str> = tree
        .lines()
        .filter(|l| {
            let name = l.split(' ').next().unwrap_or("");
            [
                "tonic",
                "axum",
                "hyper",
                "clap",
                "rustls",
                "tokio-rustls",
                "prost",
                "opentelemetry-otlp",
            ]
            .contains(&name)
        })
        .collect();
    assert!(server.is_empty(), "compiled without the daemon: {server:?}");
}
