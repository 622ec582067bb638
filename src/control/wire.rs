//! What a role's report looks like on the control connection, and the checks a report
//! from a peer passes before anything uses it: counters in range (no value that could wrap
//! a sum), latency names from the known list, histogram values the histogram can hold,
//! and text without control characters (no terminal escape reaches a log or a table).

use crate::measure::latency::LatencyKind;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::measure::calls::{RecvCounts, SendCounts, ZerocopyCounts};
use crate::measure::counters::Counts;
use crate::measure::cpu::ThreadCpu;
use crate::measure::histogram::latency_histogram;
use crate::measure::placement::{Trace, MAX_SEGMENTS};
use crate::measure::tcp_info::TcpInfo;
use crate::workload::relay::{RelayCopies, RelaySide};
use crate::workload::swarm::{SwarmSide, MAX_PAIRS};
use crate::workload::{SequenceCounts, SideReport};

/// The largest counter a peer may report: far above any real run (2^50 bytes is a PiB),
/// far below where summing a few hundred of them could wrap a `u64`.
pub const MAX_COUNT: u64 = 1 << 50;
/// The longest duration a peer may report (a day).
const MAX_NANOS: u64 = 86_400 * 1_000_000_000;
/// CPUs a peer's placement trace may name.
const MAX_CPUS: usize = 4096;
/// Distinct histogram buckets a peer may send per distribution.
const MAX_BUCKETS: usize = 50_000;

/// Why a peer's report was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    /// A counter or duration out of range.
    #[error("the peer reported {what} = {value}, over the limit of {limit}")]
    OutOfRange {
        /// Which figure.
        what: &'static str,
        /// What it said.
        value: u64,
        /// The most it may be.
        limit: u64,
    },
    /// A latency distribution this version does not know.
    #[error("the peer reported an unknown latency distribution")]
    UnknownLatency,
    /// A timestamp log that could not be ours.
    #[error("the peer reported timestamps this side refuses: {0}")]
    Stamps(String),
    /// A histogram that cannot be rebuilt.
    #[error("the peer reported a latency histogram this side cannot hold: {0}")]
    Histogram(String),
}

/// A role's report as it crosses the control connection (durations in nanoseconds).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireSide {
    /// Payload bytes.
    pub bytes: u64,
    /// Messages.
    pub messages: u64,
    /// Start delay after the start line.
    pub start_delay_ns: u64,
    /// The measured interval, if the role ran.
    pub elapsed_ns: Option<u64>,
    /// Thread CPU: user, system, exact (ns), voluntary and involuntary switches.
    pub cpu: [u64; 5],
    /// Perf counters (`--counters`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<Counts>,
    /// Cut short by Ctrl-C.
    pub interrupted: bool,
    /// Socket buffers at the end (send, receive).
    pub socket_buffers: (Option<u64>, Option<u64>),
    /// Latency distributions: a name and (value, count) per recorded bucket.
    pub latencies: Vec<(String, Vec<(u64, u64)>)>,
    /// With `--timestamps`: the role's per-message stamps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stamps: Option<crate::measure::timestamps::StampLog>,
    /// Exchanges without an answer.
    pub timeouts: u64,
    /// Late replies.
    pub late: u64,
    /// Reordered and duplicated messages.
    pub sequence: Option<(u64, u64)>,
    /// The sender's close time.
    pub close_ns: Option<u64>,
    /// io-uring: the ring's features used, its submissions and `--sqpoll` thread's CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_uring: Option<crate::vocab::uring_use::UringUse>,
    /// The CPU at the interval's start and end.
    pub on_cpu: (Option<u32>, Option<u32>),
    /// Where the role's thread ran (sampled CPUs, migrations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Trace>,
    /// A stream sender's `--send` counts (absent from a peer that sends none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send: Option<SendCounts>,
    /// A stream receiver's `--recv` counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv: Option<RecvCounts>,
    /// Batches handed to the kernel (`--batch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<u64>,
    /// A TCP sender's `TCP_INFO` at its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<WireTcp>,
    /// A swarm's side: totals, per-pair figures, errors by kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swarm: Option<SwarmSide>,
    /// A relay's role: the source's counts, or the relay's and the sink's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<RelaySide>,
}

/// A TCP sender's `TCP_INFO` figures as the kernel gave them (32-bit each); the window in
/// bytes is not sent but computed by the side that receives them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireTcp {
    /// `tcpi_total_retrans`.
    pub retransmits: u64,
    /// `tcpi_snd_cwnd`, in segments.
    pub snd_cwnd_segments: u64,
    /// `tcpi_snd_mss`.
    pub snd_mss_bytes: u64,
    /// `tcpi_rtt`, in microseconds.
    pub srtt_us: u64,
    /// `tcpi_rttvar`, in microseconds.
    pub rttvar_us: u64,
    /// `tcpi_pmtu`.
    pub pmtu_bytes: u64,
}

impl From<&TcpInfo> for WireTcp {
    fn from(t: &TcpInfo) -> WireTcp {
        WireTcp {
            retransmits: t.retransmits,
            snd_cwnd_segments: t.snd_cwnd_segments,
            snd_mss_bytes: t.snd_mss_bytes,
            srtt_us: t.srtt_us,
            rttvar_us: t.rttvar_us,
            pmtu_bytes: t.pmtu_bytes,
        }
    }
}

impl WireTcp {
    /// The figures, each within the 32 bits the kernel's field has.
    fn into_info(self) -> Result<TcpInfo, WireError> {
        let field = |what: &'static str, value: u64| {
            u32::try_from(value).map_err(|_| WireError::OutOfRange {
                what,
                value,
                limit: u64::from(u32::MAX),
            })
        };
        Ok(TcpInfo::new(
            field("TCP retransmits", self.retransmits)?,
            field("TCP congestion window", self.snd_cwnd_segments)?,
            field("TCP MSS", self.snd_mss_bytes)?,
            field("TCP smoothed RTT", self.srtt_us)?,
            field("TCP RTT variation", self.rttvar_us)?,
            field("TCP path MTU", self.pmtu_bytes)?,
        ))
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl From<&SideReport> for WireSide {
    fn from(r: &SideReport) -> WireSide {
        WireSide {
            bytes: r.bytes,
            messages: r.messages,
            start_delay_ns: nanos(r.start_delay),
            elapsed_ns: r.elapsed.map(nanos),
            cpu: [
                nanos(r.cpu.user),
                nanos(r.cpu.system),
                nanos(r.cpu.exact),
                r.cpu.voluntary_switches,
                r.cpu.involuntary_switches,
            ],
            counters: r.counters.clone(),
            interrupted: r.interrupted,
            socket_buffers: r.socket_buffers,
            latencies: r
                .latencies
                .iter()
                .map(|(kind, h)| {
                    let buckets = h
                        .iter_recorded()
                        .map(|v| (v.value_iterated_to(), v.count_at_value()))
                        .collect();
                    (kind.name().to_string(), buckets)
                })
                .collect(),
            stamps: r.stamps.clone(),
            timeouts: r.timeouts,
            late: r.late,
            sequence: r.sequence.map(|s| (s.reordered, s.duplicated)),
            close_ns: r.close.map(nanos),
            io_uring: r.io_uring.clone(),
            on_cpu: r.on_cpu,
            placement: r.placement.clone(),
            send: r.send,
            recv: r.recv,
            calls: r.calls,
            tcp: r.tcp.as_ref().map(WireTcp::from),
            swarm: r.swarm.clone(),
            relay: r.relay.clone(),
        }
    }
}

/// A peer's io_uring figures, each in range, its notes few, short and clean.
fn checked_uring(
    u: crate::vocab::uring_use::UringUse,
) -> Result<crate::vocab::uring_use::UringUse, WireError> {
    Ok(crate::vocab::uring_use::UringUse {
        submissions: count("io_uring submissions", u.submissions)?,
        fixed_operations: count("io_uring fixed operations", u.fixed_operations)?,
        multishot_completions: count("io_uring multishot completions", u.multishot_completions)?,
        sqpoll: u.sqpoll,
        sqpoll_cpu_ns: u
            .sqpoll_cpu_ns
            .map(|n| duration("sqpoll CPU", n).map(|_| n))
            .transpose()?,
        notes: u.notes.iter().take(8).map(|n| clean(n, 300)).collect(),
    })
}

fn count(what: &'static str, value: u64) -> Result<u64, WireError> {
    if value > MAX_COUNT {
        return Err(WireError::OutOfRange {
            what,
            value,
            limit: MAX_COUNT,
        });
    }
    Ok(value)
}

fn duration(what: &'static str, ns: u64) -> Result<Duration, WireError> {
    if ns > MAX_NANOS {
        return Err(WireError::OutOfRange {
            what,
            value: ns,
            limit: MAX_NANOS,
        });
    }
    Ok(Duration::from_nanos(ns))
}

fn histogram(buckets: &[(u64, u64)]) -> Result<Histogram<u64>, WireError> {
    if buckets.len() > MAX_BUCKETS {
        return Err(WireError::OutOfRange {
            what: "latency buckets",
            value: buckets.len() as u64,
            limit: MAX_BUCKETS as u64,
        });
    }
    let mut h = latency_histogram();
    let mut total = 0u64;
    for &(value, n) in buckets {
        total = count(
            "latency samples",
            total.saturating_add(count("latency samples", n)?),
        )?;
        h.record_n(value, n)
            .map_err(|e| WireError::Histogram(format!("{e:?}")))?;
    }
    Ok(h)
}

impl WireSide {
    /// The role's report, once every figure in it has been checked.
    ///
    /// # Errors
    /// The first figure out of range, an unknown latency name, a histogram that cannot be
    /// rebuilt.
    pub fn into_side(self) -> Result<SideReport, WireError> {
        let latencies = self
            .latencies
            .iter()
            .map(|(name, buckets)| {
                let kind = LatencyKind::parse(name).ok_or(WireError::UnknownLatency)?;
                Ok((kind, histogram(buckets)?))
            })
            .collect::<Result<Vec<_>, WireError>>()?;
        let buffer = |b: Option<u64>| b.map(|n| count("socket buffer", n)).transpose();
        Ok(SideReport {
            bytes: count("bytes", self.bytes)?,
            messages: count("messages", self.messages)?,
            start_delay: duration("start delay", self.start_delay_ns)?,
            elapsed: self
                .elapsed_ns
                .map(|n| duration("interval", n))
                .transpose()?,
            cpu: ThreadCpu {
                user: duration("user CPU", self.cpu[0])?,
                system: duration("system CPU", self.cpu[1])?,
                exact: duration("thread CPU", self.cpu[2])?,
                voluntary_switches: count("voluntary switches", self.cpu[3])?,
                involuntary_switches: count("involuntary switches", self.cpu[4])?,
            },
            counters: self.counters.map(checked_counts).transpose()?,
            interrupted: self.interrupted,
            socket_buffers: (
                buffer(self.socket_buffers.0)?,
                buffer(self.socket_buffers.1)?,
            ),
            latencies,
            stamps: self
                .stamps
                .map(|s| s.checked().map_err(WireError::Stamps))
                .transpose()?,
            timeouts: count("timeouts", self.timeouts)?,
            late: count("late replies", self.late)?,
            sequence: self
                .sequence
                .map(|(r, d)| -> Result<_, WireError> {
                    Ok(SequenceCounts {
                        reordered: count("reordered", r)?,
                        duplicated: count("duplicated", d)?,
                    })
                })
                .transpose()?,
            close: self
                .close_ns
                .map(|n| duration("close time", n))
                .transpose()?,
            io_uring: self.io_uring.map(checked_uring).transpose()?,
            on_cpu: self.on_cpu,
            placement: self.placement.map(checked_trace).transpose()?,
            send: self.send.map(checked_send).transpose()?,
            recv: self
                .recv
                .map(|r| -> Result<_, WireError> {
                    Ok(RecvCounts {
                        method: r.method,
                        bytes_mapped: count("bytes mapped", r.bytes_mapped)?,
                        bytes_copied: count("bytes copied", r.bytes_copied)?,
                        map_calls: r.map_calls.map(|n| count("map calls", n)).transpose()?,
                    })
                })
                .transpose()?,
            calls: self.calls.map(|n| count("calls", n)).transpose()?,
            tcp: self.tcp.map(WireTcp::into_info).transpose()?,
            swarm: self.swarm.map(checked_swarm).transpose()?,
            relay: self.relay.map(checked_relay).transpose()?,
        })
    }
}

/// `n` of `what` when at most `max` may be: out of range if over.
fn at_most(what: &'static str, n: usize, max: usize) -> Result<(), WireError> {
    if n > max {
        return Err(WireError::OutOfRange {
            what,
            value: n as u64,
            limit: max as u64,
        });
    }
    Ok(())
}

/// Kinds of error a swarm side may report.
const MAX_ERROR_KINDS: usize = 32;

/// A peer's swarm side: at most [`MAX_PAIRS`] pairs, every count in range, every failed
/// pair one of them, its error kinds few and their text clean.
fn checked_swarm(s: SwarmSide) -> Result<SwarmSide, WireError> {
    let limit = at_most;
    limit("swarm pairs", s.per_pair.len(), MAX_PAIRS as usize)?;
    limit("failed swarm pairs", s.failed.len(), s.per_pair.len())?;
    limit("swarm error kinds", s.errors.len(), MAX_ERROR_KINDS)?;
    for &i in &s.failed {
        limit(
            "a failed pair's index",
            i as usize,
            s.per_pair.len().saturating_sub(1),
        )?;
    }
    for &n in &s.per_pair {
        count("a pair's figure", n)?;
    }
    Ok(SwarmSide {
        setup_ns: duration("swarm set-up", s.setup_ns)?.as_nanos() as u64,
        sent: count("swarm bytes written", s.sent)?,
        received: count("swarm bytes read", s.received)?,
        received_in_interval: count("swarm bytes read in the interval", s.received_in_interval)?,
        errors: s
            .errors
            .iter()
            .map(|(k, n)| Ok((clean(k, 300), count("pairs an error struck", *n)?)))
            .collect::<Result<_, WireError>>()?,
        per_pair: s.per_pair,
        failed: s.failed,
    })
}

/// A peer's relay role: every count in range, every time a time.
fn checked_relay(r: RelaySide) -> Result<RelaySide, WireError> {
    let ns = |what, n| duration(what, n).map(|d| d.as_nanos() as u64);
    Ok(RelaySide {
        bytes: count("relay bytes", r.bytes)?,
        messages: count("relay messages", r.messages)?,
        connections: count("relay connections", r.connections)?,
        cpu_ns: ns("relay role CPU", r.cpu_ns)?,
        cut_short: r.cut_short.map(|t| clean(&t, 300)),
        relay: r
            .relay
            .map(|c| -> Result<_, WireError> {
                Ok(RelayCopies {
                    copied: crate::copy::Copied {
                        bytes: count("bytes relayed", c.copied.bytes)?,
                        syscalls: count("relay system calls", c.copied.syscalls)?,
                        ops: count("relay operations", c.copied.ops)?,
                    },
                    relayed: count("connections relayed", c.relayed)?,
                    cpu_ns: ns("relay CPU", c.cpu_ns)?,
                    process_cpu_ns: ns("relay process CPU", c.process_cpu_ns)?,
                    accounted_cpu_ns: ns("relay accounted CPU", c.accounted_cpu_ns)?,
                    pipe_size: c.pipe_size.map(|p| count("pipe size", p)).transpose()?,
                })
            })
            .transpose()?,
    })
}

/// A peer's perf counts, every counter in range and its reasons cleaned.
fn checked_counts(c: Counts) -> Result<Counts, WireError> {
    let n = |what, v: Option<u64>| v.map(|v| count(what, v)).transpose();
    Ok(Counts {
        cycles: n("cycles", c.cycles)?,
        instructions: n("instructions", c.instructions)?,
        cache_misses: n("cache misses", c.cache_misses)?,
        hardware_unavailable: c.hardware_unavailable.map(|t| clean(&t, 300)),
        user_space_only: c.user_space_only,
        task_clock_ns: n("task clock", c.task_clock_ns)?,
        context_switches: n("context switches", c.context_switches)?,
        cpu_migrations: n("CPU migrations", c.cpu_migrations)?,
        page_faults: n("page faults", c.page_faults)?,
        software_unavailable: c.software_unavailable.map(|t| clean(&t, 300)),
    })
}

/// A peer's placement trace: bounded, its time line in order, its counts in range.
fn checked_trace(t: Trace) -> Result<Trace, WireError> {
    let limit = at_most;
    limit("placement segments", t.segments.len(), MAX_SEGMENTS)?;
    limit("placement CPUs", t.cpu_ns.len(), MAX_CPUS)?;
    let ordered = t.segments.windows(2).all(|w| w[0].to_ns <= w[1].from_ns)
        && t.segments.iter().all(|s| s.from_ns <= s.to_ns);
    if !ordered {
        return Err(WireError::OutOfRange {
            what: "placement segment order",
            value: 1,
            limit: 0,
        });
    }
    for &(_, ns) in &t.cpu_ns {
        duration("time on a CPU", ns)?;
    }
    Ok(Trace {
        changes: count("CPU changes", t.changes)?,
        samples: count("CPU samples", t.samples)?,
        sched_migrations: t
            .sched_migrations
            .map(|n| count("migrations", n))
            .transpose()?,
        boot_id: t.boot_id.map(|b| clean(&b, 64)),
        ..t
    })
}

/// A peer's `--send` counts, every counter in range.
fn checked_send(s: SendCounts) -> Result<SendCounts, WireError> {
    Ok(SendCounts {
        method: s.method,
        calls: s.calls.map(|n| count("send calls", n)).transpose()?,
        zerocopy: s
            .zerocopy
            .map(|z| -> Result<_, WireError> {
                Ok(ZerocopyCounts {
                    sends: count("zerocopy sends", z.sends)?,
                    completed: count("zerocopy completions", z.completed)?,
                    copied: count("zerocopy copies", z.copied)?,
                    enobufs: count("zerocopy ENOBUFS", z.enobufs)?,
                    notifications: count("zerocopy notifications", z.notifications)?,
                })
            })
            .transpose()?,
    })
}

/// Text from a peer made safe to print: control characters (escape sequences, carriage
/// returns, bells) become visible escapes ([`crate::vocab::text::terminal`]: `\x1b`, `\r`) and
/// the text is cut at `max` characters.
pub fn clean(text: &str, max: usize) -> String {
    crate::vocab::text::terminal_cut(text, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SideReport {
        let mut h = latency_histogram();
        for v in [1_000u64, 1_500, 14_000, 14_100, 75_000, 2_000_000] {
            h.record(v).unwrap();
        }
        SideReport {
            bytes: 123_456_789,
            messages: 4242,
            start_delay: Duration::from_micros(17),
            elapsed: Some(Duration::from_millis(1003)),
            cpu: ThreadCpu {
                user: Duration::from_millis(10),
                system: Duration::from_millis(700),
                voluntary_switches: 9,
                involuntary_switches: 3,
                exact: Duration::from_nanos(712_345_678),
            },
            counters: Some(Counts {
                hardware_unavailable: Some("no PMU".into()),
                task_clock_ns: Some(712_000_000),
                context_switches: Some(12),
                cpu_migrations: Some(2),
                page_faults: Some(40),
                ..Counts::default()
            }),
            interrupted: false,
            socket_buffers: (Some(2_626_560), Some(131_072)),
            latencies: vec![(LatencyKind::RoundTrip, h)],
            stamps: Some(crate::measure::timestamps::StampLog {
                every: 2,
                base_ns: 1_700_000_000_000_000_000,
                records: vec![[0, 1, 1001, 1300, 4300, 0], [2, 9000, 0, 9300, 12_000, 0]],
                link: "127.0.0.1:40000".into(),
            }),
            timeouts: 2,
            late: 1,
            sequence: Some(SequenceCounts {
                reordered: 5,
                duplicated: 6,
            }),
            close: Some(Duration::from_micros(40)),
            io_uring: Some(crate::vocab::uring_use::UringUse {
                submissions: 12,
                fixed_operations: 3,
                multishot_completions: 40,
                sqpoll: true,
                sqpoll_cpu_ns: Some(9_000_000),
                notes: vec!["a note".into()],
            }),
            on_cpu: (Some(0), Some(1)),
            placement: Some(Trace {
                cpu_ns: vec![(0, 600), (1, 400)],
                changes: 1,
                samples: 10,
                segments: vec![
                    crate::measure::placement::Segment {
                        cpu: 0,
                        from_ns: 1000,
                        to_ns: 1600,
                    },
                    crate::measure::placement::Segment {
                        cpu: 1,
                        from_ns: 1600,
                        to_ns: 2000,
                    },
                ],
                sched_migrations: Some(1),
                boot_id: Some("b00t".into()),
            }),
            send: Some(SendCounts {
                method: crate::vocab::SendMethod::Zerocopy,
                calls: Some(40),
                zerocopy: Some(ZerocopyCounts {
                    sends: 38,
                    completed: 37,
                    copied: 30,
                    enobufs: 2,
                    notifications: 5,
                }),
            }),
            recv: Some(RecvCounts {
                method: crate::vocab::RecvMethod::Zerocopy,
                bytes_mapped: 1 << 20,
                bytes_copied: 100,
                map_calls: Some(9),
            }),
            calls: Some(133),
            tcp: Some(TcpInfo::new(17, 40, 65483, 57, 12, 65536)),
            swarm: None,
            relay: None,
        }
    }

    fn relay_side() -> RelaySide {
        RelaySide {
            bytes: 1 << 30,
            messages: 16384,
            connections: 2,
            cpu_ns: 300_000_000,
            cut_short: None,
            relay: Some(RelayCopies {
                copied: crate::copy::Copied {
                    bytes: 1 << 30,
                    syscalls: 40_000,
                    ops: 40_000,
                },
                relayed: 2,
                cpu_ns: 400_000_000,
                process_cpu_ns: 900_000_000,
                accounted_cpu_ns: 850_000_000,
                pipe_size: Some(65536),
            }),
        }
    }

    #[test]
    fn a_relay_side_crosses_unchanged_and_only_within_its_limits() {
        let r = SideReport {
            relay: Some(relay_side()),
            ..sample()
        };
        let json = serde_json::to_string(&WireSide::from(&r)).unwrap();
        let back: WireSide = serde_json::from_str(&json).unwrap();
        assert_eq!(back.into_side().unwrap().relay, Some(relay_side()));
        let plain = serde_json::to_value(WireSide::from(&sample())).unwrap();
        assert!(plain.get("relay").is_none(), "{plain}");
        let refused = |f: &dyn Fn(&mut RelaySide), what: &str| {
            let mut s = relay_side();
            f(&mut s);
            let w = WireSide {
                relay: Some(s),
                ..WireSide::from(&sample())
            };
            match w.into_side() {
                Err(WireError::OutOfRange { what: got, .. }) => assert_eq!(got, what),
                other => panic!("{what}: {other:?}"),
            }
        };
        refused(&|s| s.bytes = MAX_COUNT + 1, "relay bytes");
        refused(&|s| s.messages = MAX_COUNT + 1, "relay messages");
        refused(&|s| s.connections = MAX_COUNT + 1, "relay connections");
        refused(&|s| s.cpu_ns = MAX_NANOS + 1, "relay role CPU");
        let inner = |f: fn(&mut RelayCopies)| move |s: &mut RelaySide| f(s.relay.as_mut().unwrap());
        refused(&inner(|c| c.copied.bytes = MAX_COUNT + 1), "bytes relayed");
        refused(
            &inner(|c| c.copied.syscalls = MAX_COUNT + 1),
            "relay system calls",
        );
        refused(&inner(|c| c.copied.ops = MAX_COUNT + 1), "relay operations");
        refused(&inner(|c| c.relayed = MAX_COUNT + 1), "connections relayed");
        refused(&inner(|c| c.cpu_ns = MAX_NANOS + 1), "relay CPU");
        refused(
            &inner(|c| c.process_cpu_ns = MAX_NANOS + 1),
            "relay process CPU",
        );
        refused(
            &inner(|c| c.accounted_cpu_ns = MAX_NANOS + 1),
            "relay accounted CPU",
        );
        refused(&inner(|c| c.pipe_size = Some(MAX_COUNT + 1)), "pipe size");
        // An unknown field is refused, not ignored.
        let mut v = serde_json::to_value(WireSide::from(&r)).unwrap();
        v["relay"]["extra"] = 1.into();
        assert!(serde_json::from_value::<WireSide>(v).is_err());
    }

    fn swarm_side() -> SwarmSide {
        SwarmSide {
            setup_ns: 1_500_000,
            sent: 3000,
            received: 2900,
            received_in_interval: 2800,
            per_pair: vec![1000, 900, 900],
            failed: vec![2],
            errors: vec![("read: Connection reset by peer (104)".into(), 1)],
        }
    }

    #[test]
    fn a_swarm_side_crosses_unchanged_and_only_within_its_limits() {
        let r = SideReport {
            swarm: Some(swarm_side()),
            ..sample()
        };
        let json = serde_json::to_string(&WireSide::from(&r)).unwrap();
        let back: WireSide = serde_json::from_str(&json).unwrap();
        assert_eq!(back.into_side().unwrap().swarm, Some(swarm_side()));
        // A report without one (every workload but swarm) carries none.
        let plain = serde_json::to_value(WireSide::from(&sample())).unwrap();
        assert!(plain.get("swarm").is_none(), "{plain}");
        let refused = |f: &dyn Fn(&mut SwarmSide), what: &str| {
            let mut s = swarm_side();
            f(&mut s);
            let w = WireSide {
                swarm: Some(s),
                ..WireSide::from(&sample())
            };
            match w.into_side() {
                Err(WireError::OutOfRange { what: got, .. }) => assert_eq!(got, what),
                other => panic!("{what}: {other:?}"),
            }
        };
        refused(
            &|s| s.per_pair = vec![0; MAX_PAIRS as usize + 1],
            "swarm pairs",
        );
        // A failed pair is one of the pairs.
        refused(&|s| s.failed = vec![3], "a failed pair's index");
        refused(&|s| s.failed = vec![0, 1, 2, 0], "failed swarm pairs");
        refused(
            &|s| s.errors = vec![("e".into(), 1); MAX_ERROR_KINDS + 1],
            "swarm error kinds",
        );
        refused(&|s| s.per_pair[1] = MAX_COUNT + 1, "a pair's figure");
        refused(&|s| s.sent = MAX_COUNT + 1, "swarm bytes written");
        refused(&|s| s.received = MAX_COUNT + 1, "swarm bytes read");
        refused(
            &|s| s.received_in_interval = MAX_COUNT + 1,
            "swarm bytes read in the interval",
        );
        refused(&|s| s.errors[0].1 = MAX_COUNT + 1, "pairs an error struck");
        refused(&|s| s.setup_ns = MAX_NANOS + 1, "swarm set-up");
        // Exactly at the limits: taken, an error's text made safe to print.
        let mut s = swarm_side();
        s.per_pair = vec![MAX_COUNT; 4];
        s.failed = vec![0, 1, 2, 3];
        s.errors = vec![("\x1b[2Jgone".into(), MAX_COUNT); MAX_ERROR_KINDS];
        s.errors[0].0 = "\u{1b}[2Jgone".into();
        let w = WireSide {
            swarm: Some(s),
            ..WireSide::from(&sample())
        };
        let back = w.into_side().unwrap().swarm.unwrap();
        assert_eq!(back.per_pair.len(), 4);
        assert!(!back.errors[0].0.contains('\u{1b}'), "{:?}", back.errors[0]);
    }

    #[test]
    fn a_timestamp_log_over_the_cap_is_refused() {
        let mut w = WireSide::from(&sample());
        if let Some(s) = &mut w.stamps {
            s.records = vec![[0; 6]; crate::measure::timestamps::CAP + 1];
        }
        let e = w.into_side().unwrap_err();
        assert!(matches!(e, WireError::Stamps(_)), "{e}");
    }

    #[test]
    fn a_report_crosses_unchanged() {
        let r = sample();
        let json = serde_json::to_string(&WireSide::from(&r)).unwrap();
        let back: WireSide = serde_json::from_str(&json).unwrap();
        let back = back.into_side().unwrap();
        assert_eq!(WireSide::from(&back), WireSide::from(&r));
        let (h0, h1) = (&r.latencies[0].1, &back.latencies[0].1);
        assert_eq!(h0.len(), h1.len());
        for q in [0.0, 0.5, 0.9, 0.99, 1.0] {
            assert_eq!(h0.value_at_quantile(q), h1.value_at_quantile(q), "q {q}");
        }
        assert_eq!(back.cpu, r.cpu);
        assert_eq!(back.elapsed, r.elapsed);
        assert_eq!(back.tcp, r.tcp);
    }

    #[test]
    fn the_tcp_window_in_bytes_is_computed_here_not_taken_from_the_peer() {
        let w = WireSide::from(&sample());
        let json = serde_json::to_value(&w).unwrap();
        assert!(json["tcp"].get("snd_cwnd_bytes").is_none(), "{json}");
        // A peer that claims a window in bytes is refused, as any unknown field is.
        let mut claimed = json.clone();
        claimed["tcp"]["snd_cwnd_bytes"] = serde_json::json!(1);
        assert!(serde_json::from_value::<WireSide>(claimed).is_err());
        let back = w.into_side().unwrap().tcp.unwrap();
        assert_eq!(back.snd_cwnd_bytes, 40 * 65483);
        // A role with no TCP figures sends none, and a report without them is read.
        let mut none = json;
        none.as_object_mut().unwrap().remove("tcp");
        let side: WireSide = serde_json::from_value(none).unwrap();
        assert_eq!(side.into_side().unwrap().tcp, None);
    }

    #[test]
    fn figures_out_of_range_are_refused() {
        let good = WireSide::from(&sample());
        let cases: Vec<(&str, WireSide)> = vec![
            (
                "io_uring submissions",
                WireSide {
                    io_uring: Some(crate::vocab::uring_use::UringUse {
                        submissions: MAX_COUNT + 1,
                        ..Default::default()
                    }),
                    ..good.clone()
                },
            ),
            (
                "sqpoll CPU",
                WireSide {
                    io_uring: Some(crate::vocab::uring_use::UringUse {
                        sqpoll_cpu_ns: Some(u64::MAX),
                        ..Default::default()
                    }),
                    ..good.clone()
                },
            ),
            (
                "bytes",
                WireSide {
                    bytes: MAX_COUNT + 1,
                    ..good.clone()
                },
            ),
            (
                "messages",
                WireSide {
                    messages: u64::MAX,
                    ..good.clone()
                },
            ),
            (
                "interval",
                WireSide {
                    elapsed_ns: Some(MAX_NANOS + 1),
                    ..good.clone()
                },
            ),
            (
                "thread CPU",
                WireSide {
                    cpu: [0, 0, u64::MAX, 0, 0],
                    ..good.clone()
                },
            ),
            (
                "latency samples",
                WireSide {
                    latencies: vec![("round_trip".into(), vec![(1000, MAX_COUNT + 1)])],
                    ..good.clone()
                },
            ),
            (
                "zerocopy copies",
                WireSide {
                    send: good.send.map(|s| SendCounts {
                        zerocopy: s.zerocopy.map(|z| ZerocopyCounts {
                            copied: u64::MAX,
                            ..z
                        }),
                        ..s
                    }),
                    ..good.clone()
                },
            ),
            (
                "bytes mapped",
                WireSide {
                    recv: good.recv.map(|r| RecvCounts {
                        bytes_mapped: MAX_COUNT + 1,
                        ..r
                    }),
                    ..good.clone()
                },
            ),
            (
                "page faults",
                WireSide {
                    counters: good.counters.clone().map(|c| Counts {
                        page_faults: Some(MAX_COUNT + 1),
                        ..c
                    }),
                    ..good.clone()
                },
            ),
            (
                "placement segments",
                WireSide {
                    placement: good.placement.clone().map(|t| Trace {
                        segments: vec![t.segments[0]; MAX_SEGMENTS + 1],
                        ..t
                    }),
                    ..good.clone()
                },
            ),
            (
                "placement segment order",
                WireSide {
                    placement: good.placement.clone().map(|t| Trace {
                        segments: t.segments.into_iter().rev().collect(),
                        ..t
                    }),
                    ..good.clone()
                },
            ),
            (
                "TCP retransmits",
                WireSide {
                    tcp: good.tcp.map(|t| WireTcp {
                        retransmits: u64::from(u32::MAX) + 1,
                        ..t
                    }),
                    ..good.clone()
                },
            ),
            (
                "TCP congestion window",
                WireSide {
                    tcp: good.tcp.map(|t| WireTcp {
                        snd_cwnd_segments: u64::MAX,
                        ..t
                    }),
                    ..good.clone()
                },
            ),
            (
                "migrations",
                WireSide {
                    placement: good.placement.clone().map(|t| Trace {
                        sched_migrations: Some(u64::MAX),
                        ..t
                    }),
                    ..good.clone()
                },
            ),
        ];
        for (what, w) in cases {
            match w.into_side() {
                Err(WireError::OutOfRange { what: got, .. }) => assert_eq!(got, what),
                other => panic!("{what}: {:?}", other.map(|_| ())),
            }
        }
        // Two buckets each under the limit whose sum is over it.
        let w = WireSide {
            latencies: vec![(
                "round_trip".into(),
                vec![(1000, MAX_COUNT), (2000, MAX_COUNT)],
            )],
            ..good.clone()
        };
        assert!(matches!(w.into_side(), Err(WireError::OutOfRange { .. })));
        let w = WireSide {
            latencies: vec![("\u{1b}[2J".into(), vec![])],
            ..good.clone()
        };
        assert_eq!(w.into_side().err(), Some(WireError::UnknownLatency));
        let w = WireSide {
            latencies: vec![("round_trip".into(), vec![(u64::MAX, 1)])],
            ..good
        };
        assert!(matches!(w.into_side(), Err(WireError::Histogram(_))));
    }

    #[test]
    fn figures_at_their_limits_are_accepted() {
        assert_eq!(count("bytes", MAX_COUNT), Ok(MAX_COUNT));
        assert_eq!(
            duration("interval", MAX_NANOS),
            Ok(Duration::from_nanos(MAX_NANOS))
        );
        let at_limit: Vec<(u64, u64)> = (0..MAX_BUCKETS as u64).map(|i| (1000 + i, 1)).collect();
        assert_eq!(histogram(&at_limit).unwrap().len(), MAX_BUCKETS as u64);
        let mut over = at_limit;
        over.push((999, 1));
        assert!(matches!(
            histogram(&over),
            Err(WireError::OutOfRange {
                what: "latency buckets",
                ..
            })
        ));
        assert!(matches!(
            histogram(&[]),
            Ok(h) if h.is_empty()
        ));
    }

    #[test]
    fn negative_counts_and_unknown_fields_do_not_parse() {
        let json = serde_json::to_value(WireSide::default()).unwrap();
        let mut neg = json.clone();
        neg["bytes"] = serde_json::json!(-1);
        assert!(serde_json::from_value::<WireSide>(neg).is_err());
        let mut extra = json;
        extra["admin"] = serde_json::json!(true);
        assert!(serde_json::from_value::<WireSide>(extra).is_err());
    }

    #[test]
    fn text_from_a_peer_loses_its_control_characters() {
        assert_eq!(
            clean("linux\u{1b}[31m 6.1\r\n\u{7}", 100),
            "linux\\x1b[31m 6.1\\r\\n\\x07"
        );
        assert_eq!(clean("abcdef", 3), "abc…");
        assert_eq!(clean("ok", 2), "ok");
    }
}
