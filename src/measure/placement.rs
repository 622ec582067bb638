//! Where a role's thread ran during its measured interval: the CPU sampled now and then
//! (`sched_getcpu`, a vDSO call, with a `CLOCK_MONOTONIC` reading), never once per
//! message, and its migrations from the scheduler's own count.
//!
//! [`begin`] (from `Meter::start`) starts a thread-local trace and [`end`] (from
//! `Meter::stop`) takes it. In between, every check a workload makes through its
//! `Publisher` is a tick of a [`Ticker`]; every `stride` ticks it samples. The stride
//! adapts so that samples come no closer than [`MIN_GAP_NS`] and, where the ticks allow, no
//! further apart than [`MAX_GAP_NS`]: at a few tens of nanoseconds a sample, that is under
//! 0.05% of the thread's time, and the time line is resolved to about a millisecond.
//!
//! The record is bounded: time per CPU (exact over the samples), CPU changes seen, and a
//! time line of at most [`MAX_SEGMENTS`] segments `(cpu, from, to)`; when full, pairs of
//! neighbours merge (the longer one's CPU wins), halving the resolution. Times are
//! `CLOCK_MONOTONIC` nanoseconds, shared by every process on a host, so a role in a child
//! process or in a server on the same host (same `boot_id`) lines up with this one.
//!
//! What this module does not do: figures and classes for the report live in
//! `measure::figures`, the warning in `diagnose`.

use std::cell::{Cell, RefCell};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// Samples closer than this make the stride double.
pub const MIN_GAP_NS: u64 = 100_000;
/// Samples further apart than this make the stride halve.
pub const MAX_GAP_NS: u64 = 1_000_000;
/// The most ticks between two samples.
const MAX_STRIDE: u32 = 1 << 16;
/// The most segments a trace keeps.
pub const MAX_SEGMENTS: usize = 256;

/// A stretch of time a thread was seen on one CPU (`CLOCK_MONOTONIC` ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    /// The CPU.
    pub cpu: u32,
    /// From.
    pub from_ns: u64,
    /// To.
    pub to_ns: u64,
}

impl Segment {
    fn len(&self) -> u64 {
        self.to_ns.saturating_sub(self.from_ns)
    }
}

/// How migrations were counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MigrationsSource {
    /// Exact: `se.nr_migrations` of `/proc/thread-self/sched` (CONFIG_SCHED_DEBUG).
    Sched,
    /// A lower bound: the CPU changes the samples saw.
    Sampled,
}

/// What one role's thread recorded over its interval.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trace {
    /// Nanoseconds attributed to each CPU `(cpu, ns)`, by the samples (the time between
    /// two samples on different CPUs is split between them).
    pub cpu_ns: Vec<(u32, u64)>,
    /// CPU changes seen between consecutive samples.
    pub changes: u64,
    /// Samples taken.
    pub samples: u64,
    /// The time line, in order, at most [`MAX_SEGMENTS`].
    pub segments: Vec<Segment>,
    /// Migrations the scheduler counted for this thread over the interval, where
    /// `/proc/thread-self/sched` exists.
    pub sched_migrations: Option<u64>,
    /// The host's boot id: two traces line up only if they come from the same boot.
    pub boot_id: Option<String>,
}

impl Trace {
    /// Migrations and how they were counted: the scheduler's count where there is one,
    /// else the CPU changes the samples saw (a lower bound).
    pub fn migrations(&self) -> (u64, MigrationsSource) {
        match self.sched_migrations {
            Some(n) => (n, MigrationsSource::Sched),
            None => (self.changes, MigrationsSource::Sampled),
        }
    }

    /// The time the trace covers, in ns.
    pub fn covered_ns(&self) -> u64 {
        self.cpu_ns.iter().map(|c| c.1).sum()
    }
}

/// The recorder of the calling thread's trace.
struct Tracer {
    last_ns: u64,
    last_cpu: u32,
    trace: Trace,
    sched0: Option<u64>,
}

impl Tracer {
    fn new(now_ns: u64, cpu: u32, sched0: Option<u64>) -> Tracer {
        Tracer {
            last_ns: now_ns,
            last_cpu: cpu,
            trace: Trace {
                segments: vec![Segment {
                    cpu,
                    from_ns: now_ns,
                    to_ns: now_ns,
                }],
                samples: 1,
                ..Trace::default()
            },
            sched0,
        }
    }

    fn add_ns(&mut self, cpu: u32, ns: u64) {
        match self.trace.cpu_ns.iter_mut().find(|c| c.0 == cpu) {
            Some(c) => c.1 += ns,
            None => self.trace.cpu_ns.push((cpu, ns)),
        }
    }

    /// A sample at `now_ns` on `cpu`; returns the gap since the previous one.
    fn sample(&mut self, now_ns: u64, cpu: u32) -> u64 {
        let now_ns = now_ns.max(self.last_ns);
        let gap = now_ns - self.last_ns;
        self.trace.samples += 1;
        if cpu == self.last_cpu {
            self.add_ns(cpu, gap);
            if let Some(s) = self.trace.segments.last_mut() {
                s.to_ns = now_ns;
            }
        } else {
            // Somewhere in between it moved: give each CPU half.
            let half = gap / 2;
            self.add_ns(self.last_cpu, half);
            self.add_ns(cpu, gap - half);
            self.trace.changes += 1;
            let mid = self.last_ns + half;
            if let Some(s) = self.trace.segments.last_mut() {
                s.to_ns = mid;
            }
            self.trace.segments.push(Segment {
                cpu,
                from_ns: mid,
                to_ns: now_ns,
            });
            if self.trace.segments.len() > MAX_SEGMENTS {
                self.trace.segments = halve(&self.trace.segments);
            }
        }
        self.last_ns = now_ns;
        self.last_cpu = cpu;
        gap
    }
}

/// The time line at half the resolution: each pair of neighbours becomes one segment on
/// the CPU the longer of the two was on; neighbours on one CPU then join.
pub fn halve(segments: &[Segment]) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::with_capacity(segments.len() / 2 + 1);
    for pair in segments.chunks(2) {
        let s = match pair {
            [a, b] => Segment {
                cpu: if b.len() > a.len() { b.cpu } else { a.cpu },
                from_ns: a.from_ns,
                to_ns: b.to_ns,
            },
            [a] => *a,
            _ => continue,
        };
        match out.last_mut() {
            Some(last) if last.cpu == s.cpu => last.to_ns = s.to_ns,
            _ => out.push(s),
        }
    }
    out
}

thread_local! {
    static TRACER: RefCell<Option<Tracer>> = const { RefCell::new(None) };
}

/// `CLOCK_MONOTONIC` now, in nanoseconds (a vDSO call).
pub fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec().max(0) as u64 * 1_000_000_000 + t.tv_nsec().max(0) as u64)
        .unwrap_or(0)
}

/// The CPU the calling thread is on now (a vDSO call, or the rseq area).
fn cpu_now() -> Option<u32> {
    nix::sched::sched_getcpu().ok().map(|c| c as u32)
}

/// This host's boot id (`/proc/sys/kernel/random/boot_id`), read once.
pub fn boot_id() -> Option<String> {
    static ID: OnceLock<Option<String>> = OnceLock::new();
    ID.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    })
    .clone()
}

/// A field of a `/proc/.../sched` file (`se.nr_migrations : 5`).
pub fn sched_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == name).then(|| v.trim().parse().ok())?
    })
}

/// The calling thread's migrations so far, from the scheduler (None without
/// CONFIG_SCHED_DEBUG).
pub fn sched_migrations() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/sched").ok()?;
    sched_field(&text, "se.nr_migrations")
}

/// Start the calling thread's trace (replacing one left unfinished).
pub fn begin() {
    let sched0 = sched_migrations();
    let Some(cpu) = cpu_now() else {
        TRACER.with(|t| *t.borrow_mut() = None);
        return;
    };
    let now = monotonic_ns();
    TRACER.with(|t| *t.borrow_mut() = Some(Tracer::new(now, cpu, sched0)));
}

/// Take one sample for the calling thread's trace, if one is running; the gap since
/// the last sample in ns (None without a trace).
pub fn sample() -> Option<u64> {
    let cpu = cpu_now()?;
    let now = monotonic_ns();
    TRACER.with(|t| t.borrow_mut().as_mut().map(|tr| tr.sample(now, cpu)))
}

/// End the calling thread's trace with a last sample and return it.
pub fn end() -> Option<Trace> {
    sample();
    let tracer = TRACER.with(|t| t.borrow_mut().take())?;
    let mut trace = tracer.trace;
    trace.sched_migrations = tracer
        .sched0
        .zip(sched_migrations())
        .map(|(a, b)| b.saturating_sub(a));
    trace.boot_id = boot_id();
    Some(trace)
}

/// Counts a role's checks and samples every `stride` of them, the stride adapting to
/// how fast the checks come.
#[derive(Debug)]
pub struct Ticker {
    left: Cell<u32>,
    stride: Cell<u32>,
}

impl Default for Ticker {
    fn default() -> Ticker {
        Ticker {
            left: Cell::new(1),
            stride: Cell::new(1),
        }
    }
}

impl Ticker {
    /// One check.
    #[inline]
    pub fn tick(&self) {
        let left = self.left.get();
        if left > 1 {
            self.left.set(left - 1);
        } else {
            self.take();
        }
    }

    #[cold]
    #[inline(never)]
    fn take(&self) {
        let stride = match sample() {
            Some(gap) => next_stride(self.stride.get(), gap),
            // No trace here: look again rarely.
            None => MAX_STRIDE,
        };
        self.stride.set(stride);
        self.left.set(stride);
    }
}

/// The stride after a sample that came `gap_ns` after the previous one.
pub fn next_stride(stride: u32, gap_ns: u64) -> u32 {
    if gap_ns < MIN_GAP_NS {
        (stride * 2).min(MAX_STRIDE)
    } else if gap_ns > MAX_GAP_NS {
        (stride / 2).max(1)
    } else {
        stride
    }
}

/// Nanoseconds two traces spent on the same CPU at the same time, and the time both
/// covered.
pub fn overlap(a: &[Segment], b: &[Segment]) -> (u64, u64) {
    let (mut i, mut j) = (0, 0);
    let (mut same, mut both) = (0u64, 0u64);
    while i < a.len() && j < b.len() {
        let from = a[i].from_ns.max(b[j].from_ns);
        let to = a[i].to_ns.min(b[j].to_ns);
        if to > from {
            both += to - from;
            if a[i].cpu == b[j].cpu {
                same += to - from;
            }
        }
        if a[i].to_ns <= b[j].to_ns {
            i += 1;
        } else {
            j += 1;
        }
    }
    (same, both)
}

/// The share of the time both traces cover that they spent on one CPU; None if they
/// come from different hosts (or boots) or never overlap.
pub fn same_cpu_share(a: &Trace, b: &Trace) -> Option<f64> {
    if a.boot_id.is_none() || a.boot_id != b.boot_id {
        return None;
    }
    let (same, both) = overlap(&a.segments, &b.segments);
    (both > 0).then(|| same as f64 / both as f64)
}

/// Where a run's two roles ran.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum PlacementClass {
    /// Both roles on one CPU at least 90% of the time.
    SameCpu,
    /// Both roles on one CPU at most 10% of the time.
    AcrossCpus,
    /// In between.
    Mixed,
}

impl PlacementClass {
    /// The class of a same-CPU share.
    pub fn of(share: f64) -> PlacementClass {
        if share >= 0.9 {
            PlacementClass::SameCpu
        } else if share <= 0.1 {
            PlacementClass::AcrossCpus
        } else {
            PlacementClass::Mixed
        }
    }

    /// Its name in JSON and tables.
    pub fn name(self) -> &'static str {
        match self {
            PlacementClass::SameCpu => "same-cpu",
            PlacementClass::AcrossCpus => "across-cpus",
            PlacementClass::Mixed => "mixed",
        }
    }

    /// How a warning says it of `n` runs ("on one CPU", "across CPUs").
    pub fn words(self) -> &'static str {
        match self {
            PlacementClass::SameCpu => "on one CPU",
            PlacementClass::AcrossCpus => "across CPUs",
            PlacementClass::Mixed => "partly on one CPU",
        }
    }
}

/// A CPU a role was seen on, and its share of the role's time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuShare {
    /// The CPU.
    pub cpu: u32,
    /// Its share of the role's sampled time, 0 to 1.
    pub share: f64,
}

/// Where a run's two roles ran relative to each other.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunPlacement {
    /// The share of the time both roles were running that they spent on the same CPU,
    /// 0 to 1 (from the two traces, both CLOCK_MONOTONIC).
    pub same_cpu_share: f64,
    /// `same-cpu` (share >= 0.9), `across-cpus` (<= 0.1) or `mixed`.
    pub class: PlacementClass,
}

/// One role's CPUs (most used first), migrations and how they were counted, over its
/// streams' traces; empty and null when any trace is missing.
pub fn side(traces: &[Option<&Trace>]) -> (Vec<CpuShare>, Option<u64>, Option<MigrationsSource>) {
    let Some(traces) = traces.iter().copied().collect::<Option<Vec<&Trace>>>() else {
        return (Vec::new(), None, None);
    };
    if traces.is_empty() {
        return (Vec::new(), None, None);
    }
    let mut ns: Vec<(u32, u64)> = Vec::new();
    for &(cpu, t) in traces.iter().flat_map(|t| &t.cpu_ns) {
        match ns.iter_mut().find(|c| c.0 == cpu) {
            Some(c) => c.1 += t,
            None => ns.push((cpu, t)),
        }
    }
    let total: u64 = ns.iter().map(|c| c.1).sum();
    let mut cpus: Vec<CpuShare> = if total > 0 {
        ns.iter()
            .filter(|c| c.1 > 0)
            .map(|&(cpu, t)| CpuShare {
                cpu,
                share: t as f64 / total as f64,
            })
            .collect()
    } else {
        // An interval too short for time to pass between samples: the CPUs seen.
        let mut seen: Vec<u32> = traces
            .iter()
            .flat_map(|t| t.segments.iter().map(|s| s.cpu))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        let n = seen.len().max(1) as f64;
        seen.into_iter()
            .map(|cpu| CpuShare {
                cpu,
                share: 1.0 / n,
            })
            .collect()
    };
    cpus.sort_by(|a, b| b.share.total_cmp(&a.share).then(a.cpu.cmp(&b.cpu)));
    let counted: Vec<(u64, MigrationsSource)> = traces.iter().map(|t| t.migrations()).collect();
    let source = if counted.iter().all(|c| c.1 == MigrationsSource::Sched) {
        MigrationsSource::Sched
    } else {
        MigrationsSource::Sampled
    };
    let migrations = counted.iter().map(|c| c.0).sum();
    (cpus, Some(migrations), Some(source))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(cpu: u32, from_ns: u64, to_ns: u64) -> Segment {
        Segment {
            cpu,
            from_ns,
            to_ns,
        }
    }

    #[test]
    fn samples_on_one_cpu_make_one_segment_and_a_move_splits_the_gap() {
        let mut t = Tracer::new(1000, 0, None);
        t.sample(2000, 0);
        t.sample(3000, 0);
        assert_eq!(t.trace.segments, [seg(0, 1000, 3000)]);
        t.sample(4000, 1);
        assert_eq!(t.trace.segments, [seg(0, 1000, 3500), seg(1, 3500, 4000)]);
        assert_eq!(t.trace.changes, 1);
        assert_eq!(t.trace.samples, 4);
        assert_eq!(t.trace.cpu_ns, [(0, 2500), (1, 500)]);
        assert_eq!(t.trace.covered_ns(), 3000);
        // A clock that went back is held.
        assert_eq!(t.sample(3900, 1), 0);
    }

    #[test]
    fn the_time_line_keeps_full_resolution_up_to_its_cap() {
        let mut t = Tracer::new(0, 0, None);
        for k in 1..MAX_SEGMENTS as u64 {
            t.sample(k * 1000, (k % 2) as u32);
        }
        assert_eq!(t.trace.segments.len(), MAX_SEGMENTS);
        t.sample(MAX_SEGMENTS as u64 * 1000, 7);
        assert!(t.trace.segments.len() <= MAX_SEGMENTS / 2 + 1);
    }

    #[test]
    fn a_full_time_line_halves_and_stays_bounded() {
        let mut t = Tracer::new(0, 0, None);
        for k in 1..=10 * MAX_SEGMENTS as u64 {
            t.sample(k * 1000, (k % 2) as u32);
        }
        assert!(t.trace.segments.len() <= MAX_SEGMENTS);
        let s = &t.trace.segments;
        assert_eq!(s.first().unwrap().from_ns, 0);
        assert_eq!(s.last().unwrap().to_ns, 10 * MAX_SEGMENTS as u64 * 1000);
        assert!(s.windows(2).all(|w| w[0].to_ns == w[1].from_ns));
        // The per-CPU time stays exact whatever the time line lost.
        assert_eq!(t.trace.covered_ns(), 10 * MAX_SEGMENTS as u64 * 1000);
        assert_eq!(t.trace.changes, 10 * MAX_SEGMENTS as u64);
    }

    #[test]
    fn halving_keeps_the_longer_cpu_and_joins_neighbours() {
        let h = halve(&[
            seg(0, 0, 10),
            seg(1, 10, 11),
            seg(2, 11, 12),
            seg(0, 12, 30),
        ]);
        assert_eq!(h, [seg(0, 0, 30)]);
        let h = halve(&[seg(0, 0, 1), seg(1, 1, 10), seg(2, 10, 12)]);
        assert_eq!(h, [seg(1, 0, 10), seg(2, 10, 12)]);
        // A tie goes to the first.
        assert_eq!(halve(&[seg(3, 0, 5), seg(4, 5, 10)]), [seg(3, 0, 10)]);
    }

    #[test]
    fn overlap_counts_only_common_time_and_same_cpu_within_it() {
        let a = [seg(0, 0, 100), seg(1, 100, 200)];
        let b = [seg(0, 50, 150), seg(1, 150, 300)];
        // Common: 50..200 = 150; same CPU: 50..100 (0) and 150..200 (1) = 100.
        assert_eq!(overlap(&a, &b), (100, 150));
        assert_eq!(overlap(&a, &[seg(0, 300, 400)]), (0, 0));
        assert_eq!(overlap(&[], &b), (0, 0));
    }

    #[test]
    fn traces_from_different_boots_do_not_line_up() {
        let t = |boot: Option<&str>, cpu| Trace {
            segments: vec![seg(cpu, 0, 100)],
            boot_id: boot.map(String::from),
            ..Trace::default()
        };
        assert_eq!(
            same_cpu_share(&t(Some("a"), 0), &t(Some("a"), 0)),
            Some(1.0)
        );
        assert_eq!(
            same_cpu_share(&t(Some("a"), 0), &t(Some("a"), 1)),
            Some(0.0)
        );
        assert_eq!(same_cpu_share(&t(Some("a"), 0), &t(Some("b"), 0)), None);
        assert_eq!(same_cpu_share(&t(None, 0), &t(None, 0)), None);
        // Traces that never overlap in time have no share (not 0/0).
        let later = Trace {
            segments: vec![seg(0, 200, 300)],
            ..t(Some("a"), 0)
        };
        assert_eq!(same_cpu_share(&t(Some("a"), 0), &later), None);
    }

    #[test]
    fn classes_split_at_a_tenth_and_nine_tenths() {
        assert_eq!(PlacementClass::of(1.0), PlacementClass::SameCpu);
        assert_eq!(PlacementClass::of(0.9), PlacementClass::SameCpu);
        assert_eq!(PlacementClass::of(0.89), PlacementClass::Mixed);
        assert_eq!(PlacementClass::of(0.11), PlacementClass::Mixed);
        assert_eq!(PlacementClass::of(0.1), PlacementClass::AcrossCpus);
        assert_eq!(PlacementClass::of(0.0), PlacementClass::AcrossCpus);
        assert_eq!(
            serde_json::to_value(PlacementClass::AcrossCpus).unwrap(),
            PlacementClass::AcrossCpus.name()
        );
    }

    #[test]
    fn the_stride_doubles_on_close_samples_and_halves_on_far_ones() {
        assert_eq!(next_stride(4, MIN_GAP_NS - 1), 8);
        assert_eq!(next_stride(4, MIN_GAP_NS), 4);
        assert_eq!(next_stride(4, MAX_GAP_NS), 4);
        assert_eq!(next_stride(4, MAX_GAP_NS + 1), 2);
        assert_eq!(next_stride(1, MAX_GAP_NS + 1), 1);
        assert_eq!(next_stride(MAX_STRIDE, 0), MAX_STRIDE);
    }

    #[test]
    fn the_sched_file_gives_its_migrations() {
        let text = "x (1, #threads: 1)\n----\nse.exec_start   :   1.5\nse.nr_migrations  :   17\nnr_switches : 3\n";
        assert_eq!(sched_field(text, "se.nr_migrations"), Some(17));
        assert_eq!(sched_field(text, "nr_switches"), Some(3));
        assert_eq!(sched_field(text, "se.exec_start"), None, "not a count");
        assert_eq!(sched_field(text, "missing"), None);
    }

    #[test]
    fn a_thread_pinned_to_a_cpu_traces_only_that_cpu() {
        let got = std::thread::spawn(|| {
            let mut set = nix::sched::CpuSet::new();
            set.set(0).unwrap();
            nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).unwrap();
            begin();
            let ticker = Ticker::default();
            for _ in 0..100_000 {
                ticker.tick();
            }
            end()
        })
        .join()
        .unwrap()
        .expect("a trace");
        assert!(got.samples >= 2, "{got:?}");
        assert!(got.cpu_ns.iter().all(|c| c.0 == 0), "{got:?}");
        assert!(got.segments.iter().all(|s| s.cpu == 0), "{got:?}");
        assert_eq!(got.changes, 0);
        if std::path::Path::new("/proc/thread-self/sched").exists() {
            assert_eq!(got.migrations(), (0, MigrationsSource::Sched));
        }
        assert!(end().is_none(), "the trace was taken");
    }
}

#[cfg(test)]
mod cost {
    /// What one sample costs here (run with --ignored --nocapture; a debug build is
    /// slower than a release one).
    #[test]
    #[ignore]
    fn one_sample_costs_tens_of_nanoseconds() {
        super::begin();
        let n = 1_000_000;
        let t = std::time::Instant::now();
        for _ in 0..n {
            super::sample();
        }
        let per = t.elapsed().as_nanos() as f64 / n as f64;
        let trace = super::end().unwrap();
        eprintln!("{per:.1} ns a sample, {} samples", trace.samples);
    }
}
