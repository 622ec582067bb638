//! Runs a plan: per scenario, per run, warm up on a throwaway connection, then a measured
//! run, both through the placement; turn what the roles reported into figures and
//! diagnoses; export after every scenario.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::figures::figures;
use crate::interrupt;
use crate::measure::live::Interval;
use crate::measure::live::{self, Live, Sampler, Totals, Watch};
use crate::placement::{Placement, Remote, RunError, Threads};
use crate::plan::{Plan, Where};
use crate::report::progress::Progress;
use crate::report::{ExportManager, Report};
use crate::results::{ScenarioResult, Warning};
use crate::scenario::Scenario;
use crate::scenario::Stop;
use crate::transport::TransportKind;
use crate::vocab::units::format_bytes;
use crate::vocab::Role;

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
                .unwrap_or_else(crate::transport::default_dir_base);
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

    /// All runs of a scenario as figures; `None` if Ctrl-C came before any run measured
    /// anything (after some, a result with what they measured and a warning). A failure
    /// is a result whose `error` says why.
    fn scenario(
        &self,
        sc: &Scenario,
        progress: &Progress,
        run_done: &mut dyn FnMut(Duration),
    ) -> Option<ScenarioResult> {
        let Runs {
            raws,
            intervals,
            error,
            interrupted,
        } = self.runs(sc, progress, run_done)?;
        let mut result = figures(sc, &raws);
        for (run, closed) in result.runs.iter_mut().zip(intervals) {
            run.intervals = closed;
        }
        result.error = error.or_else(|| crate::diagnose::disagreement(sc, &result));
        if interrupted {
            result.warnings.push(Warning {
                kind: "interrupted".into(),
                message: interrupted_after(&raws, sc.runs),
            });
        }
        Some(result)
    }

    /// All runs of a scenario (each warmed up first, each with `--interval` sampled as it
    /// goes), as the roles reported them; `None` if Ctrl-C came before any run measured
    /// anything. A run cut short by Ctrl-C is kept (it is the last), as is every run
    /// before one that failed.
    pub fn runs(
        &self,
        sc: &Scenario,
        progress: &Progress,
        run_done: &mut dyn FnMut(Duration),
    ) -> Option<Runs> {
        let mut raws = Vec::new();
        let mut intervals = Vec::new();
        let mut error = None;
        let mut interrupted = false;
        for run in 1..=sc.runs {
            let began = Instant::now();
            let outcome = (|| {
                if !sc.warmup.is_zero() {
                    crate::testhooks::hold("warmup");
                    self.placement.run(sc, Stop::Duration(sc.warmup))?;
                }
                crate::testhooks::hold("run");
                if run > 1 && crate::testhooks::fault("later-run-fails") {
                    return Err(RunError::Failed(anyhow::anyhow!("test fault")));
                }
                self.measured(sc, run, progress)
            })();
            run_done(began.elapsed());
            match outcome {
                Ok((raw, sampled)) => {
                    if let Some(watch) = self.watch(sc) {
                        // Close this run's intervals now, so its last line comes before
                        // the next run's first.
                        let here = self.here(&raw);
                        intervals.push(close_intervals(sc, watch, run, sampled, here, progress));
                    }
                    // Ctrl-C cut it short: what it measured stands, and no run follows.
                    let cut = raw.interrupted();
                    raws.push(raw);
                    if cut {
                        interrupted = true;
                        break;
                    }
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
        Some(Runs {
            raws,
            intervals,
            error,
            interrupted,
        })
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
        let live = match self.local() {
            Local::Bidir => Live::without_retransmits(),
            Local::Both | Local::Only(_) => Live::new(),
        };
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

    /// Which roles run in this process: only theirs publish to the sampler.
    fn local(&self) -> Local {
        match &self.remote {
            None => Local::Both,
            Some(r) if r.bidir() => Local::Bidir,
            Some(r) => Local::Only(match r.other_role() {
                Role::Sender => Role::Receiver,
                Role::Receiver => Role::Sender,
            }),
        }
    }

    /// Whose counts `--interval` follows in `sc` (always roles of this process), as its
    /// workload prefers them ([`crate::workload::Spec::watched`]). None without
    /// `--interval`.
    fn watch(&self, sc: &Scenario) -> Option<Watch> {
        self.plan.interval?;
        let here = |role| match self.local() {
            Local::Both => true,
            // The local streams' receivers (those of the server-to-client direction).
            Local::Bidir => role == Role::Receiver,
            Local::Only(r) => r == role,
        };
        let [first, second] = crate::workload::spec(sc.workload).watched(sc);
        Some(if here(first.0) { first.1 } else { second.1 })
    }

    /// The roles of a run that ran in this process and may be watched: all of them, one
    /// kind, or with `--bidir` the server-to-client direction (whose receivers are here).
    fn here<'r>(&self, raw: &'r crate::workload::Roles) -> &'r crate::workload::Roles {
        match self.local() {
            Local::Bidir => raw
                .directions
                .iter()
                .find(|(name, _)| name == "server to client")
                .map_or(raw, |(_, r)| r),
            Local::Both | Local::Only(_) => raw,
        }
    }
}

/// What the runs of one scenario brought back ([`Runner::runs`]), before figures are made
/// of them.
#[derive(Debug, Default)]
pub struct Runs {
    /// Each run's role reports, in order; the last may be one Ctrl-C cut short.
    pub raws: Vec<crate::workload::Roles>,
    /// With `--interval`, each run's intervals (closed with its roles' own counts).
    pub intervals: Vec<Vec<Interval>>,
    /// Why the run after the last of `raws` failed, if one did.
    pub error: Option<String>,
    /// Ctrl-C ended the runs (the last of `raws` may be cut short).
    pub interrupted: bool,
}

/// The warning of a scenario whose `planned` runs Ctrl-C ended after those in `raws`
/// (the last of them possibly cut short).
pub fn interrupted_after(raws: &[crate::workload::Roles], planned: u32) -> String {
    let n = raws.len();
    match raws.last() {
        Some(last) if last.interrupted() => format!(
            "interrupted during run {n} of {planned}: its figures cover what it measured until Ctrl-C"
        ),
        _ => format!("interrupted after {n} of {planned} runs"),
    }
}

/// Which roles of a run are in this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Local {
    /// Both (threads).
    Both,
    /// Only this one (the other ran in a child process or on a server).
    Only(Role),
    /// `--bidir`: the senders of one direction and the receivers of the other.
    Bidir,
}

/// A run's intervals: the sampled ones and a last one closed with the run's own counts,
/// which it prints.
fn close_intervals(
    sc: &Scenario,
    watch: Watch,
    run: u32,
    sampled: Sampled,
    roles: &crate::workload::Roles,
    progress: &Progress,
) -> Vec<Interval> {
    let shown = sampled.sampled.len();
    let (mut last, end) = final_totals(sc, watch, roles);
    last.retransmits = sampled.retransmits;
    let intervals = live::close(watch, sampled.sampled, end, last);
    for line in closing_lines(&interval_label(sc), run, shown, &intervals) {
        progress.println(&line);
    }
    intervals
}

/// The lines still to print once a run's intervals are closed, `shown` of them having
/// been printed as they closed: the last one, which says so when it replaces a printed
/// interval that ended after the roles did.
fn closing_lines(label: &str, run: u32, shown: usize, intervals: &[Interval]) -> Vec<String> {
    let kept = intervals.len().saturating_sub(1);
    intervals
        .iter()
        .skip(shown.min(kept))
        .map(|i| {
            let mut line = live::format_line(label, run, i);
            if kept < shown {
                line.push_str("  (replaces the line before)");
            }
            line
        })
        .collect()
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

/// A run's final counts as the intervals read them, from the watched roles' own reports
/// (`roles`: those of this process), and the end of their interval in seconds from the
/// run's start.
fn final_totals(sc: &Scenario, watch: Watch, roles: &crate::workload::Roles) -> (Totals, f64) {
    use crate::workload::Roles;
    let sum = |of: &[crate::workload::SideReport]| {
        (Roles::sum(of, |s| s.bytes), Roles::sum(of, |s| s.messages))
    };
    let (bytes_sent, messages_sent) = match watch {
        // pingpong's client publishes round trips completed: requests less timeouts.
        Watch::Client => {
            let trips = Roles::sum(&roles.senders, |s| s.messages.saturating_sub(s.timeouts));
            (trips * sc.size, trips)
        }
        _ => sum(&roles.senders),
    };
    let (bytes_received, messages_received) = sum(&roles.receivers);
    // rate's loss where messages can be lost: what the receivers' sequence numbers say
    // was never received (duplicates make up for nothing), as the run's figures count it.
    let counted = crate::workload::spec(sc.workload).loss_by_sequence(sc);
    let lost = (watch == Watch::Receiver && counted).then(|| {
        let sent = Roles::sum(&roles.senders, |s| s.messages);
        let distinct: u64 = (roles.receivers.iter())
            .map(|r| {
                let dup = r.sequence.map_or(0, |q| q.duplicated);
                r.messages.saturating_sub(dup)
            })
            .sum();
        sent.saturating_sub(distinct)
    });
    let totals = Totals {
        bytes_sent,
        messages_sent,
        bytes_received,
        messages_received,
        lost,
        retransmits: None,
    };
    let role = match watch {
        Watch::Receiver => Role::Receiver,
        Watch::Sender | Watch::Client => Role::Sender,
    };
    (totals, roles.interval(role))
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
    fn closing_prints_only_the_last_interval_and_says_when_it_replaces_one() {
        let iv = |from: f64, to: f64| Interval {
            start_seconds: from,
            end_seconds: to,
            side: "receiver".into(),
            bytes: 1,
            messages: 1,
            bits_per_second: 8.0,
            messages_per_second: 1.0,
            messages_lost: None,
            retransmits: None,
        };
        let three = [iv(0.0, 0.5), iv(0.5, 1.0), iv(1.0, 1.2)];
        // Two printed as they closed: the third is new.
        let lines = closing_lines("stream tcp 64 KiB", 1, 2, &three);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].contains("1.00-1.20") && !lines[0].contains("replaces"),
            "{lines:?}"
        );
        // Three printed, the third closed after the roles ended and was folded back: the
        // last line replaces it.
        let two = [iv(0.0, 0.5), iv(0.5, 0.9)];
        let lines = closing_lines("stream tcp 64 KiB", 1, 2, &two);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains("0.50-0.90") && lines[0].ends_with("(replaces the line before)"));
        // Nothing sampled: the run's one interval.
        let lines = closing_lines("x", 3, 0, &[iv(0.0, 0.4)]);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].starts_with("x run 3 ") && !lines[0].contains("replaces"));
        assert!(closing_lines("x", 1, 0, &[]).is_empty());
    }

    #[test]
    fn intervals_end_on_the_watched_roles_own_counts() {
        use crate::workload::{Roles, SequenceCounts, SideReport};
        let side = |bytes, messages, secs| SideReport {
            bytes,
            messages,
            elapsed: Some(Duration::from_secs_f64(secs)),
            ..SideReport::default()
        };
        let roles = Roles {
            senders: vec![SideReport {
                timeouts: 2,
                ..side(640, 10, 1.0)
            }],
            receivers: vec![SideReport {
                sequence: Some(SequenceCounts {
                    reordered: 0,
                    duplicated: 1,
                }),
                ..side(512, 8, 1.5)
            }],
            ..Roles::default()
        };
        let pingpong = first_scenario(&["pingpong", "-t", "udp", "-s", "64"]);
        let (t, end) = final_totals(&pingpong, Watch::Client, &roles);
        // Ten requests, two timed out: eight round trips.
        assert_eq!((t.bytes_sent, t.messages_sent, t.lost), (8 * 64, 8, None));
        assert_eq!(end, 1.0);
        let rate = first_scenario(&["rate", "-t", "udp", "-s", "64"]);
        let (t, end) = final_totals(&rate, Watch::Receiver, &roles);
        assert_eq!((t.bytes_received, t.messages_received), (512, 8));
        // Ten sent, eight received of which one twice: three never arrived.
        assert_eq!(t.lost, Some(3));
        assert_eq!(end, 1.5);
        let (t, _) = final_totals(&rate, Watch::Sender, &roles);
        assert_eq!((t.bytes_sent, t.messages_sent, t.lost), (640, 10, None));
        // Nothing is lost on a reliable transport, nor counted without sequence numbers.
        for argv in [
            &["rate", "-t", "unix-seqpacket"][..],
            &["rate", "-t", "udp", "-s", "4"],
            &["stream", "-t", "udp"],
        ] {
            let (t, _) = final_totals(&first_scenario(argv), Watch::Receiver, &roles);
            assert_eq!(t.lost, None, "{argv:?}");
        }
        assert_eq!(interval_label(&rate), "rate udp 64 B");
    }
}

#[cfg(test)]
mod warnings_tests;
