//! Checks serde cannot express: values that parse but cannot run.

use crate::load::ConfigError;
use crate::schema::Config;

fn invalid(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        message: message.into(),
        origin: String::new(),
    }
}

fn at_least_one(key: &str, value: usize) -> Result<(), ConfigError> {
    if value == 0 {
        return Err(invalid(key, "must be at least 1 (got 0)"));
    }
    Ok(())
}

pub(crate) fn validate(c: &Config) -> Result<(), ConfigError> {
    at_least_one("channels.default", c.channels.default)?;
    for (node, &cap) in &c.channels.into {
        at_least_one(&format!("channels.into.{node}"), cap)?;
    }
    for (node, stage) in &c.stages {
        at_least_one(&format!("stages.{node}.workers"), stage.workers)?;
    }
    if let Some(nice) = c.threads.bulk_nice
        && nice > 19
    {
        return Err(invalid(
            "threads.bulk_nice",
            format!("must be 0 to 19 nice levels (got {nice})"),
        ));
    }
    if c.gpu.dense_msm_min_log > 40 {
        return Err(invalid(
            "gpu.dense_msm_min_log",
            format!(
                "must be 0 (never) or a power of two's exponent up to 40 (got {})",
                c.gpu.dense_msm_min_log
            ),
        ));
    }
    let window = c.gpu.dense_msm_window;
    if window != 0 && !(8..=22).contains(&window) {
        return Err(invalid(
            "gpu.dense_msm_window",
            format!("must be 0 (by size) or 8 to 22 bits (got {window})"),
        ));
    }
    if c.pipeline.variant.is_empty() {
        return Err(invalid(
            "pipeline.variant",
            "must name a graph (`cuzk graph list`)",
        ));
    }
    let endpoint = &c.tracing.endpoint;
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(invalid(
            "tracing.endpoint",
            format!("`{endpoint}` must be an http:// or https:// URL"),
        ));
    }
    let d = &c.daemon;
    at_least_one("daemon.max_queued", d.max_queued)?;
    at_least_one("daemon.aging_s", d.aging_s as usize)?;
    if d.listen.is_empty() {
        return Err(invalid(
            "daemon.listen",
            "must be HOST:PORT or unix:///path/to.sock",
        ));
    }
    if d.token.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return Err(invalid(
            "daemon.token",
            "is empty; unset it or give a real token",
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for &d in &c.gpu.devices {
        if !seen.insert(d) {
            return Err(invalid("gpu.devices", format!("lists device {d} twice")));
        }
    }
    Ok(())
}
