//! Runs a plan: per scenario, per run, warm up on a throwaway connection, then a measured
//! run, both through the placement; turn what the roles reported into figures and
//! diagnoses; export after every scenario.

use crate::interrupt;
use crate::measure::figures::figures;
use crate::measure::units::format_bytes;
use crate::placement::{Placement, Remote, RunError, Threads};
use crate::plan::{Plan, Scenario, Where};
use crate::report::progress::Progress;
use crate::report::{ExportManager, Report, ScenarioResult, Warning};
use crate::transport::TransportKind;
use crate::workload::Role;
use crate::workload::Stop;
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
        for sc in &self.plan.scenarios {
            progress.set_message(format!(
                "{} {} {}",
                sc.workload,
                sc.transport,
                format_bytes(sc.size)
            ));
            match self.scenario(sc) {
                Some(result) => report.results.push(result),
                None => {
                    report.interrupted = true;
                    break;
                }
            }
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
    fn scenario(&self, sc: &Scenario) -> Option<ScenarioResult> {
        let mut raws = Vec::new();
        let mut error = None;
        let mut interrupted = false;
        for _ in 0..sc.runs {
            let outcome = (|| {
                if !sc.warmup.is_zero() {
                    self.placement.run(sc, Stop::Duration(sc.warmup))?;
                }
                self.placement.run(sc, sc.stop)
            })();
            match outcome {
                Ok(raw) => raws.push(raw),
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
        result.error = error.or_else(|| crate::diagnose::disagreement(sc, &result));
        if interrupted {
            result.warnings.push(Warning {
                kind: "interrupted".into(),
                message: format!("interrupted after {} of {} runs", raws.len(), sc.runs),
            });
        }
        Some(result)
    }
}
