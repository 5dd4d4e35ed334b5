//! Loading: defaults, then an optional TOML file, then `CUZK_*` environment
//! variables (nested keys joined by `__`, e.g. `CUZK_PIPELINE__VARIANT=two_lock`).

use std::path::{Path, PathBuf};

use figment::providers::{Env, Format, Serialized, Toml};
use figment::{Figment, Source};

use crate::schema::Config;

/// A configuration that cannot be used, naming the key and the problem.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("config file `{0}` does not exist")]
    MissingFile(PathBuf),
    #[error("config error at `{key}`: {message}{origin}")]
    Invalid {
        /// The dotted key, like `pipeline.variant`.
        key: String,
        message: String,
        /// Where the bad value came from (" (from file x.toml)"), if known.
        origin: String,
    },
}

impl ConfigError {
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Invalid { key, .. } => Some(key),
            Self::MissingFile(_) => None,
        }
    }
}

/// A loaded configuration and where each of its values came from.
pub struct Loaded {
    pub config: Config,
    figment: Figment,
}

/// The environment prefix.
pub const ENV_PREFIX: &str = "CUZK_";

fn figment(file: Option<&Path>) -> Result<Figment, ConfigError> {
    let mut f = Figment::from(Serialized::defaults(Config::default()));
    if let Some(path) = file {
        if !path.is_file() {
            return Err(ConfigError::MissingFile(path.to_path_buf()));
        }
        f = f.merge(Toml::file_exact(path));
    }
    // Only nested variables (`CUZK_SECTION__KEY`) are configuration; others,
    // like CUZK_CONFIG naming the file, are left alone.
    Ok(f.merge(
        Env::prefixed(ENV_PREFIX)
            .split("__")
            .filter(|k| k.as_str().contains('.')),
    ))
}

/// Loads the configuration from defaults, `file` and the environment, and
/// validates it.
pub fn load(file: Option<&Path>) -> Result<Loaded, ConfigError> {
    let figment = figment(file)?;
    let config: Config = figment.extract().map_err(from_figment)?;
    crate::validate::validate(&config)?;
    Ok(Loaded { config, figment })
}

/// Parses a configuration from TOML text alone (no environment), validated.
pub fn from_toml_str(text: &str) -> Result<Config, ConfigError> {
    let figment = Figment::from(Serialized::defaults(Config::default())).merge(Toml::string(text));
    let config: Config = figment.extract().map_err(from_figment)?;
    crate::validate::validate(&config)?;
    Ok(config)
}

fn from_figment(e: figment::Error) -> ConfigError {
    let mut key = e.path.join(".");
    // Unknown fields are reported at their parent; name the field itself.
    if let figment::error::Kind::UnknownField(field, _) = &e.kind {
        key = if key.ends_with(field.as_str()) {
            key
        } else if key.is_empty() {
            field.clone()
        } else {
            format!("{key}.{field}")
        };
    }
    let origin = e
        .metadata
        .as_ref()
        .map(|m| format!(" (from {})", describe(m, &e.path)))
        .unwrap_or_default();
    ConfigError::Invalid {
        key,
        message: describe_kind(&e.kind),
        origin,
    }
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_kind(kind: &figment::error::Kind) -> String {
    use figment::error::Kind;
    match kind {
        Kind::UnknownField(field, expected) => {
            format!(
                "unknown key `{field}` (expected one of: {})",
                quoted(expected)
            )
        }
        Kind::UnknownVariant(value, expected) => {
            format!("unknown value `{value}` (allowed: {})", quoted(expected))
        }
        other => other.to_string(),
    }
}

fn describe(meta: &figment::Metadata, path: &[String]) -> String {
    match &meta.source {
        Some(Source::File(p)) => format!("file {}", p.display()),
        _ if meta.name.contains("environment") => {
            format!(
                "environment variable {ENV_PREFIX}{}",
                path.join("__").to_uppercase()
            )
        }
        // Defaults are the only values this crate provides from code.
        Some(Source::Code(_)) => "default".into(),
        Some(other) => other.to_string(),
        None => meta.name.to_string(),
    }
}

impl Loaded {
    /// Where the effective value of `key` (dotted) came from: `default`,
    /// `file cuzk.toml` or `environment variable CUZK_PIPELINE__VARIANT`.
    pub fn origin(&self, key: &str) -> String {
        let path: Vec<String> = key.split('.').map(str::to_string).collect();
        self.figment
            .find_metadata(key)
            .map(|m| describe(m, &path))
            .unwrap_or_else(|| "default".into())
    }

    /// The effective configuration as TOML, each value annotated with its origin.
    pub fn show(&self) -> String {
        // Secrets are shown as set, never printed (a shared terminal, a log).
        let mut shown = self.config.clone();
        if shown.daemon.token.is_some() {
            shown.daemon.token = Some("<set, not shown>".into());
        }
        let value = toml::Value::try_from(&shown).expect("the schema serialises to TOML");
        let mut out = String::new();
        let toml::Value::Table(root) = value else {
            unreachable!("a struct is a table")
        };
        for (section, v) in &root {
            self.show_table(&mut out, section, v);
        }
        out
    }

    fn show_table(&self, out: &mut String, prefix: &str, value: &toml::Value) {
        let toml::Value::Table(table) = value else {
            return;
        };
        out.push_str(&format!("[{prefix}]\n"));
        let mut nested = vec![];
        for (k, v) in table {
            let key = format!("{prefix}.{k}");
            if let toml::Value::Table(_) = v {
                nested.push((key, v));
                continue;
            }
            let line = format!("{k} = {v}");
            out.push_str(&format!("{line:<40} # {}\n", self.origin(&key)));
        }
        out.push('\n');
        for (key, v) in nested {
            self.show_table(out, &key, v);
        }
    }
}
