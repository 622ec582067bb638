//! Ctrl-C, SIGTERM and SIGHUP (a closed terminal): one flag, set by the signal handler, polled by workloads at their
//! check points and by the runner while it waits. Nothing else happens in the handler.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

static FLAG: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// Route SIGINT, SIGTERM and SIGHUP to the flag.
///
/// # Errors
/// If the handlers cannot be installed.
pub fn install() -> std::io::Result<()> {
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&FLAG))?;
    }
    Ok(())
}

/// Whether the user asked to stop.
#[inline]
pub fn requested() -> bool {
    FLAG.load(Ordering::Relaxed)
}

/// Raise the flag (tests and internal aborts).
pub fn request() {
    FLAG.store(true, Ordering::Relaxed);
}
