//! Text (placeholder).
/// Renders text.
pub fn render_text(_r: &crate::Report) -> String { String::new() }
