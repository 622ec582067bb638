//! HTTP/1.1 for `sockbench serve` and `sockbench load`, both sides without I/O: enough of
//! it for ab, wrk, h2load, curl and the servers `load` drives, and not a byte more work
//! per message than a benchmark should do.
//!
//! - [`request`]: parse a request head (`httparse`), decide keep-alive and the body, and
//!   the statuses of requests that cannot be served (400, 431, 501, 505); and write the
//!   request the load generator sends;
//! - [`response`]: parse responses as they arrive, in pieces of any size (the load
//!   generator's side);
//! - [`chunked`]: the one chunked transfer coding, decoded for both sides' bodies;
//! - [`session`]: one server connection as a state machine with no I/O, which every
//!   server model (`crate::model`) drives the same way, and the [`session::Counters`] a
//!   server keeps.

pub mod chunked;
pub mod request;
pub mod response;
pub mod session;

pub use session::{Counters, Session, Site};

/// One log line on stderr, with the wall-clock time (UTC, microseconds).
pub fn log(args: std::fmt::Arguments<'_>) {
    eprintln!(
        "{} {args}",
        crate::vocab::units::utc_micros(std::time::SystemTime::now())
    );
}
