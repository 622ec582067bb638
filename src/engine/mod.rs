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
#[cfg(feature = "async")]
mod tokio_rt;
#[cfg(feature = "io-uring")]
mod uring;

use std::fmt;
use std::io;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

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
    Deserialize,
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
    /// Each send and receive submitted to io_uring (`nonblocking-async`: asynchronous I/O).
    #[value(name = "io-uring", alias = "nonblocking-async")]
    IoUring,
    /// A tokio runtime per side awaiting readiness (`--runtime current|multi`).
    Async,
}

/// Which tokio runtime the async engine builds.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum RuntimeKind {
    /// A current-thread runtime: the side's own thread runs the reactor.
    #[default]
    Current,
    /// A multi-thread runtime with one worker: the reactor runs on the worker.
    Multi,
}

/// What an engine takes from a scenario (the rest of its options are the workloads').
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineOptions {
    /// The async engine's runtime (`--runtime`).
    pub runtime: RuntimeKind,
    /// The io-uring engine's operations in flight per side (`--batch`).
    pub in_flight: u32,
    /// io-uring: a kernel thread polls the submission queue (`--sqpoll`).
    pub sqpoll: bool,
}

impl EngineKind {
    /// Every engine.
    pub const ALL: [EngineKind; 6] = [
        EngineKind::Blocking,
        EngineKind::Nonblocking,
        EngineKind::Poll,
        EngineKind::Epoll,
        EngineKind::IoUring,
        EngineKind::Async,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Blocking => "blocking",
            EngineKind::Nonblocking => "nonblocking",
            EngineKind::Poll => "poll",
            EngineKind::Epoll => "epoll",
            EngineKind::IoUring => "io-uring",
            EngineKind::Async => "async",
        }
    }

    /// Whether a side waits by spinning on the CPU (`nonblocking` retries on EAGAIN
    /// without sleeping), so a peer that needs that CPU cannot run.
    pub fn spins(self) -> bool {
        self == EngineKind::Nonblocking
    }

    /// The engine implementation (the async engine with a current-thread runtime).
    pub fn engine(self) -> Box<dyn Engine> {
        self.engine_with(RuntimeKind::Current)
    }

    /// The engine implementation for a scenario's engine options: the async engine's
    /// runtime, the io-uring engine's operations in flight and `--sqpoll`.
    pub fn engine_for(self, options: EngineOptions) -> Box<dyn Engine> {
        match self {
            #[cfg(feature = "io-uring")]
            EngineKind::IoUring => Box::new(uring::Uring {
                in_flight: options.in_flight,
                sqpoll: options.sqpoll,
            }),
            _ => self.engine_with(options.runtime),
        }
    }

    /// The engine implementation, the async engine with the given runtime.
    pub fn engine_with(self, _runtime: RuntimeKind) -> Box<dyn Engine> {
        match self {
            EngineKind::Blocking => Box::new(blocking::Blocking),
            EngineKind::Nonblocking => Box::new(nonblocking::Nonblocking),
            EngineKind::Poll => Box::new(poll::Poll),
            EngineKind::Epoll => Box::new(epoll::Epoll),
            #[cfg(feature = "io-uring")]
            EngineKind::IoUring => Box::new(uring::Uring::default()),
            #[cfg(not(feature = "io-uring"))]
            EngineKind::IoUring => Box::new(Missing("io-uring")),
            #[cfg(feature = "async")]
            EngineKind::Async => Box::new(tokio_rt::Async(_runtime)),
            #[cfg(not(feature = "async"))]
            EngineKind::Async => Box::new(Missing("async")),
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Inside an engine's `impl Conn` for a wrapper, forward the descriptor and buffer
/// queries to the wrapped `Conn` in field `$inner` (the wrapper changes how I/O is done,
/// not which descriptors or buffers it uses).
macro_rules! forward_descriptors {
    ($inner:ident) => {
        fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
            self.$inner.raw_fd()
        }
        fn send_fd(&self) -> Option<std::os::fd::RawFd> {
            self.$inner.send_fd()
        }
        fn recv_fd(&self) -> Option<std::os::fd::RawFd> {
            self.$inner.recv_fd()
        }
        fn socket_buffers(&self) -> (Option<u64>, Option<u64>) {
            self.$inner.socket_buffers()
        }
    };
}
pub(crate) use forward_descriptors;

/// An engine left out of this build (its Cargo feature is off).
#[allow(dead_code)]
struct Missing(&'static str);

impl Engine for Missing {
    fn unavailable(&self) -> Option<String> {
        Some(format!(
            "this sockbench was built without the {} feature",
            self.0
        ))
    }
    fn refuses(&self, _transport: TransportKind) -> Option<String> {
        None
    }
    fn attach(&self, _conn: Box<dyn Conn>) -> io::Result<Box<dyn Conn>> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// What every engine provides.
pub trait Engine: Send + Sync {
    /// Why this engine cannot run on this system at all (not built, disabled by the
    /// kernel), if it cannot; checked before any run.
    fn unavailable(&self) -> Option<String> {
        None
    }
    /// Why this engine cannot drive `transport`, if it cannot (checked before any run).
    fn refuses(&self, transport: TransportKind) -> Option<String>;
    /// Prepare an open connection for this engine's mode of I/O.
    ///
    /// # Errors
    /// If the descriptor cannot be switched to the engine's mode.
    fn attach(&self, conn: Box<dyn Conn>) -> io::Result<Box<dyn Conn>>;
}
