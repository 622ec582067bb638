//! CPU time of one thread (`getrusage(RUSAGE_THREAD)`) and of the whole machine
//! (`/proc/stat`), as differences over the measured interval only.

use std::time::Duration;

use nix::sys::resource::{getrusage, UsageWho};
use serde::{Deserialize, Serialize};

/// The whole process's CPU time so far: every thread, living or gone, the kernel's
/// io_uring workers included (`CLOCK_PROCESS_CPUTIME_ID`, exact to the nanosecond).
pub fn process_cpu() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .map(|t| Duration::new(t.tv_sec().max(0) as u64, t.tv_nsec().max(0) as u32))
        .unwrap_or_default()
}

/// CPU time and context switches of the calling thread since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ThreadCpu {
    /// Time spent in user mode.
    pub user: Duration,
    /// Time spent in the kernel on this thread's behalf.
    pub system: Duration,
    /// Voluntary context switches (blocking waits).
    pub voluntary_switches: u64,
    /// Involuntary context switches (preemptions).
    pub involuntary_switches: u64,
    /// Total CPU time from `CLOCK_THREAD_CPUTIME_ID`: exact to the nanosecond, whereas the
    /// user/system split comes from tick sampling and moves in steps.
    pub exact: Duration,
}

impl ThreadCpu {
    /// Read the calling thread's counters. Returns zeros if the kernel refuses (never on
    /// Linux), so a measurement is never lost to this.
    pub fn now() -> ThreadCpu {
        let exact = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
            .map(|t| Duration::new(t.tv_sec().max(0) as u64, t.tv_nsec().max(0) as u32))
            .unwrap_or_default();
        match getrusage(UsageWho::RUSAGE_THREAD) {
            Ok(u) => ThreadCpu {
                user: tv(u.user_time()),
                system: tv(u.system_time()),
                voluntary_switches: u.voluntary_context_switches().max(0) as u64,
                involuntary_switches: u.involuntary_context_switches().max(0) as u64,
                exact,
            },
            Err(_) => ThreadCpu {
                exact,
                ..ThreadCpu::default()
            },
        }
    }

    /// What was used between `earlier` and `self` (saturating, never negative).
    pub fn since(&self, earlier: &ThreadCpu) -> ThreadCpu {
        ThreadCpu {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
            voluntary_switches: self
                .voluntary_switches
                .saturating_sub(earlier.voluntary_switches),
            involuntary_switches: self
                .involuntary_switches
                .saturating_sub(earlier.involuntary_switches),
            exact: self.exact.saturating_sub(earlier.exact),
        }
    }

    /// Sum of two threads' usage.
    pub fn plus(&self, other: &ThreadCpu) -> ThreadCpu {
        ThreadCpu {
            user: self.user + other.user,
            system: self.system + other.system,
            voluntary_switches: self.voluntary_switches + other.voluntary_switches,
            involuntary_switches: self.involuntary_switches + other.involuntary_switches,
            exact: self.exact + other.exact,
        }
    }

    /// Total CPU time (user + system), from the exact clock.
    pub fn total(&self) -> Duration {
        self.exact
    }
}

fn tv(t: nix::sys::time::TimeVal) -> Duration {
    Duration::new(t.tv_sec().max(0) as u64, (t.tv_usec().max(0) as u32) * 1000)
}

/// The aggregate `cpu` line of `/proc/stat`, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SystemTicks {
    user: u64,
    nice: u64,
    system: u64,
    idle: u64,
    iowait: u64,
    irq: u64,
    softirq: u64,
    steal: u64,
}

impl SystemTicks {
    /// Read `/proc/stat` now; `None` if it is unreadable (then the figure is reported as null).
    pub fn now() -> Option<SystemTicks> {
        parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)
    }
}

/// Parse the first (`cpu `) line of `/proc/stat`.
pub fn parse_proc_stat(text: &str) -> Option<SystemTicks> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    Some(SystemTicks {
        user: at(0),
        nice: at(1),
        system: at(2),
        idle: at(3),
        iowait: at(4),
        irq: at(5),
        softirq: at(6),
        steal: at(7),
    })
}

/// Machine-wide CPU over the measured interval (all cores), from `/proc/stat`. Catches
/// kernel work done outside the measured threads (softirq processing, other threads).
/// Resolution is one clock tick (10 ms at USER_HZ=100), so short runs are coarse.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SystemCpu {
    /// Seconds of CPU spent in user mode (including nice) on all cores.
    pub cpu_user_seconds: f64,
    /// Seconds of CPU spent in the kernel, excluding interrupts.
    pub cpu_system_seconds: f64,
    /// Seconds of CPU spent in hard and soft interrupt handling (network stack work).
    pub cpu_interrupt_seconds: f64,
    /// All non-idle CPU seconds.
    pub cpu_busy_seconds: f64,
    /// Busy fraction of all cores over the interval, 0 to 1.
    pub utilization: f64,
}

impl SystemCpu {
    /// The difference between two readings; `None` when less than a tick per core went
    /// by (a run shorter than /proc/stat's resolution: unknown, not idle).
    pub fn between(a: &SystemTicks, b: &SystemTicks) -> Option<SystemCpu> {
        let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .filter(|&h| h > 0)
            .unwrap_or(100) as f64;
        let d = |x: u64, y: u64| y.saturating_sub(x) as f64 / hz;
        let user = d(a.user, b.user) + d(a.nice, b.nice);
        let system = d(a.system, b.system);
        let interrupt = d(a.irq, b.irq) + d(a.softirq, b.softirq);
        let busy = user + system + interrupt + d(a.steal, b.steal);
        let idle = d(a.idle, b.idle) + d(a.iowait, b.iowait);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        if (busy + idle) * hz < cores {
            return None;
        }
        Some(SystemCpu {
            cpu_user_seconds: user,
            cpu_system_seconds: system,
            cpu_interrupt_seconds: interrupt,
            cpu_busy_seconds: busy,
            utilization: busy / (busy + idle),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_aggregate_cpu_line_only() {
        let t = parse_proc_stat("cpu  10 2 30 400 5 6 7 8 0 0\ncpu0 1 1 1 1 1 1 1 1\n").unwrap();
        assert_eq!(t.user, 10);
        assert_eq!(t.softirq, 7);
        assert_eq!(t.steal, 8);
    }

    #[test]
    fn system_cpu_difference_is_never_negative() {
        let a = parse_proc_stat("cpu  100 0 100 100 0 0 0 0").unwrap();
        let b = parse_proc_stat("cpu  50 0 300 300 0 0 0 0").unwrap();
        let s = SystemCpu::between(&a, &b).unwrap();
        assert!(s.cpu_user_seconds >= 0.0);
        assert!(s.utilization > 0.0 && s.utilization <= 1.0);
    }

    fn hz() -> f64 {
        nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .unwrap_or(100) as f64
    }

    #[test]
    fn system_cpu_adds_up_each_kind_of_tick() {
        // user 10+5 nice, system 20, idle 60 + iowait 5, irq 3 + softirq 7, steal 2.
        let a = parse_proc_stat("cpu  100 10 100 1000 50 30 40 20").unwrap();
        let b = parse_proc_stat("cpu  110 15 120 1060 55 33 47 22").unwrap();
        let s = SystemCpu::between(&a, &b).unwrap();
        let t = |ticks: f64| ticks / hz();
        assert!((s.cpu_user_seconds - t(15.0)).abs() < 1e-12);
        assert!((s.cpu_system_seconds - t(20.0)).abs() < 1e-12);
        assert!((s.cpu_interrupt_seconds - t(10.0)).abs() < 1e-12);
        assert!((s.cpu_busy_seconds - t(47.0)).abs() < 1e-12);
        assert!(
            (s.utilization - 47.0 / 112.0).abs() < 1e-12,
            "{}",
            s.utilization
        );
    }

    #[test]
    fn one_tick_per_core_is_enough_to_judge() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        let a = parse_proc_stat("cpu  100 0 100 100 0 0 0 0").unwrap();
        let busy = parse_proc_stat(&format!("cpu  {} 0 100 100 0 0 0 0", 100 + cores)).unwrap();
        assert_eq!(SystemCpu::between(&a, &busy).unwrap().utilization, 1.0);
        if cores > 1 {
            let short = parse_proc_stat(&format!("cpu  {} 0 100 100 0 0 0 0", 99 + cores)).unwrap();
            assert_eq!(SystemCpu::between(&a, &short), None);
        }
    }

    #[test]
    fn an_interval_shorter_than_a_tick_is_unknown_not_idle() {
        let a = parse_proc_stat("cpu  100 0 100 100 0 0 0 0").unwrap();
        assert_eq!(SystemCpu::between(&a, &a), None);
    }

    #[test]
    fn thread_cpu_grows_with_work() {
        // Work until the kernel's clock for this thread has counted 30 ms (however long
        // that takes on a loaded machine), then compare.
        let clock = || {
            Duration::from(
                nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).unwrap(),
            )
        };
        let a = ThreadCpu::now();
        let (k0, t) = (clock(), std::time::Instant::now());
        let mut x = 0u64;
        while clock() - k0 < Duration::from_millis(30) && t.elapsed() < Duration::from_secs(10) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let used = ThreadCpu::now().since(&a);
        let (kernel, wall) = (clock() - k0, t.elapsed());
        assert!(
            used.total() >= kernel.min(Duration::from_millis(30)),
            "{used:?} vs {kernel:?}"
        );
        assert!(
            used.total() <= wall + Duration::from_millis(5),
            "{used:?} in {wall:?}"
        );
    }
}

/// The CPU the calling thread runs on now (field 39 of `/proc/thread-self/stat`); `None`
/// if it cannot be read.
pub fn current_cpu() -> Option<u32> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    processor_field(&stat)
}

/// The `processor` field of a `stat` line: the 37th field after the command's closing
/// parenthesis (the command itself may hold spaces and parentheses).
fn processor_field(stat: &str) -> Option<u32> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(36)?.parse().ok()
}

#[cfg(test)]
mod current_cpu_tests {
    use super::*;

    #[test]
    fn process_cpu_counts_every_thread_including_one_that_has_ended() {
        let before = process_cpu();
        let spun = std::thread::spawn(|| {
            let t0 = ThreadCpu::now();
            let mut x = 0u64;
            while ThreadCpu::now().since(&t0).exact < Duration::from_millis(30) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            ThreadCpu::now().since(&t0).exact
        })
        .join()
        .unwrap();
        let used = process_cpu().saturating_sub(before);
        assert!(used >= spun, "{used:?} < {spun:?}");
        assert!(used < Duration::from_secs(5), "{used:?}");
    }

    #[test]
    fn the_processor_field_is_read_after_the_command() {
        // Field 39 of a real line, with a command name holding ") (" to mislead a split.
        let mut line = String::from("4242 (a) (b) S");
        for i in 4..=38 {
            line.push_str(&format!(" {i}"));
        }
        line.push_str(" 7 0 0");
        assert_eq!(processor_field(&line), Some(7));
        assert_eq!(processor_field("1 (x) S 2"), None);
    }

    #[test]
    fn a_pinned_thread_reads_the_cpu_it_is_pinned_to() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let want = cpus - 1;
        let got = std::thread::spawn(move || {
            let mut set = nix::sched::CpuSet::new();
            set.set(want).unwrap();
            nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).unwrap();
            std::thread::yield_now();
            current_cpu()
        })
        .join()
        .unwrap();
        assert_eq!(got, Some(want as u32));
    }
}
