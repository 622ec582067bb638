//! Measurement machinery: CPU accounting, statistics over repetitions, kernel counters.
//!
//! Nothing here runs in a per-message hot path: workloads read the clock and CPU counters
//! only at the edges of the measured interval (and, with `--interval`, publish running
//! totals at the checks they already make: `live.rs`). A TCP sender reads its socket's
//! `TCP_INFO` once more after its run, before it closes (`tcp_info.rs`).

pub mod calls;
pub mod counters;
pub mod cpu;
pub mod headline;
pub mod histogram;
pub mod latency;
pub mod live;
pub mod netstat;
pub mod placement;
pub mod ranking;
pub mod stats;
pub mod tcp_info;
pub mod timestamps;
pub mod verdict;
