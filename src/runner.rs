//! Runs a plan: per scenario, per run, warm up on a throwaway connection, then a measured
//! run, both through the placement; turn what the roles reported into figures and
//! diagnoses; export after every scenario.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::interrupt;
use crate::measure::figures::figures;
use crate::measure::live::{self, Live, Sampler, Totals, Watch};
use crate::measure::units::format_bytes;
use crate::placement::{Placement, Remote, RunError, Threads};
use crate::plan::{Plan, Scenario, Where};
use crate::report::progress::Progress;
use crate::report::{ExportManager, Interval, Report, RunFigures, ScenarioResult, Warning};
use crate::transport::TransportKind;
use crate::workload::Role;
use crate::workload::{Stop, WorkloadKind};

/// Runs a plan and fills a report.
pub struct Runner<'a> {
    plan: &'a Plan,
    exports: &'a ExportManager,
    placement: Box<dyn Placement>,
    /// The same placement when it is another process (its host's environment).
    remote: Option<std::sync::Arc<Remote>>,
}

impl<'a> Runner<'a> {
    /// A runner for `plan` that writes `exports` after every scenario; the roles run as
    /// threads of this process.
    pub fn new(plan: &'a Plan, exports: &'a ExportManager) -> Runner<'a> {
        let role = |reverse: bool| {
            if reverse {
                Role::Sender
            } else {
                Role::Receiver
            }
        };
        let remote = match &plan.placement {
            Where::Threads => None,
            Where::Processes { reverse, bidir } => {
                Some(Remote::child(plan.path.clone(), role(*reverse)).both_ways(*bidir))
            }
            Where::Server {
                target,
                key,
                reverse,
                bidir,
            } => Some(
                Remote::server(
                    target.clone(),
                    key.clone(),
                    role(*reverse),
                    plan.path.clone(),
                )
                .both_ways(*bidir),
            ),
        }
        .map(std::sync::Arc::new);
        let placement: Box<dyn Placement> = match &remote {
            Some(r) => Box::new(std::sync::Arc::clone(r)),
            None => Box::new(Threads::new(plan.path.clone())),
        };
        Runner {
            plan,
            exports,
            placement,
            remote,
        }
    }

    /// Run every scenario, appending results to `report`. Stops early on Ctrl-C (the
    /// report then says `interrupted`). A failed scenario is recorded and the rest go on.
    ///
    /// # Errors
    /// None today: failures are the scenarios' own; the signature leaves room for
    /// failures outside any scenario.
    pub fn run(&mut self, report: &mut Report) -> anyhow::Result<()> {
        if self
            .plan
            .scenarios
            .iter()
            .any(|s| matches!(s.transport, TransportKind::Mq | TransportKind::Shm))
        {
            for note in crate::transport::remove_stale_ipc() {
                eprintln!("sockbench: note: {note}");
                report.warnings.push(note);
            }
        }
        if self.plan.scenarios.iter().any(|s| s.transport.uses_path()) {
            // What a killed sockbench left where this run makes its names.
            let dir = self
                .plan
                .path
                .clone()
                .unwrap_or_else(crate::plan::default_dir_base);
            for note in crate::transport::remove_stale(&dir) {
                eprintln!("sockbench: note: {note}");
                report.warnings.push(note);
            }
        }
        let progress = Progress::new(self.plan.scenarios.len() as u64, self.plan.output.quiet);
        let mut eta = Eta::new(&self.plan.scenarios);
        for (i, sc) in self.plan.scenarios.iter().enumerate() {
            progress.set_message(format!(
                "{} {} {}",
                sc.workload,
                sc.transport,
                format_bytes(sc.size)
            ));
            progress.set_eta(eta.left());
            match self.scenario(sc, &progress, &mut |actual| {
                eta.run_done(i, actual);
                progress.set_eta(eta.left());
            }) {
                Some(result) => report.results.push(result),
                None => {
                    report.interrupted = true;
                    break;
                }
            }
            eta.scenario_done(i);
            progress.inc();
            self.exports.after_scenario(report);
            if interrupt::requested() {
                report.interrupted = true;
                break;
            }
        }
        progress.finish();
        report.placement.name = self.placement.name().to_string();
        if let Some(r) = &self.remote {
            report.placement.other_role = Some(r.other_role());
            report.placement.bidir = r.bidir();
            report.placement.server = r.target().map(str::to_string);
            if r.target().is_some() {
                report.placement.server_environment = r.peer_environment();
            }
        }
        Ok(())
    }

    /// All runs of a scenario; `None` if Ctrl-C came before any finished (after some, a
    /// result with the finished runs and a warning). A failure is a result whose `error`
    /// says why.
    fn scenario(
        &self,
        sc: &Scenario,
        progress: &Progress,
        run_done: &mut dyn FnMut(Duration),
    ) -> Option<ScenarioResult> {
        let mut raws = Vec::new();
        let mut intervals = Vec::new();
        let mut error = None;
        let mut interrupted = false;
        for run in 1..=sc.runs {
            let began = Instant::now();
            let outcome = (|| {
                if !sc.warmup.is_zero() {
                    self.placement.run(sc, Stop::Duration(sc.warmup))?;
                }
                self.measured(sc, run, progress)
            })();
            run_done(began.elapsed());
            match outcome {
                Ok((raw, sampled)) => {
                    if let Some(watch) = self.watch(sc) {
                        // Close this run's intervals now, so its last line comes before
                        // the next run's first.
                        let figures = crate::measure::figures::run_figures(sc, &raw);
                        intervals
                            .push(close_intervals(sc, watch, run, sampled, &figures, progress));
                    }
                    raws.push(raw);
                }
                Err(RunError::Interrupted) if raws.is_empty() => return None,
                Err(RunError::Interrupted) => {
                    interrupted = true;
                    break;
                }
                Err(RunError::Failed(e)) => {
                    error = Some(format!("{e:#}"));
                    break;
                }
            }
        }
        let mut result = figures(sc, &raws);
        for (run, closed) in result.runs.iter_mut().zip(intervals) {
            run.intervals = closed;
        }
        result.error = error.or_else(|| crate::diagnose::disagreement(sc, &result));
        if interrupted {
            result.warnings.push(Warning {
                kind: "interrupted".into(),
                message: format!("interrupted after {} of {} runs", raws.len(), sc.runs),
            });
        }
        Some(result)
    }

    /// One measured run; with `--interval`, sampled as it goes (the intervals closed so
    /// far, each with the totals at its end).
    fn measured(
        &self,
        sc: &Scenario,
        run: u32,
        progress: &Progress,
    ) -> Result<(crate::workload::Roles, Sampled), RunError> {
        let (Some(every), Some(watch)) = (self.plan.interval, self.watch(sc)) else {
            return Ok((self.placement.run(sc, sc.stop)?, Sampled::default()));
        };
        let live = Live::new();
        let mut with_live = sc.clone();
        with_live.live = Some(Arc::clone(&live));
        let until = match sc.stop {
            Stop::Duration(d) => Some(d),
            _ => None,
        };
        let label = interval_label(sc);
        let out = progress.clone();
        let sampler = Sampler::start(live, every, until, watch, move |i| {
            out.println(&live::format_line(&label, run, i));
        })
        .map_err(|e| {
            RunError::Failed(anyhow::anyhow!(e).context("cannot start the interval sampler"))
        })?;
        let roles = self.placement.run(&with_live, sc.stop);
        let sampled = sampler.finish();
        let retransmits = with_live.live.as_ref().and_then(|l| l.totals().retransmits);
        Ok((
            roles?,
            Sampled {
                sampled,
                retransmits,
            },
        ))
    }

    /// Whose counts `--interval` follows in `sc`: the receivers when they run here, else
    /// the senders; pingpong's clients; connect's dialers. None without `--interval`.
    fn watch(&self, sc: &Scenario) -> Option<Watch> {
        self.plan.interval?;
        let receiver_here = self
            .remote
            .as_ref()
            .map_or(true, |r| r.bidir() || r.other_role() == Role::Sender);
        Some(match sc.workload {
            WorkloadKind::Pingpong => Watch::Client,
            WorkloadKind::Connect => Watch::Sender,
            WorkloadKind::Stream | WorkloadKind::Rate if receiver_here => Watch::Receiver {
                loss: !sc.transport.reliable() && self.remote.is_none(),
            },
            WorkloadKind::Stream | WorkloadKind::Rate => Watch::Sender,
        })
    }
}

/// A run's intervals: the sampled ones and a last one closed with the run's own counts,
/// which it prints.
fn close_intervals(
    sc: &Scenario,
    watch: Watch,
    run: u32,
    sampled: Sampled,
    figures: &RunFigures,
    progress: &Progress,
) -> Vec<Interval> {
    let shown = sampled.sampled.len();
    let mut last = final_totals(watch, figures);
    last.retransmits = sampled.retransmits;
    let end = figures.duration_seconds;
    let intervals = live::close(watch, sampled.sampled, end, last);
    let label = interval_label(sc);
    for i in intervals.iter().skip(shown.min(intervals.len() - 1)) {
        progress.println(&live::format_line(&label, run, i));
    }
    intervals
}

/// What the sampler of a run saw.
#[derive(Default)]
struct Sampled {
    /// The intervals it closed, each with the totals at its end.
    sampled: Vec<(Interval, Totals)>,
    /// The senders' TCP retransmissions at their end.
    retransmits: Option<u64>,
}

/// The scenario as interval lines name it: `stream tcp 64 KiB`.
fn interval_label(sc: &Scenario) -> String {
    format!("{} {} {}", sc.workload, sc.transport, format_bytes(sc.size))
}

/// A run's final counts as the intervals read them.
fn final_totals(watch: Watch, f: &RunFigures) -> Totals {
    let (bytes_sent, messages_sent) = match watch {
        // pingpong's client counts completed round trips, which the figures call received.
        Watch::Client => (f.bytes_received, f.messages_received),
        _ => (f.bytes_sent, f.messages_sent),
    };
    Totals {
        bytes_sent,
        messages_sent,
        bytes_received: f.bytes_received,
        messages_received: f.messages_received,
        retransmits: None,
    }
}

/// The time the rest of a plan should take: each run's planned time (warm-up plus the
/// duration of a timed run; for a run of a count, what such runs have taken so far, or a
/// second before any has finished), scaled by how long the finished runs took against
/// their plan (set-up, teardown and a slow machine included).
#[derive(Debug)]
struct Eta {
    /// Per scenario: its runs still to come, and the planned seconds of one (None: not
    /// timed).
    left: Vec<(u32, Option<f64>)>,
    planned_done: f64,
    actual_timed: f64,
    actual_untimed: f64,
    untimed_done: u32,
}

impl Eta {
    fn new(scenarios: &[Scenario]) -> Eta {
        Eta {
            left: scenarios
                .iter()
                .map(|sc| {
                    let planned = match sc.stop {
                        Stop::Duration(d) => Some((d + sc.warmup).as_secs_f64()),
                        _ => None,
                    };
                    (sc.runs, planned)
                })
                .collect(),
            planned_done: 0.0,
            actual_timed: 0.0,
            actual_untimed: 0.0,
            untimed_done: 0,
        }
    }

    /// A run of scenario `i` took `actual`; earlier scenarios have nothing left (a
    /// scenario that failed or was cut short skips its other runs).
    fn run_done(&mut self, i: usize, actual: Duration) {
        for earlier in self.left.iter_mut().take(i) {
            earlier.0 = 0;
        }
        let Some((runs, planned)) = self.left.get_mut(i) else {
            return;
        };
        *runs = runs.saturating_sub(1);
        match planned {
            Some(p) => {
                self.planned_done += *p;
                self.actual_timed += actual.as_secs_f64();
            }
            None => {
                self.actual_untimed += actual.as_secs_f64();
                self.untimed_done += 1;
            }
        }
    }

    /// Scenario `i` has ended: whatever runs it had left will not run.
    fn scenario_done(&mut self, i: usize) {
        if let Some(s) = self.left.get_mut(i) {
            s.0 = 0;
        }
    }

    /// The estimate now.
    fn left(&self) -> Duration {
        let speed = if self.planned_done > 0.0 {
            self.actual_timed / self.planned_done
        } else {
            1.0
        };
        let untimed = if self.untimed_done > 0 {
            self.actual_untimed / f64::from(self.untimed_done)
        } else {
            1.0
        };
        let secs: f64 = self
            .left
            .iter()
            .map(|&(runs, planned)| f64::from(runs) * planned.map_or(untimed, |p| p * speed))
            .sum();
        Duration::from_secs_f64(secs.max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::first_scenario;

    fn secs(d: Duration) -> f64 {
        (d.as_secs_f64() * 1000.0).round() / 1000.0
    }

    #[test]
    fn the_eta_is_the_planned_time_left_scaled_by_how_long_runs_really_took() {
        let timed = first_scenario(&["stream", "-d", "1", "-w", "0.25", "--runs", "2"]);
        let counted = first_scenario(&["stream", "-n", "1000", "-w", "0"]);
        let plan = [timed.clone(), timed, counted];
        let mut eta = Eta::new(&plan);
        // 2 x 1.25 + 2 x 1.25 + one counted run, a second until one has been seen.
        assert_eq!(secs(eta.left()), 6.0);
        // The first run took twice its plan: the timed runs left take twice theirs.
        eta.run_done(0, Duration::from_millis(2500));
        assert_eq!(secs(eta.left()), 1.25 * 2.0 + 2.0 * 1.25 * 2.0 + 1.0);
        // The first scenario failed after one run: its other run is not coming.
        eta.scenario_done(0);
        assert_eq!(secs(eta.left()), 2.0 * 1.25 * 2.0 + 1.0);
        eta.run_done(1, Duration::from_millis(1250));
        eta.run_done(1, Duration::from_millis(1250));
        // 5 s for 3.75 s planned so far.
        assert_eq!(secs(eta.left()), 1.0);
        eta.run_done(2, Duration::from_millis(300));
        assert_eq!(eta.left(), Duration::ZERO);
        // A later scenario's run ends the earlier ones' remaining runs too.
        let mut eta = Eta::new(&plan);
        eta.run_done(2, Duration::from_millis(700));
        assert_eq!(eta.left(), Duration::ZERO);
    }

    #[test]
    fn counted_runs_are_estimated_from_the_counted_runs_already_done() {
        let counted = first_scenario(&["pingpong", "-n", "100", "--runs", "3"]);
        let mut eta = Eta::new(&[counted]);
        assert_eq!(secs(eta.left()), 3.0);
        eta.run_done(0, Duration::from_millis(400));
        assert_eq!(secs(eta.left()), 0.8);
    }

    #[test]
    fn intervals_follow_the_side_that_counts_what_the_workload_reports() {
        let totals = |watch| {
            let mut f = crate::report::sample::stream().results[0].runs[0].clone();
            // Sent and received differ (as with loss), so the test tells them apart.
            (f.bytes_sent, f.messages_sent) = (f.bytes_received + 111, f.messages_received + 1);
            (final_totals(watch, &f), f)
        };
        let (t, f) = totals(Watch::Client);
        assert_eq!(
            (t.bytes_sent, t.messages_sent),
            (f.bytes_received, f.messages_received)
        );
        let (t, f) = totals(Watch::Sender);
        assert_eq!(
            (t.bytes_sent, t.messages_sent),
            (f.bytes_sent, f.messages_sent)
        );
        assert_eq!(
            (t.bytes_received, t.messages_received),
            (f.bytes_received, f.messages_received)
        );
        assert_eq!(t.retransmits, None);
        let sc = first_scenario(&["rate", "-t", "udp", "-s", "4K"]);
        assert_eq!(interval_label(&sc), "rate udp 4 KiB");
    }
}
