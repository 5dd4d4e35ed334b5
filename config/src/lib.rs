//! cuzk-config: the configuration schema, loading with figment (defaults, a
//! TOML file, then `CUZK_*` environment variables), validation that names the
//! bad key, and provenance for `cuzk config show`.

mod bytes;
mod load;
mod schema;
mod validate;

pub use bytes::ByteSize;
pub use load::{ConfigError, ENV_PREFIX, Loaded, from_toml_str, load};
pub use schema::*;
