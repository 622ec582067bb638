//! HTTP/1.1 for `sockbench serve`: enough of it for ab, wrk, h2load and curl, and not a
//! byte more work per request than a benchmark server should do.
//!
//! - [`request`]: parse a request head (`httparse`), decide keep-alive and the body,
//!   and the statuses of requests that cannot be served (400, 431, 501, 505);
//! - [`session`]: one connection as a state machine with no I/O, which every server
//!   model (`crate::model`) drives the same way, and the [`session::Counters`] a server
//!   keeps.
//!
//! The load generator's side (parsing answers) is in `crate::load`.

pub mod request;
pub mod session;

pub use session::{Counters, Session, Site};

/// One log line on stderr, with the wall-clock time (UTC, microseconds).
pub fn log(args: std::fmt::Arguments<'_>) {
    eprintln!(
        "{} {args}",
        crate::vocab::units::utc_micros(std::time::SystemTime::now())
    );
}
