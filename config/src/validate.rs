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
    at_least_one("stages.synth.workers", c.stages.synth.workers)?;
    at_least_one("stages.prep_msm.workers", c.stages.prep_msm.workers)?;
    at_least_one("stages.b_g2_msm.workers", c.stages.b_g2_msm.workers)?;
    at_least_one("stages.assemble.workers", c.stages.assemble.workers)?;
    at_least_one("gpu.workers_per_device", c.gpu.workers_per_device)?;
    if c.arenas.max_bytes.is_zero() {
        return Err(invalid("arenas.max_bytes", "must be above 0"));
    }
    let endpoint = &c.tracing.endpoint;
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(invalid(
            "tracing.endpoint",
            format!("`{endpoint}` must be an http:// or https:// URL"),
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
