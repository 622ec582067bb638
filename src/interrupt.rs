//! Ctrl-C, SIGTERM and SIGHUP (a closed terminal): one flag, set by the signal handler,
//! polled by workloads at their check points and by the runner while it waits; and one
//! wake descriptor beside it, which the handler makes readable, for threads that sleep in
//! `poll(2)` on a socket (an idle conversation of a server): they wait on both and wake
//! when either is ready, rather than waking every few milliseconds to look at the flag.
//! Nothing else happens in the handler.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, LazyLock};

use nix::sys::eventfd::{EfdFlags, EventFd};

static FLAG: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// The wake descriptor: one eventfd (one descriptor of the process's limit), whose
/// counter the handler (and [`request`]) adds to; nobody ever reads it, so once a stop is
/// asked for it stays readable for good.
static WAKE: LazyLock<Option<EventFd>> = LazyLock::new(|| {
    EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK).ok()
});

/// The child process a stop is passed on to at once (0: none).
static CHILD: AtomicI32 = AtomicI32::new(0);

const SIGNALS: [i32; 3] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGHUP,
];

/// Route SIGINT, SIGTERM and SIGHUP to the flag, then to the wake descriptor (in that
/// order: a thread woken by the descriptor finds the flag raised).
///
/// # Errors
/// If the handlers cannot be installed.
pub fn install() -> std::io::Result<()> {
    for sig in SIGNALS {
        signal_hook::flag::register(sig, Arc::clone(&FLAG))?;
    }
    if let Some(fd) = wake_fd() {
        crate::sys::wait::wake_on_signals(fd, &SIGNALS)?;
    }
    crate::sys::wait::pass_signals_to(&CHILD, &SIGNALS)
}

/// While `child` runs part of this process's work (a run's other role), a stop asked of
/// this process is passed on to it at once (as SIGINT), so both sides stop together and
/// what they measured is kept; `None` when it is done. A stop already asked is passed on
/// now.
pub fn pass_on_to(child: Option<u32>) {
    let pid = child.and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
    CHILD.store(pid, Ordering::SeqCst);
    if pid > 0 && requested() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGINT,
        );
    }
}

/// Whether the user asked to stop.
#[inline]
pub fn requested() -> bool {
    FLAG.load(Ordering::Relaxed)
}

/// A descriptor that becomes readable, and stays readable, once a stop is asked for
/// (None if the process could not make one: then look at [`requested`] instead). Wait
/// on it beside your own descriptor; never read it.
pub fn wake_fd() -> Option<RawFd> {
    WAKE.as_ref().map(AsRawFd::as_raw_fd)
}

/// Raise the flag (tests and internal aborts), and wake every waiter.
pub fn request() {
    FLAG.store(true, Ordering::Relaxed);
    if let Some(w) = WAKE.as_ref() {
        let _ = w.write(1);
    }
}
