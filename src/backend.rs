//! Which backend runs the device stages, and why.

use cuzk_config::{Backend as Requested, Config};

/// The backends this binary can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    Cpu,
}

/// The chosen backend, how many (logical) devices it drives, and the reason.
#[derive(Clone, Debug)]
pub struct Backend {
    pub choice: BackendChoice,
    pub devices: usize,
    /// Why this backend: shown by `cuzk info` and `cuzk prove`.
    pub reason: String,
}

impl Backend {
    pub fn name(&self) -> &'static str {
        match self.choice {
            BackendChoice::Cpu => "cpu",
        }
    }

    /// Picks the backend the configuration asks for, or explains why it cannot.
    pub fn select(config: &Config) -> Result<Self, String> {
        let cpu = |reason: &str| Backend {
            choice: BackendChoice::Cpu,
            devices: config.gpu.logical_devices.max(1),
            reason: reason.into(),
        };
        match config.gpu.backend {
            Requested::Cpu => Ok(cpu("gpu.backend = \"cpu\"")),
            Requested::Auto => Ok(cpu("this binary carries no GPU kernels")),
            Requested::Gpu => {
                Err("gpu.backend = \"gpu\" but this binary carries no GPU kernels".into())
            }
        }
    }
}
