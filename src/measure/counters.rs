//! `--counters`: a role thread's hardware counters (cycles, instructions, cache misses)
//! and software counters (task clock, context switches, CPU migrations, page faults) over
//! its measured interval, from `perf_event_open` (`sys::perf`).
//!
//! The groups are opened before the start line (opening costs tens of microseconds),
//! read once when the interval starts and once when it ends; the report holds the
//! differences. An event the kernel refuses leaves its figures null, with the reason;
//! the run goes on.

use serde::{Deserialize, Serialize};

use crate::sys::perf::{self, Group, Reading};

/// What a role's counters counted over its interval; null where they could not count.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// CPU cycles.
    pub cycles: Option<u64>,
    /// Instructions retired.
    pub instructions: Option<u64>,
    /// Cache misses (the last level, as the PMU defines it).
    pub cache_misses: Option<u64>,
    /// Why the hardware counters are missing.
    pub hardware_unavailable: Option<String>,
    /// The hardware counters count user space only (`perf_event_paranoid` >= 2).
    pub user_space_only: bool,
    /// Task clock: CPU time of the thread, ns.
    pub task_clock_ns: Option<u64>,
    /// Context switches.
    pub context_switches: Option<u64>,
    /// CPU migrations.
    pub cpu_migrations: Option<u64>,
    /// Page faults.
    pub page_faults: Option<u64>,
    /// Why the software counters are missing.
    pub software_unavailable: Option<String>,
}

const HARDWARE: [(u32, u64); 3] = [
    (perf::TYPE_HARDWARE, perf::HW_CYCLES),
    (perf::TYPE_HARDWARE, perf::HW_INSTRUCTIONS),
    (perf::TYPE_HARDWARE, perf::HW_CACHE_MISSES),
];
const SOFTWARE: [(u32, u64); 4] = [
    (perf::TYPE_SOFTWARE, perf::SW_TASK_CLOCK),
    (perf::TYPE_SOFTWARE, perf::SW_CONTEXT_SWITCHES),
    (perf::TYPE_SOFTWARE, perf::SW_CPU_MIGRATIONS),
    (perf::TYPE_SOFTWARE, perf::SW_PAGE_FAULTS),
];

/// A role's perf counters in the report: per message, null where not counted (never a
/// zero for a counter that could not count).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CounterFigures {
    /// CPU cycles per message.
    pub cycles_per_message: Option<f64>,
    /// Instructions per message.
    pub instructions_per_message: Option<f64>,
    /// Cache misses per message.
    pub cache_misses_per_message: Option<f64>,
    /// Instructions per cycle.
    pub instructions_per_cycle: Option<f64>,
    /// Why the hardware counters are null, if they are.
    pub hardware_unavailable: Option<String>,
    /// The hardware counters counted user space only (`perf_event_paranoid` >= 2).
    pub user_space_only: bool,
    /// The threads' task clock (CPU time) over their intervals, from perf.
    pub task_clock_seconds: Option<f64>,
    /// Context switches (perf's software counter).
    pub context_switches: Option<u64>,
    /// CPU migrations (perf's software counter).
    pub cpu_migrations: Option<u64>,
    /// Page faults.
    pub page_faults: Option<u64>,
    /// Why the software counters are null, if they are.
    pub software_unavailable: Option<String>,
}

/// A role's counter figures over its streams' counts (null without `--counters`).
pub fn side(counts: &[Option<&Counts>], messages: u64) -> Option<CounterFigures> {
    let counts: Vec<&Counts> = counts.iter().copied().collect::<Option<Vec<_>>>()?;
    if counts.is_empty() {
        return None;
    }
    let sum = |f: fn(&Counts) -> Option<u64>| counts.iter().map(|c| f(c)).sum::<Option<u64>>();
    let per = |n: Option<u64>| {
        n.filter(|_| messages > 0)
            .map(|n| n as f64 / messages as f64)
    };
    let reason = |f: fn(&Counts) -> &Option<String>| counts.iter().find_map(|c| f(c).clone());
    let (cycles, instructions) = (sum(|c| c.cycles), sum(|c| c.instructions));
    Some(CounterFigures {
        cycles_per_message: per(cycles),
        instructions_per_message: per(instructions),
        cache_misses_per_message: per(sum(|c| c.cache_misses)),
        instructions_per_cycle: instructions
            .zip(cycles.filter(|&c| c > 0))
            .map(|(i, c)| i as f64 / c as f64),
        hardware_unavailable: reason(|c| &c.hardware_unavailable),
        user_space_only: counts.iter().any(|c| c.user_space_only),
        task_clock_seconds: sum(|c| c.task_clock_ns).map(|ns| ns as f64 / 1e9),
        context_switches: sum(|c| c.context_switches),
        cpu_migrations: sum(|c| c.cpu_migrations),
        page_faults: sum(|c| c.page_faults),
        software_unavailable: reason(|c| &c.software_unavailable),
    })
}

/// `kernel.perf_event_paranoid`, if readable.
pub fn paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Why the kernel refused a counter, in words that say what to do.
pub fn reason(e: &std::io::Error, kind: &str, paranoid: Option<i32>) -> String {
    use nix::libc::{EACCES, ENODEV, ENOENT, ENOSYS, EOPNOTSUPP, EPERM};
    let code = e.raw_os_error();
    let name = match code {
        Some(ENOENT) => "ENOENT",
        Some(EACCES) => "EACCES",
        Some(EPERM) => "EPERM",
        Some(ENODEV) => "ENODEV",
        Some(EOPNOTSUPP) => "EOPNOTSUPP",
        Some(ENOSYS) => "ENOSYS",
        _ => "",
    };
    match code {
        Some(ENOENT | ENODEV | EOPNOTSUPP) => format!(
            "{kind} counters unavailable: the hypervisor exposes no PMU ({name}; \
             /sys/bus/event_source/devices has no cpu)"
        ),
        Some(EACCES | EPERM) => format!(
            "{kind} counters unavailable: kernel.perf_event_paranoid is {} and forbids them to this user \
             ({name}); set `sysctl -w kernel.perf_event_paranoid=2` to count user space, 1 or lower to count \
             the kernel too, or give CAP_PERFMON",
            paranoid.map_or_else(|| "unknown".to_string(), |p| p.to_string())
        ),
        Some(ENOSYS) => format!("{kind} counters unavailable: this kernel has no perf_event_open (ENOSYS)"),
        _ => format!("{kind} counters unavailable: {e}"),
    }
}

/// The counters of the calling thread, open.
#[derive(Debug)]
pub struct Counters {
    hardware: Result<Group, String>,
    software: Result<Group, String>,
    user_only: bool,
    software_user_only: bool,
    at_start: (Option<Reading>, Option<Reading>),
}

impl Counters {
    /// Open both groups for the calling thread, counting the kernel too where this user
    /// may (root, CAP_PERFMON, `perf_event_paranoid` <= 1) and user space only where the
    /// kernel refuses that (paranoid 2). Software events that happen in the kernel
    /// (context switches, migrations) are unknown when the kernel is excluded.
    pub fn open() -> Counters {
        let p = paranoid();
        let refused = |e: &std::io::Error| {
            matches!(e.raw_os_error(), Some(nix::libc::EACCES | nix::libc::EPERM))
        };
        let open = |events: &[(u32, u64)]| match Group::open(events, false) {
            Err(e) if refused(&e) => Group::open(events, true).map(|g| (g, true)),
            other => other.map(|g| (g, false)),
        };
        let (hardware, user_only) = match open(&HARDWARE) {
            Ok((g, u)) => (Ok(g), u),
            Err(e) => (Err(reason(&e, "hardware", p)), false),
        };
        let (software, software_user_only) = match open(&SOFTWARE) {
            Ok((g, u)) => (Ok(g), u),
            Err(e) => (Err(reason(&e, "software", p)), false),
        };
        Counters {
            hardware,
            software,
            user_only,
            software_user_only,
            at_start: (None, None),
        }
    }

    fn read(&self) -> (Option<Reading>, Option<Reading>) {
        (
            self.hardware.as_ref().ok().and_then(|g| g.read().ok()),
            self.software.as_ref().ok().and_then(|g| g.read().ok()),
        )
    }

    /// The interval starts now.
    pub fn start(&mut self) {
        self.at_start = self.read();
    }

    /// The interval ends now: what was counted since [`Counters::start`].
    pub fn stop(&self) -> Counts {
        let now = self.read();
        let hw = delta(self.at_start.0.as_ref(), now.0.as_ref());
        let sw = delta(self.at_start.1.as_ref(), now.1.as_ref());
        let at = |v: &Option<Vec<u64>>, i: usize| v.as_ref().and_then(|v| v.get(i).copied());
        Counts {
            cycles: at(&hw, 0),
            instructions: at(&hw, 1),
            cache_misses: at(&hw, 2),
            hardware_unavailable: self.hardware.as_ref().err().cloned(),
            user_space_only: self.user_only && self.hardware.is_ok(),
            task_clock_ns: at(&sw, 0),
            context_switches: at(&sw, 1).filter(|_| !self.software_user_only),
            cpu_migrations: at(&sw, 2).filter(|_| !self.software_user_only),
            page_faults: at(&sw, 3),
            software_unavailable: self.software.as_ref().err().cloned(),
        }
    }
}

/// The counts between two readings, scaled by enabled/running time when the group was
/// multiplexed; None if either reading is missing or the group never ran in between.
pub fn delta(a: Option<&Reading>, b: Option<&Reading>) -> Option<Vec<u64>> {
    let (a, b) = (a?, b?);
    let enabled = b.enabled_ns.saturating_sub(a.enabled_ns);
    let running = b.running_ns.saturating_sub(a.running_ns);
    if running == 0 {
        return None;
    }
    Some(
        a.values
            .iter()
            .zip(&b.values)
            .map(|(x, y)| {
                let d = y.saturating_sub(*x);
                if running < enabled {
                    (d as f64 * enabled as f64 / running as f64).round() as u64
                } else {
                    d
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(enabled: u64, running: u64, values: &[u64]) -> Reading {
        Reading {
            enabled_ns: enabled,
            running_ns: running,
            values: values.to_vec(),
        }
    }

    #[test]
    fn counts_are_differences_scaled_up_when_multiplexed() {
        let a = reading(100, 100, &[10, 20]);
        assert_eq!(
            delta(Some(&a), Some(&reading(200, 200, &[15, 40]))),
            Some(vec![5, 20])
        );
        // On the PMU half of the time: twice what was counted.
        assert_eq!(
            delta(Some(&a), Some(&reading(300, 200, &[15, 40]))),
            Some(vec![10, 40])
        );
        assert_eq!(
            delta(Some(&a), Some(&reading(300, 100, &[10, 20]))),
            None,
            "never ran"
        );
        assert_eq!(delta(None, Some(&a)), None);
    }

    #[test]
    fn each_refusal_says_why_and_what_to_do() {
        let e = |c| std::io::Error::from_raw_os_error(c);
        let r = reason(&e(nix::libc::ENOENT), "hardware", Some(2));
        assert!(
            r.starts_with("hardware counters unavailable: the hypervisor exposes no PMU (ENOENT"),
            "{r}"
        );
        let r = reason(&e(nix::libc::EACCES), "hardware", Some(3));
        assert!(r.contains("perf_event_paranoid is 3"), "{r}");
        assert!(r.contains("(EACCES)") && r.contains("sysctl -w"), "{r}");
        let r = reason(&e(nix::libc::EPERM), "software", None);
        assert!(r.contains("is unknown") && r.contains("(EPERM)"), "{r}");
    }

    #[test]
    fn the_software_counters_agree_with_the_threads_own_cpu_clock() {
        let mut c = Counters::open();
        if c.software.is_err() {
            return; // not allowed here: nothing to compare
        }
        c.start();
        let wall = std::time::Instant::now();
        let t0 = crate::measure::cpu::ThreadCpu::now();
        let mut x = 0u64;
        while crate::measure::cpu::ThreadCpu::now().since(&t0).exact
            < std::time::Duration::from_millis(50)
        {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let cpu = crate::measure::cpu::ThreadCpu::now()
            .since(&t0)
            .exact
            .as_nanos() as f64;
        let n = c.stop();
        let wall = wall.elapsed().as_nanos() as f64;
        let task = n.task_clock_ns.expect("task clock") as f64;
        // The two clocks differ by design on a VM: the thread's CPU clock leaves out the
        // time the hypervisor stole, perf's task clock counts it (20% more was seen with a
        // busy loop on every CPU). So the task clock covers the thread's CPU time and never
        // exceeds the wall time it was counted over.
        assert!(
            task >= cpu * 0.95 && task <= wall * 1.01,
            "task clock {task} vs thread CPU {cpu} and wall {wall}"
        );
        assert!(n.software_unavailable.is_none());
        // Hardware: counted, or null with the reason; never zero for lack of a PMU.
        match n.hardware_unavailable {
            Some(r) => assert!(n.cycles.is_none() && r.contains("unavailable"), "{r}"),
            None => assert!(n.cycles.is_some_and(|c| c > 0)),
        }
    }
}
