//! The crate's error type.

/// Errors of the config crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// One or more configuration problems, each already formatted with its YAML path (or the
    /// file and line, or the override, it comes from).
    #[error("invalid configuration:\n{}", .0.iter().map(|e| format!("  - {e}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<String>),
}

impl ConfigError {
    /// The problems, one line each.
    pub fn problems(&self) -> &[String] {
        match self {
            ConfigError::Invalid(v) => v,
        }
    }
}
