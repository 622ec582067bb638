//! Faults and pauses that only a test build can ask for (Cargo feature `test-hooks`, off in
//! every shipped binary). The tests use them to prove that a check fires (a receiver that
//! miscounts must be caught by the agreement check) and to hold a named object (a socket
//! file, FIFO, message queue or shared-memory ring) in existence long enough to interrupt
//! or kill the run while it exists. Without the feature both functions are constants the
//! compiler removes.
//!
//! - `SOCKBENCH_TEST_FAULT=NAME[,NAME...]`: [`fault`] returns true for each NAME.
//! - `SOCKBENCH_TEST_HOLD=POINT:MS`: [`hold`] at POINT sleeps MS milliseconds (or until
//!   Ctrl-C), after printing `holding POINT` to stderr.

/// Whether the test asked for fault `name`.
#[cfg(feature = "test-hooks")]
pub fn fault(name: &str) -> bool {
    std::env::var("SOCKBENCH_TEST_FAULT").is_ok_and(|v| v.split(',').any(|f| f == name))
}

/// Whether the test asked for fault `name` (never, in this build).
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn fault(_name: &str) -> bool {
    false
}

/// Pause at `point` if the test asked for it.
#[cfg(feature = "test-hooks")]
pub fn hold(point: &str) {
    let Ok(spec) = std::env::var("SOCKBENCH_TEST_HOLD") else {
        return;
    };
    let Some(ms) = spec
        .split_once(':')
        .filter(|(p, _)| *p == point)
        .and_then(|(_, ms)| ms.parse::<u64>().ok())
    else {
        return;
    };
    eprintln!("holding {point}");
    let until = std::time::Instant::now() + std::time::Duration::from_millis(ms);
    while std::time::Instant::now() < until && !crate::interrupt::requested() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Pause at `point` if the test asked for it (never, in this build).
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn hold(_point: &str) {}
