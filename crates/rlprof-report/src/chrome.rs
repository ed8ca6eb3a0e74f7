//! PyTorch Chrome traces (placeholder).
/// Input limits.
#[derive(Debug, Clone, Default)]
pub struct Limits;
