//! `sockbench compare BASE.json NEW.json [...]`: match the rows of saved documents of one
//! kind and say, per row, whether the new run is faster, slower, or not significantly
//! different.
//!
//! # Matching
//! Documents of the measuring commands and the suite match by scenario. A scenario's
//! identity is what it measured: its workload, transport, engine and message
//! size, the options that shape the traffic (requested `sndbuf`/`rcvbuf`, `parallel`,
//! `nodelay`, `cpus`, the async `runtime`, `send`/`recv` methods, the target `rate`
//! (`--rate`; unpaced is a value of its own), connect's `open`) and the report's placement
//! (threads, processes or server; which role ran in the other process, which `--reverse`
//! flips; `--bidir`). A report written before some of these were recorded (schema
//! version 4 lacks `rate_per_second`, `open` and `other_role`) counts them as null. How long or how often it was measured is not
//! identity: `--runs`, `--warmup`, `--duration`, `--count` and `--bytes` change the
//! precision of a rate, not what it is, so a short CI run matches a long baseline.
//! `--ignore-option sndbuf,...` drops options from the identity, to compare across a change
//! of them. A scenario that occurs several times in one file matches the same occurrence
//! in the other (first with first). Each NEW file is compared with BASE on its own; a
//! scenario only in one of them is listed as `only in BASE` / `only in NEW`.
//!
//! Every other kind matches by the rows its body names ([`crate::report::rows::Row`]:
//! relay methods, load runs, models, swarms, mesh pairs, serve and listen summaries), each
//! with its headline figure and, with `--runs`, every run's. Documents of two kinds are
//! refused.
//!
//! # The figure, the ratio and the test
//! The headline figure per run: `runs[].bits_per_second` for stream, `messages_per_second`
//! for rate and connect (connections per second), and for pingpong the round trip's p50
//! (`runs[].latencies.round_trip.p50_ns`), where lower is better. Base and new are the
//! medians over runs and the ratio is new / base. Rates and latencies vary by factors, not
//! by amounts (a run that loses its CPU is 10 times slower, never 10 Gbit/s slower), so
//! when every figure is positive the test is made on their logarithms: a change is a
//! ratio, and one run 90 times off the rest cannot hide a 90-fold change behind its
//! variance. The test, on the per-run values:
//! - Welch's t-test when both sides have 3 runs or more and neither has an outlier (Dixon's
//!   Q at 95% for 3 to 10 runs, a modified z-score over 3.5 beyond; never a value within
//!   1% of the median's size of the rest: [`stats::has_outlier`]): the runs look like
//!   one lump. A normal sample of 3 to 10 runs
//!   is called an outlier 5% of the time. On the logarithms (`welch-log`) its interval is
//!   the exponential of the difference of the mean logarithms' interval: the ratio of
//!   geometric means. Where a figure is 0 or negative (never for a run that finished) it
//!   is Welch on the values themselves (`welch`) with Fieller's interval for the ratio of
//!   means. Either interval excludes 1 exactly when the test rejects.
//! - Otherwise the Mann-Whitney U test (exact for small samples without values in
//!   common), which assumes no shape; its interval is the Hodges-Lehmann one for the
//!   ratio (on the logs of the values). When even the most extreme ordering of the runs
//!   cannot go below `--alpha` (3 runs a side at 0.05 or 0.1), the verdict is `too few
//!   runs`.
//! - With fewer than 2 runs on a side there is no test: `too few runs`.
//!
//! - Figures so large that Welch's arithmetic overflows (a variance beyond the largest
//!   float) get no test: `no test`, with a note.
//!
//! The verdict is `faster` or `slower` when p < alpha (the direction from the test; for
//! pingpong a higher latency is slower). When the test cannot tell, that is not evidence of
//! no change: the verdict is `no significant difference` only when the ratio's interval
//! also lies within ±[`EQUIVALENCE`] of 1 (whatever changed, it is smaller than that), and
//! `too noisy to tell` otherwise (the interval is wide enough to hold a real change; the
//! note says how wide and to measure more runs). A scenario that failed (an error, or no
//! run) on either side is `failed`.
//!
//! # Exit status
//! 0; 1 when `--fail-if-slower PCT` finds a row significantly slower by more than PCT
//! percent (slower percent: 100 (1 - ratio) for rates, 100 (ratio - 1) for latency), or a
//! row that ran in BASE failed in NEW or is missing from it (each named on stderr), or
//! when a file cannot be read or is not a document (as `report`), or an export cannot be
//! written; 2 for bad usage: PCT negative or not a number, alpha outside (0, 1), `-`
//! (stdin) or another NEW file given twice.
//!
//! # Output
//! The comparison is a document of kind `compare` (schema/document.schema.json), in every
//! format: a table (default), Markdown, HTML (a chart of the ratios and their intervals),
//! CSV (one row per comparison), JSON and OpenMetrics (each ratio a gauge), on stdout and
//! through `--export-FORMAT PATH`.

mod render;

use std::path::PathBuf;

use crate::cli::{CompareArgs, IdentityOption};
use crate::document::compare::{CompareBody, CompareReport, Comparison, Side, Unmatched};
use crate::document::Document;
use crate::error::{CommandResult, Error, Outcome, PlanError};
use crate::measure::stats;
use crate::measure::verdict;
#[cfg(test)]
use crate::measure::verdict::within_equivalence;
pub use crate::measure::verdict::{TestKind, Verdict, EQUIVALENCE};
use crate::report::output::{self, Head, Rendered};
use crate::report::rows::Row;
use crate::report::{Envelope, Headline, Kind, PlacementInfo, Report};
use crate::results::ScenarioResult;
use crate::vocab::text::terminal as shown;
use crate::vocab::units::{format_bytes, format_per_second};

/// Compare saved reports. What the files say (and their names) reaches stderr through
/// [`crate::vocab::text::terminal`], as it reaches the tables.
///
/// # Errors
/// A usage error, or a file that cannot be read as a document, or documents of two
/// kinds.
pub fn run(c: &CompareArgs, argv: Vec<String>) -> CommandResult {
    let output = &c.output;
    check_usage(c)?;
    let docs = (c.files.iter())
        .map(|path| super::report::load_document(path))
        .collect::<anyhow::Result<Vec<Document>>>()
        .and_then(|docs| one_kind(&docs, &c.files).map(|()| docs))
        .map_err(|e| Error::failed(format!("{e:#}")))?;
    check_kind(c, &docs)?;
    let mut doc = match docs.first().map(|d| d.body.rows().is_none()) {
        Some(true) => {
            let reports: Vec<Report> = (docs.into_iter())
                .filter_map(|d| Report::try_from(d).ok())
                .collect();
            compare(c, &reports, argv)
        }
        _ => compare_rows(c, &docs, argv),
    };
    doc.envelope.end();
    let exports = super::exports(output)?;
    exports.finish(&doc);
    let unwritten = super::emit(&doc, output, &exports);
    Ok(Outcome::ok_if(!doc.body.failed_gate)
        .and_errors(gate_failures(&doc.body))
        .and_errors(unwritten))
}

/// Why `--fail-if-slower` failed, one message a row that failed it.
fn gate_failures(body: &CompareBody) -> Vec<String> {
    let pct = render::format_percent(body.fail_if_slower_percent.unwrap_or(0.0));
    let mut said = Vec::new();
    for row in body.comparisons.iter().filter(|r| r.gate_failed) {
        said.push(match row.verdict {
            Verdict::Failed => format!(
                "{} failed in {} ({}): it ran in BASE, so --fail-if-slower {pct} fails",
                shown(&row.scenario),
                shown(&row.new_file),
                shown(row.note.as_deref().unwrap_or("no run finished")),
            ),
            _ => format!(
                "{} is {:.1}% slower in {} (p = {}, {}), more than --fail-if-slower {pct}",
                shown(&row.scenario),
                row.slower_percent.unwrap_or(f64::NAN),
                shown(&row.new_file),
                row.p_value.map_or_else(|| "-".into(), render::format_p),
                render::test_name(row.test),
            ),
        });
    }
    for u in body.only_in_base.iter().filter(|u| u.gate_failed) {
        said.push(format!(
            "{} is missing from {}: it ran in BASE, so --fail-if-slower {pct} fails \
             (if it was renamed or its options changed on purpose, see --ignore-option)",
            shown(&u.scenario),
            shown(&u.new_file),
        ));
    }
    said
}

impl Rendered for CompareReport {
    fn head(&self) -> Head<'_> {
        Head::of(Kind::Compare, &self.envelope)
    }

    fn json(&self) -> serde_json::Result<Vec<u8>> {
        output::pretty(&self.document())
    }

    fn tables(&self, view: &crate::vocab::View) -> Vec<crate::report::grid::Grid> {
        render::grids(self, *view)
    }

    fn charts(&self) -> Vec<crate::report::chart::Chart> {
        render::charts(self)
    }

    fn records(&self) -> output::Records {
        render::records(self)
    }

    fn metrics(&self) -> Vec<crate::report::openmetrics::Family> {
        let rows: Vec<_> = (self.body.comparisons.iter())
            .map(|c| {
                let labels = vec![
                    ("new_file", c.new_file.clone()),
                    ("scenario", c.scenario.clone()),
                ];
                let figures = serde_json::json!({
                    "ratio": c.ratio,
                    "ratio_ci_low": c.ratio_ci_low,
                    "ratio_ci_high": c.ratio_ci_high,
                    "p_value": c.p_value,
                    "slower_percent": c.slower_percent,
                    "gate_failed": u8::from(c.gate_failed),
                });
                (labels, figures)
            })
            .collect();
        output::gauges(Kind::Compare, "A comparison", &rows)
    }

    fn count(&self) -> String {
        output::counted(self.body.comparisons.len(), "comparison")
    }

    fn nothing_to_chart(&self) -> Option<String> {
        (self.body.comparisons.iter())
            .all(|c| c.ratio.is_none())
            .then(|| "No row has a ratio, so there is nothing to chart.".to_string())
    }

    fn setting(&self) -> Vec<(String, String)> {
        vec![
            ("BASE".to_string(), self.body.base.clone()),
            ("NEW".to_string(), self.body.new.join(", ")),
            ("alpha".to_string(), self.body.alpha.to_string()),
        ]
    }

    fn title(&self) -> String {
        "sockbench compare report".into()
    }
}

/// Documents compare can set side by side: the measuring commands' (stream, pingpong,
/// rate, connect and the suite, matched scenario by scenario), or else all of one kind.
///
/// # Errors
/// Two files of different kinds, named.
fn one_kind(docs: &[Document], files: &[PathBuf]) -> anyhow::Result<()> {
    let family = |d: &Document| match d.body.rows() {
        None => "stream, pingpong, rate, connect or suite".to_string(),
        Some(_) => d.body.kind().to_string(),
    };
    let Some(first) = docs.first() else {
        return Ok(());
    };
    for (d, f) in docs.iter().zip(files).skip(1) {
        if family(d) != family(first) {
            anyhow::bail!(
                "{} is a {} document and {} a {} document: compare sets documents of one kind \
                 side by side",
                files[0].display(),
                first.body.kind(),
                f.display(),
                d.body.kind()
            );
        }
    }
    Ok(())
}

/// Refuse `--ignore-option` where rows are not matched by options. (Documents without
/// figures, listen's and compare's, still open: they have no row, and the comparison
/// says so.)
fn check_kind(c: &CompareArgs, docs: &[Document]) -> Result<(), PlanError> {
    match docs.first() {
        Some(first) if first.body.rows().is_some() && !c.ignore_option.is_empty() => Err(format!(
            "--ignore-option matches the scenarios of stream, pingpong, rate, connect and suite \
             documents; {} rows are matched by what they measure: leave it out",
            first.body.kind()
        )
        .into()),
        _ => Ok(()),
    }
}

/// Refuse what compare cannot do before reading anything.
fn check_usage(c: &CompareArgs) -> Result<(), PlanError> {
    if let Some(p) = c.fail_if_slower {
        if !p.is_finite() || p < 0.0 {
            return Err(format!(
                "--fail-if-slower {p}: give a percentage of 0 or more, e.g. --fail-if-slower 5"
            )
            .into());
        }
    }
    if !(c.alpha > 0.0 && c.alpha < 1.0) {
        return Err(format!(
            "--alpha {}: give a significance level between 0 and 1, e.g. --alpha 0.05",
            c.alpha
        )
        .into());
    }
    if c.files.iter().filter(|f| f.as_os_str() == "-").count() > 1 {
        return Err("stdin (-) can be given once: save the other reports to files".into());
    }
    let news = c.files.get(1..).unwrap_or_default();
    for (i, f) in news.iter().enumerate() {
        if news[..i].contains(f) {
            return Err(format!(
                "{} is given twice as NEW: give each NEW file once (BASE may be one of them)",
                f.display()
            )
            .into());
        }
    }
    Ok(())
}

/// A document with nothing compared yet.
fn empty_document(c: &CompareArgs, argv: Vec<String>) -> CompareReport {
    let name = |p: &PathBuf| p.display().to_string();
    CompareReport {
        envelope: Envelope::starting(argv),
        body: CompareBody {
            base: c.files.first().map(name).unwrap_or_default(),
            new: c.files.iter().skip(1).map(name).collect(),
            alpha: c.alpha,
            ignored_options: c.ignore_option.iter().map(|o| o.name()).collect(),
            fail_if_slower_percent: c.fail_if_slower,
            ..CompareBody::default()
        },
    }
}

/// Compare `reports[0]` (BASE) with each of the others, named as in `c.files`.
pub fn compare(c: &CompareArgs, reports: &[Report], argv: Vec<String>) -> CompareReport {
    let mut doc = empty_document(c, argv);
    let Some((base, news)) = reports.split_first() else {
        return doc;
    };
    let base_name = doc.body.base.clone();
    doc.envelope.warnings.extend(run_notes(
        &base_name,
        (base.error.as_deref(), base.interrupted),
    ));
    for (new, new_name) in news.iter().zip(doc.body.new.clone()) {
        doc.envelope.warnings.extend(run_notes(
            &new_name,
            (new.error.as_deref(), new.interrupted),
        ));
        let pairs = match_scenarios(base, new, &c.ignore_option);
        for &(b, n) in &pairs.matched {
            let (b, n) = (&base.results[b], &new.results[n]);
            let mut row = compare_one(b, n, &new_name, c.alpha, c.fail_if_slower);
            let changed =
                changed_options((b, &base.placement), (n, &new.placement), &c.ignore_option);
            if !changed.is_empty() {
                row.scenario = format!("{} [{}]", row.scenario, changed.join(", "));
            }
            doc.body.comparisons.push(row);
        }
        let unmatched = |r: &ScenarioResult, gate_failed: bool| Unmatched {
            new_file: new_name.clone(),
            scenario: label(r),
            workload: Some(r.workload),
            transport: Some(r.transport),
            engine: Some(r.engine),
            size_bytes: Some(r.size_bytes),
            gate_failed,
        };
        doc.body
            .only_in_base
            .extend(pairs.only_base.iter().map(|&i| {
                let r = &base.results[i];
                unmatched(r, c.fail_if_slower.is_some() && side(r).error.is_none())
            }));
        doc.body
            .only_in_new
            .extend((pairs.only_new.iter()).map(|&i| unmatched(&new.results[i], false)));
        doc.envelope
            .warnings
            .extend(near_misses(base, new, &pairs, &c.ignore_option, &new_name));
    }
    doc.body.failed_gate = doc.body.comparisons.iter().any(|r| r.gate_failed)
        || doc.body.only_in_base.iter().any(|u| u.gate_failed);
    doc
}

/// Compare documents of one kind that is not the measuring commands' (relay, swarm,
/// load, serve, models, mesh): each body's rows matched by what they measured
/// ([`crate::report::rows::Row::key`]), in BASE's order.
pub fn compare_rows(c: &CompareArgs, docs: &[Document], argv: Vec<String>) -> CompareReport {
    let mut doc = empty_document(c, argv);
    let Some((base, news)) = docs.split_first() else {
        return doc;
    };
    let kind = base.body.kind();
    let notes = |name: &str, d: &Document| {
        run_notes(name, (d.envelope.error.as_deref(), d.envelope.interrupted))
    };
    let base_name = doc.body.base.clone();
    doc.envelope.warnings.extend(notes(&base_name, base));
    let base_rows = base.body.rows().unwrap_or_default();
    let keys = |rows: &[Row]| -> Vec<String> { rows.iter().map(|r| r.key.clone()).collect() };
    for (new, new_name) in news.iter().zip(doc.body.new.clone()) {
        doc.envelope.warnings.extend(notes(&new_name, new));
        let new_rows = new.body.rows().unwrap_or_default();
        let pairs = match_keys(&keys(&base_rows), &keys(&new_rows));
        for &(b, n) in &pairs.matched {
            let (b, n) = (&base_rows[b], &new_rows[n]);
            let mut row = judged(
                kind,
                b.headline,
                row_side(b),
                row_side(n),
                &new_name,
                c.alpha,
                c.fail_if_slower,
            );
            if !takes_runs(kind) {
                row.note = row.note.map(|n| one_run_note(kind, &n));
            }
            doc.body.comparisons.push(row);
        }
        let unmatched = |r: &Row, gate_failed: bool| Unmatched {
            new_file: new_name.clone(),
            scenario: r.label.clone(),
            workload: None,
            transport: None,
            engine: None,
            size_bytes: None,
            gate_failed,
        };
        doc.body
            .only_in_base
            .extend(pairs.only_base.iter().map(|&i| {
                let r = &base_rows[i];
                unmatched(r, c.fail_if_slower.is_some() && row_side(r).error.is_none())
            }));
        doc.body
            .only_in_new
            .extend((pairs.only_new.iter()).map(|&i| unmatched(&new_rows[i], false)));
    }
    if base_rows.is_empty() {
        doc.envelope.warnings.push(format!(
            "{base_name}: a {kind} document holds no figure compare can test"
        ));
    }
    doc.body.failed_gate = doc.body.comparisons.iter().any(|r| r.gate_failed)
        || doc.body.only_in_base.iter().any(|u| u.gate_failed);
    doc
}

/// Whether the command that writes `kind` documents takes `--runs`.
fn takes_runs(kind: Kind) -> bool {
    !matches!(kind, Kind::Serve | Kind::Mesh)
}

/// A verdict's note for a kind whose command measures one run: advice to give `--runs`
/// becomes what can be done instead.
fn one_run_note(kind: Kind, note: &str) -> String {
    match note.find("measure both with") {
        Some(at) => format!(
            "{}{kind} measures one run (it takes no --runs): the ratio is one observation \
             of each, not a verdict",
            &note[..at]
        ),
        None => note.to_string(),
    }
}

/// One side of a row: its figures, or why it has none.
fn row_side(r: &Row) -> Side {
    let error = match (&r.error, r.values.is_empty()) {
        (Some(e), _) => Some(e.clone()),
        (None, true) => Some("no run finished".to_string()),
        (None, false) => r.headline.implausible(&r.values),
    };
    Side {
        scenario: r.label.clone(),
        runs: r.values.len(),
        median: stats::median(&r.values),
        mean: (!r.values.is_empty())
            .then(|| r.values.iter().sum::<f64>() / r.values.len() as f64)
            .filter(|m| m.is_finite()),
        values: r.values.clone(),
        error,
    }
}

/// Options that alone keep unmatched scenarios apart (an old report without `open`, a
/// `--rate` added): one note per option, with the flag that would match them.
fn near_misses(
    base: &Report,
    new: &Report,
    pairs: &Pairs,
    ignore: &[IdentityOption],
    new_name: &str,
) -> Vec<String> {
    let options = <IdentityOption as clap::ValueEnum>::value_variants();
    let mut notes = Vec::new();
    for &o in options.iter().filter(|o| !ignore.contains(o)) {
        let wider: Vec<IdentityOption> = ignore.iter().copied().chain([o]).collect();
        let keys = |r: &Report, idx: &[usize]| -> Vec<String> {
            (idx.iter())
                .map(|&i| identity(&r.results[i], &r.placement, &wider))
                .collect()
        };
        let new_keys = keys(new, &pairs.only_new);
        let hits: Vec<String> = (pairs.only_base.iter())
            .zip(keys(base, &pairs.only_base))
            .filter(|(_, k)| new_keys.contains(k))
            .map(|(&i, _)| label(&base.results[i]))
            .collect();
        if !hits.is_empty() {
            notes.push(format!(
                "{new_name}: only {name} keeps {} from matching a scenario in it: add \
                 --ignore-option {name} to compare across it",
                hits.join(", "),
                name = o.name()
            ));
        }
    }
    notes
}

/// What to say about a whole run: it failed, or was interrupted.
fn run_notes(name: &str, envelope: (Option<&str>, bool)) -> Vec<String> {
    let (error, interrupted) = envelope;
    let mut notes = Vec::new();
    if let Some(e) = error {
        notes.push(format!("{name}: the run failed: {e}"));
    }
    if interrupted {
        notes.push(format!(
            "{name}: the run was interrupted: it holds only what finished"
        ));
    }
    notes
}

/// Indices of matched and unmatched scenarios of a BASE/NEW pair.
struct Pairs {
    matched: Vec<(usize, usize)>,
    only_base: Vec<usize>,
    only_new: Vec<usize>,
}

/// Pair scenarios by identity, in BASE's order; the k-th occurrence of an identity in
/// BASE pairs with its k-th occurrence in NEW.
fn match_scenarios(base: &Report, new: &Report, ignore: &[IdentityOption]) -> Pairs {
    let key_b: Vec<String> = (base.results.iter())
        .map(|r| identity(r, &base.placement, ignore))
        .collect();
    let key_n: Vec<String> = (new.results.iter())
        .map(|r| identity(r, &new.placement, ignore))
        .collect();
    match_keys(&key_b, &key_n)
}

/// Pair equal keys, first with first; the rest are in one file only.
fn match_keys(key_b: &[String], key_n: &[String]) -> Pairs {
    let mut used = vec![false; key_n.len()];
    let mut pairs = Pairs {
        matched: Vec::new(),
        only_base: Vec::new(),
        only_new: Vec::new(),
    };
    for (i, k) in key_b.iter().enumerate() {
        match (0..key_n.len()).find(|&j| !used[j] && &key_n[j] == k) {
            Some(j) => {
                used[j] = true;
                pairs.matched.push((i, j));
            }
            None => pairs.only_base.push(i),
        }
    }
    pairs.only_new = (0..key_n.len()).filter(|&j| !used[j]).collect();
    pairs
}

/// A scenario's identity as a string (JSON of the fields that make it), without the
/// ignored options.
fn identity(r: &ScenarioResult, placement: &PlacementInfo, ignore: &[IdentityOption]) -> String {
    use IdentityOption as O;
    let o = &r.options;
    let mut v = serde_json::json!({
        "workload": r.workload,
        "transport": r.transport,
        "size_bytes": r.size_bytes,
    });
    let fields = [
        (O::Engine, serde_json::json!(r.engine)),
        (O::Sndbuf, serde_json::json!(o.sndbuf_bytes)),
        (O::Rcvbuf, serde_json::json!(o.rcvbuf_bytes)),
        (O::Parallel, serde_json::json!(o.parallel)),
        (O::Nodelay, serde_json::json!(o.nodelay)),
        (O::Cpus, serde_json::json!(o.cpus)),
        (O::Runtime, serde_json::json!(o.runtime)),
        (O::Send, serde_json::json!(o.send)),
        (O::Recv, serde_json::json!(o.recv)),
        (O::Rate, serde_json::json!(o.rate_per_second)),
        (O::Open, serde_json::json!(o.open)),
        (
            O::Placement,
            serde_json::json!([placement.name, placement.other_role, placement.bidir]),
        ),
    ];
    for (opt, value) in fields {
        if !ignore.contains(&opt) {
            v[opt.name()] = value;
        }
    }
    v.to_string()
}

/// How the ignored options differ between a matched pair: `sndbuf default → 4 KiB`.
fn changed_options(
    (b, bp): (&ScenarioResult, &PlacementInfo),
    (n, np): (&ScenarioResult, &PlacementInfo),
    ignore: &[IdentityOption],
) -> Vec<String> {
    ignore
        .iter()
        .filter_map(|&o| {
            let (x, y) = (option_text(o, b, bp), option_text(o, n, np));
            (x != y).then(|| format!("{} {x} → {y}", o.name()))
        })
        .collect()
}

/// An identity option's value for people.
fn option_text(o: IdentityOption, r: &ScenarioResult, p: &PlacementInfo) -> String {
    use IdentityOption as O;
    let opts = &r.options;
    let name = |v: Option<clap::builder::PossibleValue>| {
        v.map_or_else(|| "default".to_string(), |v| v.get_name().to_string())
    };
    let bytes = |b: Option<u64>| b.map_or_else(|| "default".into(), format_bytes);
    match o {
        O::Engine => r.engine.to_string(),
        O::Sndbuf => bytes(opts.sndbuf_bytes),
        O::Rcvbuf => bytes(opts.rcvbuf_bytes),
        O::Parallel => opts.parallel.to_string(),
        O::Nodelay => if opts.nodelay { "on" } else { "off" }.into(),
        O::Cpus => opts
            .cpus
            .map_or_else(|| "any".into(), |[a, b]| format!("{a},{b}")),
        O::Runtime => name(
            opts.runtime
                .and_then(|v| clap::ValueEnum::to_possible_value(&v)),
        ),
        O::Send => name(
            opts.send
                .and_then(|v| clap::ValueEnum::to_possible_value(&v)),
        ),
        O::Recv => name(
            opts.recv
                .and_then(|v| clap::ValueEnum::to_possible_value(&v)),
        ),
        O::Rate => opts
            .rate_per_second
            .map_or_else(|| "unpaced".into(), format_per_second),
        O::Open => opts.open.map_or_else(|| "-".into(), |n| n.to_string()),
        O::Placement => {
            let mut s = p.name.clone();
            if let Some(role) = p.other_role {
                s.push_str(&format!(" (other: {role})"));
            }
            if p.bidir {
                s.push_str(" bidir");
            }
            s
        }
    }
}

/// The scenario's label with its workload and the identity options the report's label
/// leaves out: `stream tcp 64 KiB`, `stream tcp 64 KiB sndbuf 4 KiB x4 nodelay`.
fn label(r: &ScenarioResult) -> String {
    let mut s = format!("{} {}", r.workload, r.label());
    if r.options.parallel > 1 {
        s.push_str(&format!(" x{}", r.options.parallel));
    }
    if r.options.nodelay {
        s.push_str(" nodelay");
    }
    if let Some([a, b]) = r.options.cpus {
        s.push_str(&format!(" cpus {a},{b}"));
    }
    if let Some(rt) = r.options.runtime {
        if let Some(v) = clap::ValueEnum::to_possible_value(&rt) {
            s.push_str(&format!(" {}", v.get_name()));
        }
    }
    if let Some(rate) = r.options.rate_per_second {
        s.push_str(&format!(" rate {}", format_per_second(rate)));
    }
    if let Some(open) = r.options.open {
        s.push_str(&format!(" open {open}"));
    }
    s
}

/// One side of a comparison.
fn side(r: &ScenarioResult) -> Side {
    let values = r.headline_runs();
    let error = match (&r.error, values.is_empty()) {
        (Some(e), _) => Some(e.clone()),
        (None, true) => Some("no run finished".to_string()),
        (None, false) => r.headline().implausible(&values),
    };
    Side {
        scenario: label(r),
        runs: values.len(),
        median: stats::median(&values),
        mean: (!values.is_empty())
            .then(|| values.iter().sum::<f64>() / values.len() as f64)
            .filter(|m| m.is_finite()),
        values,
        error,
    }
}

/// Compare one matched scenario of the measuring commands: its headline figure per
/// run in BASE against NEW.
pub fn compare_one(
    b: &ScenarioResult,
    n: &ScenarioResult,
    new_file: &str,
    alpha: f64,
    fail_if_slower: Option<f64>,
) -> Comparison {
    let kind = Kind::of_workload(b.workload);
    let mut row = judged(
        kind,
        b.headline(),
        side(b),
        side(n),
        new_file,
        alpha,
        fail_if_slower,
    );
    row.workload = Some(b.workload);
    row.transport = Some(b.transport);
    row.engine = Some(b.engine);
    row.size_bytes = Some(b.size_bytes);
    row
}

/// Judge BASE's runs against NEW's: the ratio of their medians, the test, its interval
/// and the verdict, and whether the row fails `--fail-if-slower`.
fn judged(
    kind: Kind,
    headline: Headline,
    base: Side,
    new: Side,
    new_file: &str,
    alpha: f64,
    fail_if_slower: Option<f64>,
) -> Comparison {
    let higher_is_better = headline.higher_is_better;
    let scenario = base.scenario.clone();
    let ratio = match (base.median, new.median) {
        (Some(b), Some(n)) if b != 0.0 => Some(n / b).filter(|r| r.is_finite()),
        _ => None,
    };
    let mut row = Comparison {
        new_file: new_file.to_string(),
        scenario,
        kind,
        workload: None,
        transport: None,
        engine: None,
        size_bytes: None,
        figure: headline.name.to_string(),
        quantity: headline.quantity,
        higher_is_better,
        ratio,
        ratio_ci_low: None,
        ratio_ci_high: None,
        ci_confidence: None,
        test: None,
        p_value: None,
        verdict: Verdict::Failed,
        slower_percent: ratio.map(|r| match higher_is_better {
            true => 100.0 * (1.0 - r),
            false => 100.0 * (r - 1.0),
        }),
        gate_failed: false,
        note: None,
        base,
        new,
    };
    decide(&mut row, alpha);
    let broke = row.verdict == Verdict::Failed && row.base.error.is_none();
    let slower = row.verdict == Verdict::Slower
        && matches!((fail_if_slower, row.slower_percent), (Some(pct), Some(s)) if s > pct);
    row.gate_failed = fail_if_slower.is_some() && (broke || slower);
    row
}

/// The test, the interval and the verdict of a row.
fn decide(row: &mut Comparison, alpha: f64) {
    let failures: Vec<String> = [("BASE", &row.base), ("NEW", &row.new)]
        .iter()
        .filter_map(|(name, s)| s.error.as_ref().map(|e| format!("{name}: {e}")))
        .collect();
    if !failures.is_empty() {
        row.verdict = Verdict::Failed;
        row.note = Some(failures.join("; "));
        return;
    }
    let j = verdict::judge(
        &row.base.values,
        &row.new.values,
        row.higher_is_better,
        alpha,
    );
    row.verdict = j.verdict;
    row.test = j.test;
    row.p_value = j.p_value;
    row.ratio_ci_low = j.ratio_ci_low;
    row.ratio_ci_high = j.ratio_ci_high;
    row.ci_confidence = j.ci_confidence;
    row.note = j.note;
}

#[cfg(test)]
mod tests;
