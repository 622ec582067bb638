//! What the io-uring engine used on one end, for the report: which of the ring's features
//! (registered buffers, multishot receive, a polling kernel thread) did work, how many
//! submissions it made, and the CPU time of its kernel thread. Plain data, built in any
//! build (a report from an io-uring build can be read by one without it).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The io-uring engine's features as used by one role (summed over its streams).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UringUse {
    /// Submissions: batches of operations handed to the kernel (each one io_uring_enter,
    /// unless a kernel thread polls the queue).
    pub submissions: u64,
    /// Operations on a registered buffer (WRITE_FIXED, READ_FIXED: pipes and FIFOs; a
    /// socket's SEND and RECV take none); 0: registered buffers were not used.
    pub fixed_operations: u64,
    /// Completions of multishot receives (IORING_RECV_MULTISHOT, or a multishot read on
    /// pipes); 0: no multishot receive ran.
    pub multishot_completions: u64,
    /// `--sqpoll`: the ring's submission queue was polled by a kernel thread.
    pub sqpoll: bool,
    /// `--sqpoll`: CPU time of that kernel thread (`iou-sqp-PID`, a task of this process)
    /// from the ring's setup (the role's first operation) to the end of the role's
    /// interval, read from /proc/self/task/TID/schedstat; it is counted in the role's CPU
    /// figures. Null without `--sqpoll`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sqpoll_cpu_ns: Option<u64>,
    /// Why a feature was not used (the kernel lacks it, refused a registration).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl UringUse {
    /// The sum over streams.
    pub fn plus(mut self, o: &UringUse) -> UringUse {
        self.submissions = self.submissions.saturating_add(o.submissions);
        self.fixed_operations = self.fixed_operations.saturating_add(o.fixed_operations);
        self.multishot_completions = self
            .multishot_completions
            .saturating_add(o.multishot_completions);
        self.sqpoll |= o.sqpoll;
        self.sqpoll_cpu_ns = match (self.sqpoll_cpu_ns, o.sqpoll_cpu_ns) {
            (Some(a), Some(b)) => Some(a.saturating_add(b)),
            (a, b) => a.or(b),
        };
        for n in &o.notes {
            if !self.notes.contains(n) {
                self.notes.push(n.clone());
            }
        }
        self
    }

    /// The total over reports (`None` if no end used a ring).
    pub fn total<'a>(of: impl IntoIterator<Item = &'a Option<UringUse>>) -> Option<UringUse> {
        of.into_iter()
            .flatten()
            .fold(None, |a: Option<UringUse>, u| {
                Some(a.map_or_else(|| u.clone(), |a| a.plus(u)))
            })
    }

    /// The kernel thread's CPU time.
    pub fn sqpoll_cpu(&self) -> Option<Duration> {
        self.sqpoll_cpu_ns.map(Duration::from_nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uses_add_up_over_streams_and_notes_are_not_repeated() {
        let u = |subs, cpu: Option<u64>| UringUse {
            submissions: subs,
            fixed_operations: subs + 1,
            multishot_completions: 1,
            sqpoll: cpu.is_some(),
            sqpoll_cpu_ns: cpu,
            notes: vec!["n".into()],
        };
        let t = UringUse::total(&[Some(u(3, Some(10))), None, Some(u(4, Some(5)))]).unwrap();
        assert_eq!(
            (t.submissions, t.fixed_operations, t.multishot_completions),
            (7, 9, 2)
        );
        assert_eq!(t.sqpoll_cpu(), Some(Duration::from_nanos(15)));
        assert_eq!(t.notes, ["n"]);
        assert_eq!(UringUse::total(&[None, None]), None);
        assert_eq!(
            UringUse::total(&[Some(u(1, None))]).unwrap().sqpoll_cpu_ns,
            None
        );
        // One stream polled by a kernel thread is enough to say the role's ring was.
        let mixed = UringUse::total(&[Some(u(1, Some(3))), Some(u(1, None))]).unwrap();
        assert!(mixed.sqpoll);
        assert_eq!(mixed.sqpoll_cpu_ns, Some(3));
    }
}
