//! sockbench: measure inter-process and network communication on Linux.
//!
//! The crate is laid out by concern, one axis per module, combined only by the runner:
//!
//! - [`transport`]: what carries the bytes (Unix sockets, TCP, UDP, pipes, FIFOs, message
//!   queues, shared memory);
//! - [`engine`]: how sends and receives reach the kernel;
//! - [`workload`]: what the two sides do (today `stream`);
//! - [`measure`]: CPU accounting, statistics, units;
//! - [`report`]: the report data and its exporters (table, JSON, CSV, Markdown);
//! - [`cli`] and [`plan`]: flags, and the checked plan built from them;
//! - [`runner`]: runs a plan;
//! - `sys`: the only module allowed `unsafe`.
//!
//! Data flows `Args` → [`plan::Plan`] → [`runner::Runner`] → [`report::Report`] → exporters.

pub mod cli;
pub mod diagnose;
pub mod engine;
pub mod environment;
pub mod error;
pub mod interrupt;
pub mod measure;
pub mod mode;
pub mod placement;
pub mod plan;
pub mod report;
pub mod runner;
#[allow(unsafe_code)]
pub(crate) mod sys;
pub mod testhooks;
pub mod transport;
pub mod workload;
