//! Placement: where a scenario's roles run. A placement opens what the workload's wiring
//! asks for, runs every role of one measured run, and brings back each role's own report
//! ([`Roles`]); it never computes figures. Threads of this process are the first
//! placement; a child process and a remote host are the next ones, behind the same trait.

pub mod data_port;
pub mod remote;
pub mod split;
pub mod threads;
pub mod trust;

pub use remote::Remote;
pub use threads::Threads;

use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::anyhow;

use crate::scenario::Scenario;
use crate::scenario::Stop;
use crate::vocab::Role;
use crate::workload::{Roles, Side, SideReport, Workload};

/// Why a run did not produce role reports.
pub enum RunError {
    /// Ctrl-C (or SIGTERM) came first.
    Interrupted,
    /// Something failed, with the reason.
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for RunError {
    fn from(e: anyhow::Error) -> Self {
        RunError::Failed(e)
    }
}

/// The failure a run reports when its roles fail: the cause, not what it did to the
/// others. Roles fail in a chain (a sink that finds a wrong byte stops, and the source's
/// next connection is refused), and the cause does not always report first; a failure
/// that is only a peer gone (refused, reset, aborted, a broken pipe, an early end) gives
/// way to a later one that is anything else.
#[derive(Default)]
pub struct FirstCause {
    failure: Option<(std::time::Instant, anyhow::Error, bool)>,
}

impl FirstCause {
    /// A role failed with `e` (`what` says which): kept if it is the first, or the
    /// first that is not only a peer gone after failures that were.
    pub fn record(&mut self, e: std::io::Error, what: impl FnOnce() -> String) {
        let symptom = crate::transport::peer_gone(&e);
        match &self.failure {
            Some((_, _, false)) => {}
            Some((_, _, true)) if symptom => {}
            Some((at, _, true)) => {
                let at = *at;
                self.failure = Some((at, anyhow!(e).context(what()), false));
            }
            None => {
                self.failure = Some((
                    std::time::Instant::now(),
                    anyhow!(e).context(what()),
                    symptom,
                ));
            }
        }
    }

    /// When the first failure came, if one did.
    pub fn since(&self) -> Option<std::time::Instant> {
        self.failure.as_ref().map(|(at, _, _)| *at)
    }

    /// The failure to report, if any.
    pub fn take(&mut self) -> Option<anyhow::Error> {
        self.failure.take().map(|(_, e, _)| e)
    }
}

/// Runs the roles of one measured run of a scenario somewhere.
pub trait Placement {
    /// Its name in reports (`threads`).
    fn name(&self) -> &'static str;

    /// One run of `sc` that stops at `stop`: open the connections, start every role at
    /// once, wait for their reports.
    ///
    /// # Errors
    /// [`RunError::Interrupted`] on Ctrl-C before the run finished, otherwise
    /// [`RunError::Failed`] with what went wrong.
    fn run(&self, sc: &Scenario, stop: Stop) -> Result<Roles, RunError>;
}

impl<P: Placement + ?Sized> Placement for Arc<P> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn run(&self, sc: &Scenario, stop: Stop) -> Result<Roles, RunError> {
        (**self).run(sc, stop)
    }
}

/// Start one role of stream `i` on its own thread (pinned to `cpu` if given); its report
/// goes to `tx`. A role that fails before its start still arrives at the line, so no
/// other role waits for it forever.
///
/// # Errors
/// The system cannot start another thread.
pub fn spawn_role(
    role: Role,
    i: usize,
    side: Side,
    workload: Arc<dyn Workload>,
    cpu: Option<usize>,
    tx: Sender<(Role, std::io::Result<SideReport>)>,
) -> anyhow::Result<JoinHandle<()>> {
    let name = format!(
        "sb-{}-{i}",
        if role == Role::Sender { "send" } else { "recv" }
    );
    let line = side.start.clone();
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            let r = match (cpu.map(pin).transpose(), role) {
                (Err(e), _) => Err(e),
                (Ok(_), Role::Sender) => workload.sender(side),
                (Ok(_), Role::Receiver) if crate::testhooks::fault("receiver-dies") => {
                    // Gone without a word: the sender must find out by itself.
                    side.start.wait();
                    drop(side);
                    Ok(SideReport::default())
                }
                (Ok(_), Role::Receiver) => workload.receiver(side),
            };
            line.stand_in();
            let _ = tx.send((role, r));
        })
        .map_err(|e| {
            anyhow!(e).context(
                "cannot start a thread: the system is out of threads or memory (see `ulimit -u`)",
            )
        })
}

/// Pin the calling thread to `cpu`.
fn pin(cpu: usize) -> std::io::Result<()> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu)?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .map_err(|e| std::io::Error::other(format!("cannot pin a thread to CPU {cpu}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error, ErrorKind};

    #[test]
    fn the_cause_is_reported_not_the_peer_it_left_behind() {
        // The source's next connection refused, then the sink's wrong byte: the byte.
        let mut f = FirstCause::default();
        f.record(Error::from(ErrorKind::ConnectionRefused), || {
            "tcp sender failed".into()
        });
        let first = f.since().unwrap();
        f.record(Error::other("a wrong byte at offset 5000"), || {
            "tcp receiver failed".into()
        });
        assert_eq!(
            f.since(),
            Some(first),
            "the clock runs from the first failure"
        );
        f.record(Error::other("later"), || "tcp sender failed".into());
        let e = format!("{:#}", f.take().unwrap());
        assert_eq!(e, "tcp receiver failed: a wrong byte at offset 5000");
        // Two peers gone: the first. A cause first: it stays.
        let mut f = FirstCause::default();
        f.record(Error::from(ErrorKind::BrokenPipe), || "a".into());
        f.record(Error::from(ErrorKind::ConnectionReset), || "b".into());
        assert!(format!("{:#}", f.take().unwrap()).starts_with("a: "));
        let mut f = FirstCause::default();
        f.record(Error::other("disk"), || "a".into());
        f.record(Error::other("other"), || "b".into());
        assert!(format!("{:#}", f.take().unwrap()).starts_with("a: "));
        assert!(FirstCause::default().take().is_none());
    }
}

#[cfg(test)]
mod relay_tests;
