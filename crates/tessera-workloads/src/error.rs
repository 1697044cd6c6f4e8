//! Configuration errors shared by the workloads.

use thiserror::Error;

/// A workload (or sampler) parameter is out of range. `param` is the name of
/// the offending configuration field, exactly as spelled in the config
/// struct, so a harness can point the user at it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid workload parameter `{param}`: {reason}")]
pub struct ConfigError {
    /// The configuration field at fault (e.g. `"zipf_theta"`).
    pub param: &'static str,
    /// What is wrong with it, including the offending value.
    pub reason: String,
}

impl ConfigError {
    pub(crate) fn new(param: &'static str, reason: impl Into<String>) -> Self {
        ConfigError {
            param,
            reason: reason.into(),
        }
    }
}

/// `Ok` when `x` is a finite number in `[0, 1]`.
pub(crate) fn check_ratio(param: &'static str, x: f64) -> Result<(), ConfigError> {
    if x.is_finite() && (0.0..=1.0).contains(&x) {
        Ok(())
    } else {
        Err(ConfigError::new(
            param,
            format!("must be in [0, 1], got {x}"),
        ))
    }
}

/// `Ok` when `x > 0`.
pub(crate) fn check_positive(param: &'static str, x: u64) -> Result<(), ConfigError> {
    if x > 0 {
        Ok(())
    } else {
        Err(ConfigError::new(param, "must be > 0, got 0"))
    }
}
