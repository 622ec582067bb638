//! being written.

use super::{Ctx, Listener};
use crate::http::Counters;

/// Whether the model can run here.
///
/// # Errors
/// Why not.
pub fn available() -> Result<(), String> {
    Err("not built yet".into())
}

/// Serve.
///
/// # Errors
/// Not yet.
pub fn serve(_listener: Listener, _ctx: &Ctx) -> anyhow::Result<Counters> {
    anyhow::bail!("not built yet")
}
