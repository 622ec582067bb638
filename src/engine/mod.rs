//! I/O engines: how a workload's sends and receives reach the kernel.
//!
//! An engine takes an open [`Conn`] and returns the `Conn` the workload will drive, adding
//! whatever its mode needs (non-blocking descriptors, a readiness loop, a submission
//! ring). Workloads and transports never special-case an engine: a new engine is a new
//! file here plus a variant of [`EngineKind`].

mod blocking;
mod epoll;
mod nonblocking;
mod poll;
pub mod readiness;

use std::fmt;
use std::io;

use clap::ValueEnum;
use serde::Serialize;

use crate::transport::{Conn, TransportKind};

/// The engine the user selects.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum EngineKind {
    /// Blocking system calls, one thread per side (the classic `blocking-sync` mode).
    #[value(alias = "blocking-sync")]
    Blocking,
    /// Non-blocking descriptors, retrying on EAGAIN without sleeping (`nonblocking-sync`).
    #[value(alias = "nonblocking-sync")]
    Nonblocking,
    /// Non-blocking descriptors, `poll(2)` on EAGAIN (`blocking-async`: the thread blocks
    /// in the readiness call, not in the transfer).
    #[value(alias = "blocking-async")]
    Poll,
    /// Non-blocking descriptors, `epoll_wait(2)` on EAGAIN.
    Epoll,
}

impl EngineKind {
    /// Every engine.
    pub const ALL: [EngineKind; 4] = [
        EngineKind::Blocking,
        EngineKind::Nonblocking,
        EngineKind::Poll,
        EngineKind::Epoll,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Blocking => "blocking",
            EngineKind::Nonblocking => "nonblocking",
            EngineKind::Poll => "poll",
            EngineKind::Epoll => "epoll",
        }
    }

    /// The engine implementation.
    pub fn engine(self) -> Box<dyn Engine> {
        match self {
            EngineKind::Blocking => Box::new(blocking::Blocking),
            EngineKind::Nonblocking => Box::new(nonblocking::Nonblocking),
            EngineKind::Poll => Box::new(poll::Poll),
            EngineKind::Epoll => Box::new(epoll::Epoll),
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What every engine provides.
pub trait Engine: Send + Sync {
    /// Why this engine cannot drive `transport`, if it cannot (checked before any run).
    fn refuses(&self, transport: TransportKind) -> Option<String>;
    /// Prepare an open connection for this engine's mode of I/O.
    ///
    /// # Errors
    /// If the descriptor cannot be switched to the engine's mode.
    fn attach(&self, conn: Box<dyn Conn>) -> io::Result<Box<dyn Conn>>;
}
