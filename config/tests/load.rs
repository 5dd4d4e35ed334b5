//! Loading: file, environment overrides, and errors that name the bad key.

// figment's Jail closures return its (large) error type.
#![allow(clippy::result_large_err)]

use cuzk_config::{ByteSize, from_toml_str, load};
use figment::Jail;

#[test]
fn defaults_are_valid() {
    let c = from_toml_str("").unwrap();
    assert_eq!(c.pipeline.variant, "serial");
    assert_eq!(c.channels.default, 2);
    assert!(
        c.engine.self_verify,
        "proofs are verified before they leave by default"
    );
}

#[test]
fn a_file_sets_values_and_the_environment_beats_it() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "cuzk.toml",
            r#"
            [pipeline]
            variant = "two_lock"
            [stages.gpu_compute]
            workers = 3
            [arenas]
            max_bytes = "512MiB"
            [channels.into]
            gpu_compute = 1
            "#,
        )?;
        jail.set_env("CUZK_STAGES__GPU_COMPUTE__WORKERS", "4");
        jail.set_env("CUZK_CONFIG", "ignored: not a nested key");
        let loaded = load(Some("cuzk.toml".as_ref())).unwrap();
        let c = &loaded.config;
        assert_eq!(c.pipeline.variant, "two_lock");
        assert_eq!(
            c.stages["gpu_compute"].workers, 4,
            "environment beats the file"
        );
        assert_eq!(c.arenas.max_bytes, ByteSize::mib(512));
        assert_eq!(c.channels.into["gpu_compute"], 1);
        assert!(
            loaded.origin("pipeline.variant").contains("cuzk.toml"),
            "{}",
            loaded.origin("pipeline.variant")
        );
        assert_eq!(
            loaded.origin("stages.gpu_compute.workers"),
            "environment variable CUZK_STAGES__GPU_COMPUTE__WORKERS"
        );
        assert_eq!(loaded.origin("channels.default"), "default");
        let shown = loaded.show();
        assert!(shown.contains("variant = \"two_lock\""), "{shown}");
        assert!(
            shown.contains("# environment variable CUZK_STAGES__GPU_COMPUTE__WORKERS"),
            "{shown}"
        );
        Ok(())
    });
}

#[test]
fn a_typo_names_the_key() {
    let err = from_toml_str("[pipeline]\nvaraint = \"serial\"").unwrap_err();
    assert_eq!(err.key(), Some("pipeline.varaint"));
    assert!(
        err.to_string()
            .contains("unknown key `varaint` (expected one of: `variant`, `graph`, `declare`)"),
        "{err}"
    );
    let err = from_toml_str("[pipline]\nvariant = \"serial\"").unwrap_err();
    assert_eq!(err.key(), Some("pipline"));
}

#[test]
fn zero_capacity_and_workers_are_rejected_by_name() {
    let err = from_toml_str("[channels]\ndefault = 0").unwrap_err();
    assert_eq!(
        err.to_string(),
        "config error at `channels.default`: must be at least 1 (got 0)"
    );
    let err = from_toml_str("[channels.into]\nprep_msm = 0").unwrap_err();
    assert_eq!(err.key(), Some("channels.into.prep_msm"));
    let err = from_toml_str("[stages.synth]\nworkers = 0").unwrap_err();
    assert_eq!(err.key(), Some("stages.synth.workers"));
    let err = from_toml_str("[pipeline]\nvariant = \"\"").unwrap_err();
    assert_eq!(err.key(), Some("pipeline.variant"));
}

/// Bulk threads' nice offset: unset follows the backend, 0–19 is taken, and
/// more is refused by name.
#[test]
fn bulk_nice_defaults_by_backend_and_is_bounded() {
    let unset = from_toml_str("").unwrap();
    assert_eq!(unset.threads.bulk_nice_for(false), 10, "the CPU backend");
    assert_eq!(unset.threads.bulk_nice_for(true), 0, "a GPU");
    let set = from_toml_str("[threads]\nbulk_nice = 19").unwrap();
    assert_eq!(set.threads.bulk_nice_for(true), 19);
    let err = from_toml_str("[threads]\nbulk_nice = 20").unwrap_err();
    assert_eq!(
        err.to_string(),
        "config error at `threads.bulk_nice`: must be 0 to 19 nice levels (got 20)"
    );
}

/// Dense MSMs on cuzk's Pippenger: from 2^26 terms at a window by size
/// unless set; 0 turns them off; a window the kernel has no room for, or a
/// size beyond any SRS, is refused by name.
#[test]
fn dense_msm_choices_default_and_are_bounded() {
    let unset = from_toml_str("").unwrap();
    assert_eq!(
        (unset.gpu.dense_msm_min_log, unset.gpu.dense_msm_window),
        (26, 0)
    );
    let set = from_toml_str("[gpu]\ndense_msm_min_log = 0\ndense_msm_window = 18").unwrap();
    assert_eq!(
        (set.gpu.dense_msm_min_log, set.gpu.dense_msm_window),
        (0, 18)
    );
    let err = from_toml_str("[gpu]\ndense_msm_window = 24").unwrap_err();
    assert_eq!(
        err.to_string(),
        "config error at `gpu.dense_msm_window`: must be 0 (by size) or 8 to 22 bits (got 24)"
    );
    let err = from_toml_str("[gpu]\ndense_msm_min_log = 41").unwrap_err();
    assert_eq!(err.key(), Some("gpu.dense_msm_min_log"));
}

#[test]
fn a_bad_type_or_size_names_the_key() {
    let err = from_toml_str("[arenas]\nmax_bytes = \"12 parsecs\"").unwrap_err();
    assert_eq!(err.key(), Some("arenas.max_bytes"));
    assert!(err.to_string().contains("unknown size unit"), "{err}");
    let err = from_toml_str("[stages.synth]\nworkers = \"many\"").unwrap_err();
    assert_eq!(err.key(), Some("stages.synth.workers"));
}

#[test]
fn an_environment_typo_is_an_error_too() {
    Jail::expect_with(|jail| {
        jail.set_env("CUZK_PIPELINE__VARAINT", "serial");
        let err = load(None).err().expect("a typo'd variable is rejected");
        assert_eq!(err.key(), Some("pipeline.varaint"));
        assert!(err.to_string().contains("CUZK_PIPELINE__VARAINT"), "{err}");
        Ok(())
    });
}

#[test]
fn a_missing_file_is_named() {
    let err = load(Some("/nonexistent/cuzk.toml".as_ref())).err().unwrap();
    assert_eq!(
        err.to_string(),
        "config file `/nonexistent/cuzk.toml` does not exist"
    );
}

#[test]
fn config_show_never_prints_the_token() {
    Jail::expect_with(|jail| {
        jail.create_file("cuzk.toml", "[daemon]\ntoken = \"hunter2\"\n")?;
        let loaded = load(Some("cuzk.toml".as_ref())).unwrap();
        assert_eq!(loaded.config.daemon.token.as_deref(), Some("hunter2"));
        let shown = loaded.show();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("<set, not shown>"), "{shown}");
        Ok(())
    });
}
