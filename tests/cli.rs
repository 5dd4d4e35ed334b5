//! The `cuzk` binary end to end: bad configs fail naming the key, `bench`
//! reports, `compare` produces the relative performance table.

mod common;

use std::process::Command;

fn cuzk() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cuzk"));
    c.env("CUZK_SRS__CACHE_DIR", common::param_dir());
    c.env("CUZK_GPU__BACKEND", "cpu");
    c.env("CUZK_THREADS__GROTH16", "2");
    c.env("CUZK_THREADS__SYNTHESIS", "2");
    c.env("RUST_LOG", "warn");
    c
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn bad_configs_fail_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (text, needle) in [
        (
            "[pipeline]\nvariant = \"quad_lock\"",
            "config error at `pipeline.variant`: no built-in graph `quad_lock` (built-in: serial, single_lock, single_lock_cpu_b2, two_lock, throttled, pce, pce_gpu)",
        ),
        (
            "[channels]\ndefault = 0",
            "config error at `channels.default`: must be at least 1 (got 0)",
        ),
        (
            "[pipeline]\nvaraint = \"serial\"",
            "config error at `pipeline.varaint`: unknown key `varaint`",
        ),
        (
            "[pipeline]\nvariant = \"two_lock\"\n[channels.into]\ngpu_compte = 1",
            "config error at `channels.into.gpu_compte`: graph `two_lock` has no such node (its nodes: synth, prep_msm, gpu_stage, gpu_compute, b_g2_msm, assemble)",
        ),
    ] {
        let cfg = write(dir.path(), "bad.toml", text);
        let out = cuzk()
            .arg("--config")
            .arg(&cfg)
            .args(["bench", "--log-size", "10", "-c", "1"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{text}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "for {text:?} stderr was: {stderr}");
    }
}

#[test]
fn environment_overrides_beat_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "c.toml", "[pipeline]\nvariant = \"serial\"\n");
    let out = cuzk()
        .env("CUZK_PIPELINE__VARIANT", "throttled")
        .arg("--config")
        .arg(&cfg)
        .args(["config", "show"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(stdout.contains("variant = \"throttled\""), "{stdout}");
    assert!(
        stdout.contains("# environment variable CUZK_PIPELINE__VARIANT"),
        "{stdout}"
    );
    assert!(
        stdout.contains("#   name = \"throttled\""),
        "the effective graph: {stdout}"
    );
    assert!(
        stdout.contains("#   waits_for = [\"synth_throttle\"]"),
        "{stdout}"
    );
}

/// `cuzk bench --quiet --log-size 10 ARGS --json`: its stdout and report,
/// after checking it succeeded.
fn bench(args: &[&str]) -> (String, cuzk::bench::BenchReport) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let out = cuzk()
        .args(["bench", "--quiet", "--log-size", "10"])
        .args(args)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (stdout, report)
}

#[test]
fn bench_reports_throughput_latency_and_stages() {
    let (stdout, report) = bench(&["--partitions", "2", "-c", "3", "-j", "2"]);
    assert!(stdout.contains("verified:   3/3 proofs"), "{stdout}");
    assert_eq!(
        (report.proofs, report.in_flight, report.verified),
        (3, 2, 3)
    );
    assert!(report.s_per_proof > 0.0 && report.s_per_proof <= report.wall_s);
    assert!(report.latency_p50_s <= report.latency_p95_s);
    let stages: Vec<_> = report.stages.iter().map(|s| s.node.as_str()).collect();
    assert_eq!(
        stages,
        ["synth", "prep_msm", "gpu_ntt_msm", "b_g2_msm", "assemble"]
    );
    assert!(report.stages.iter().all(|s| s.count == 6 && s.ran_s > 0.0));
    assert!(report.peak_rss_bytes > 0);
}

#[test]
fn bench_warmup_proofs_are_proved_but_not_counted() {
    let (stdout, report) = bench(&["--partitions", "2", "-c", "1", "-j", "1", "--warmup", "2"]);
    assert!(stdout.contains("(1 proofs in"), "{stdout}");
    assert!(stdout.contains("after 2 warm-up proofs"), "{stdout}");
    assert_eq!((report.proofs, report.verified, report.warmup), (1, 1, 2));
    // Only the measured proof's two partitions are in the stage figures.
    assert!(
        report.stages.iter().all(|s| s.count == 2),
        "{:?}",
        report.stages
    );
}

#[test]
fn compare_produces_a_row_per_config() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.toml", "[pipeline]\nvariant = \"serial\"\n");
    let b = write(
        dir.path(),
        "b.toml",
        "[pipeline]\nvariant = \"two_lock\"\n[channels.into]\ngpu_compute = 1\n",
    );
    // A third variant, written only as a graph file: compared beside the configs.
    let graph = cuzk::pipelines::builtin("serial")
        .unwrap()
        .replace("name = \"serial\"", "name = \"wide_synth\"")
        .replace(
            "workers = 2\npool = \"synth\"",
            "workers = 3\npool = \"synth\"",
        );
    let c = write(dir.path(), "wide_synth.toml", &graph);
    let json = dir.path().join("cmp.json");
    let md = dir.path().join("cmp.md");
    let out = cuzk()
        .arg("compare")
        .arg(&a)
        .arg(&b)
        .arg(&c)
        .args([
            "--log-size",
            "10",
            "--partitions",
            "2",
            "-c",
            "2",
            "-j",
            "2",
            "--reps",
            "2",
            "--json",
        ])
        .arg(&json)
        .arg("--markdown")
        .arg(&md)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["variant"], "serial");
    assert_eq!(rows[1]["variant"], "two_lock");
    assert_eq!(rows[2]["variant"], "wide_synth");
    assert_eq!(rows[0]["ratio"].as_f64(), Some(1.0));
    for r in rows {
        let s = r["s_per_proof"].as_f64().unwrap();
        assert!(s > 0.0 && s < 60.0, "{r}");
        assert!(
            r["s_per_proof_min"].as_f64().unwrap() <= s
                && s <= r["s_per_proof_max"].as_f64().unwrap()
        );
        assert_eq!(r["runs"].as_array().unwrap().len(), 2);
        assert_eq!(r["verified"], 4);
    }
    let ratio = rows[1]["ratio"].as_f64().unwrap();
    assert!(
        (ratio
            - rows[1]["s_per_proof"].as_f64().unwrap() / rows[0]["s_per_proof"].as_f64().unwrap())
        .abs()
            < 1e-9
    );
    assert!(stdout.lines().any(|l| l.starts_with("serial ")), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with("two_lock ")),
        "{stdout}"
    );
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(
        md.contains("| serial | serial |") && md.contains("| two_lock | two_lock |"),
        "{md}"
    );
}

#[test]
fn graph_check_names_what_is_wrong_and_show_draws() {
    let dir = tempfile::tempdir().unwrap();
    let bad = cuzk::pipelines::builtin("two_lock")
        .unwrap()
        .replace("holds = [\"gpu_mem_lock\"]", "holds = [\"gpu_mem_lok\"]");
    let bad = write(dir.path(), "mine.toml", &bad);
    let out = cuzk().args(["graph", "check"]).arg(&bad).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("mine.toml")
            && stderr.contains("node `gpu_stage` refers to resource `gpu_mem_lok`"),
        "{stderr}"
    );
    let out = cuzk()
        .args(["graph", "check", "throttled"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("is valid"),
        "{stdout}"
    );
    let svg = dir.path().join("g.svg");
    let out = cuzk()
        .args(["graph", "show", "two_lock", "--svg", "-o"])
        .arg(&svg)
        .output()
        .unwrap();
    assert!(out.status.success());
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("gpu_compute_lock"),
        "{svg}"
    );
    let out = cuzk()
        .args(["graph", "show", "serial", "--dot"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"gpu_ntt_msm\" -> \"b_g2_msm\""));
}

#[test]
fn info_plans_device_memory_for_a_card_of_the_given_size() {
    let dir = tempfile::tempdir().unwrap();
    // Runs cuzk and gives its standard output, which it must end well.
    let run = |args: &[&str]| {
        let out = cuzk().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let out_dir = dir.path().to_str().unwrap();
    run(&[
        "setup",
        "--workload",
        "chain",
        "--log-size",
        "12",
        "--device",
        "cpu",
        "--out",
        out_dir,
    ]);
    let params = dir.path().join("chain-k12.params");
    let params = params.to_str().unwrap();
    let plan = |vram: &str| run(&["info", "--vram", vram, "--params", params]);
    let roomy = plan("1GiB");
    for want in [
        "device memory plan for a 1.0 GiB budget",
        "resident SRS",
        "a partition's buffers",
        "=> SRS resident, room for",
    ] {
        assert!(roomy.contains(want), "`{want}` missing:\n{roomy}");
    }
    // 2^12 chain: ~1.5 MiB of SRS, ~0.6 MiB of buffers (~0.4 MiB compact).
    // 1.2 MiB holds the buffers and two 256 KiB chunks, not the SRS: it
    // streams; 1 MiB holds compact buffers and the chunks; 512 KiB no proof.
    let streamed = plan("1200KiB");
    let streams = "=> the SRS does not fit: every MSM streams its points from host memory";
    assert!(streamed.contains(streams), "{streamed}");
    assert!(
        !streamed.contains("compact partition buffers"),
        "{streamed}"
    );
    let compact = plan("1MiB");
    assert!(compact.contains(streams), "{compact}");
    assert!(compact.contains("compact partition buffers"), "{compact}");
    let tight = plan("512KiB");
    assert!(tight.contains("this card cannot prove it"), "{tight}");
}
