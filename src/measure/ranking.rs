//! Rankings: which of several entries measured over runs (relay's copy methods, the server
//! models, `-e all`'s engines, the suite's transports) is the fastest, said only when
//! the noise allows it.
//!
//! Each entry's figure is its runs' median; the leader is the best median. The leader is
//! named the winner only when [`verdict::judge`] (the test `compare` makes) finds it
//! faster than every other entry. Naming one winner among k others makes k tests, so
//! each is made at alpha / k (Bonferroni): the chance that any of them calls noise a
//! difference stays below alpha (Dunn, "Multiple comparisons among means", JASA 1961).
//! With one run an entry's noise is unknown and nothing is tested: the ranking says so
//! and names no winner. Each entry keeps its spread (min, max and the 95% interval of its
//! runs) for the tables to show beside its figure.
//!
//! The data is plain and serialisable; [`Ranking::summary`] is the one sentence every
//! command prints under its table.

use serde::{Deserialize, Serialize};

use super::stats::Summary;
use super::verdict::{self, Verdict};

/// The significance level of a ranking (before the Bonferroni division), as `compare`'s
/// default `--alpha`.
pub const ALPHA: f64 = 0.05;

/// Where a ranking landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Outcome {
    /// The leader is faster than every other entry beyond the noise.
    #[serde(rename = "winner")]
    Winner,
    /// The leader's lead over some entry is within the noise: no winner.
    #[serde(rename = "within the noise")]
    WithinNoise,
    /// Some entry has a single run, so its noise is unknown: no ranking at all.
    #[serde(rename = "single run")]
    SingleRun,
}

/// One entry of a ranking, best median first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Ranked {
    /// The entry (a method, a model, an engine, a transport).
    pub name: String,
    /// Its runs.
    pub runs: usize,
    /// The median of its runs (the figure ranked).
    pub median: f64,
    /// Its smallest run.
    pub min: f64,
    /// Its largest run.
    pub max: f64,
    /// 95% confidence interval of the mean of its runs, low end; null with one run.
    pub ci95_low: Option<f64>,
    /// High end.
    pub ci95_high: Option<f64>,
    /// The leader against this entry (`faster`: beyond the noise; `too noisy to tell`,
    /// `no significant difference`, `too few runs`: within it); null for the leader and
    /// with single runs.
    pub leader_is: Option<Verdict>,
    /// That test's p-value; null where none was made.
    pub p_value: Option<f64>,
}

/// A ranking of the entries of one group.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Ranking {
    /// What the entries share (e.g. `tcp 64 KiB`).
    pub group: String,
    /// What is ranked: `methods`, `models`, `engines`, `transports`.
    pub among: String,
    /// The figure with its unit (`bits_per_second`, `requests_per_second`,
    /// `round_trip_p50_ns`, ...).
    pub figure: String,
    /// What the figure counts: `throughput` (bits per second), `rate` (per second) or
    /// `latency` (nanoseconds).
    pub quantity: super::headline::Quantity,
    /// Whether a higher figure is better (false for latency).
    pub higher_is_better: bool,
    /// The entries, best median first (entries without a finished run are left out).
    pub entries: Vec<Ranked>,
    /// `winner`, `within the noise` or `single run`.
    pub outcome: Outcome,
    /// The winner's name: set only with `winner`.
    pub winner: Option<String>,
    /// The level each test was made at: alpha over the number of tests.
    pub alpha_per_test: Option<f64>,
}

/// Rank `entries` (name, each run's figure) of `group`; `None` with fewer than two entries
/// that have a figure.
pub fn rank(
    group: &str,
    among: &str,
    headline: super::headline::Headline,
    entries: &[(String, Vec<f64>)],
) -> Option<Ranking> {
    let higher_is_better = headline.higher_is_better;
    let mut ranked: Vec<(Ranked, &Vec<f64>)> = entries
        .iter()
        .filter_map(|(name, values)| {
            let values_ok = values.iter().all(|v| v.is_finite());
            let s = Summary::of(values).filter(|_| values_ok)?;
            Some((
                Ranked {
                    name: name.clone(),
                    runs: s.runs,
                    median: s.median,
                    min: s.min,
                    max: s.max,
                    ci95_low: s.ci95_low,
                    ci95_high: s.ci95_high,
                    leader_is: None,
                    p_value: None,
                },
                values,
            ))
        })
        .collect();
    if ranked.len() < 2 {
        return None;
    }
    ranked.sort_by(|a, b| match higher_is_better {
        true => b.0.median.total_cmp(&a.0.median),
        false => a.0.median.total_cmp(&b.0.median),
    });
    let mut out = Ranking {
        group: group.to_string(),
        among: among.to_string(),
        figure: headline.name.to_string(),
        quantity: headline.quantity,
        higher_is_better,
        entries: Vec::new(),
        outcome: Outcome::SingleRun,
        winner: None,
        alpha_per_test: None,
    };
    if ranked.iter().any(|(r, _)| r.runs < 2) {
        out.entries = ranked.into_iter().map(|(r, _)| r).collect();
        return Some(out);
    }
    let tests = ranked.len() - 1;
    let alpha = ALPHA / tests as f64;
    let leader = ranked[0].1.clone();
    for (r, values) in ranked.iter_mut().skip(1) {
        let j = verdict::judge(values, &leader, higher_is_better, alpha);
        r.leader_is = Some(j.verdict);
        r.p_value = j.p_value;
    }
    out.alpha_per_test = Some(alpha);
    out.entries = ranked.into_iter().map(|(r, _)| r).collect();
    let beaten = |r: &Ranked| r.leader_is == Some(Verdict::Faster);
    if out.entries.iter().skip(1).all(beaten) {
        out.outcome = Outcome::Winner;
        out.winner = Some(out.entries[0].name.clone());
    } else {
        out.outcome = Outcome::WithinNoise;
    }
    Some(out)
}

impl Ranking {
    /// The sentence printed under a table; `show` formats a figure.
    pub fn summary(&self, show: &dyn Fn(f64) -> String) -> String {
        let leader = &self.entries[0];
        let kind = self.among.trim_end_matches('s');
        match self.outcome {
            Outcome::SingleRun => format!(
                "{}: single run, so the noise is unknown: no {kind} is ranked fastest; measure with \
                 --runs 3 or more (5 is better) to rank them",
                self.group
            ),
            Outcome::Winner => format!(
                "{}: fastest {kind} {} ({} median of {} runs, {}), ahead of every other beyond \
                 the noise (each test at p < {})",
                self.group,
                leader.name,
                show(leader.median),
                leader.runs,
                range(leader.min, leader.max, show),
                p_text(self.alpha_per_test.unwrap_or(ALPHA))
            ),
            Outcome::WithinNoise => {
                let (within, behind): (Vec<&Ranked>, Vec<&Ranked>) = self.entries[1..]
                    .iter()
                    .partition(|r| r.leader_is != Some(Verdict::Faster));
                let names = |v: &[&Ranked]| {
                    v.iter()
                        .map(|r| {
                            let why = r.leader_is.map_or("", Verdict::text);
                            format!("{} ({why})", r.name)
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let mut s = format!(
                    "{}: no fastest {kind}: {} has the best median over its runs ({}), but the noise cannot tell it \
                     from {}",
                    self.group,
                    leader.name,
                    show(leader.median),
                    names(&within)
                );
                if !behind.is_empty() {
                    let behind: Vec<&str> = behind.iter().map(|r| r.name.as_str()).collect();
                    s.push_str(&format!(
                        "; {} {} behind beyond the noise",
                        behind.join(", "),
                        if behind.len() == 1 { "is" } else { "are" }
                    ));
                }
                s
            }
        }
    }
}

/// The sentences for a list of rankings: one per ranking, but one in all when every one
/// is a single run (the same words for each group would say nothing more).
pub fn summaries(rankings: &[Ranking], show: &dyn Fn(f64) -> String) -> Vec<String> {
    match rankings {
        [] => Vec::new(),
        [first, ..] if rankings.iter().all(|r| r.outcome == Outcome::SingleRun) => {
            let kind = first.among.trim_end_matches('s');
            vec![format!(
                "single run, so the noise is unknown: no {kind} is ranked fastest{}; measure with \
                 --runs 3 or more (5 is better) to rank them",
                match rankings.len() {
                    1 => format!(" ({})", first.group),
                    _ => String::new(),
                }
            )]
        }
        _ => rankings.iter().map(|r| r.summary(show)).collect(),
    }
}

/// A significance level as the sentence prints it: 0.05, 0.025, 0.0167, 8.3e-3.
fn p_text(alpha: f64) -> String {
    if alpha >= 0.01 {
        let s = format!("{alpha:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{alpha:.1e}")
    }
}

/// An entry's spread as a table cell: `min-max` of its runs with `show` (the unit said
/// once when both ends share it: `318-481 Mbit/s`), `1 run`, or `-` without a run.
pub fn spread_cell(values: &[f64], show: &dyn Fn(f64) -> String) -> String {
    match Summary::of(values) {
        Some(s) if s.runs >= 2 => range(s.min, s.max, show),
        Some(_) => "1 run".into(),
        None => "-".into(),
    }
}

/// `lo-hi` with `show`, the unit said once when both ends share it.
fn range(lo: f64, hi: f64, show: &dyn Fn(f64) -> String) -> String {
    let (lo, hi) = (show(lo), show(hi));
    match (lo.rsplit_once(' '), hi.rsplit_once(' ')) {
        (Some((a, u)), Some((b, v))) if u == v => format!("{a}-{b} {u}"),
        _ => format!("{lo}-{hi}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::headline::Headline;

    fn entries(v: &[(&str, &[f64])]) -> Vec<(String, Vec<f64>)> {
        v.iter().map(|(n, x)| (n.to_string(), x.to_vec())).collect()
    }

    fn show(v: f64) -> String {
        format!("{v:.0}")
    }

    /// Issue 29: one default `relay --connections 5000 -s 10K` ranked read-write 4x slower
    /// than vectored; with `--runs 3` they were equal. Entries whose runs overlap have
    /// no winner, however far apart their medians.
    #[test]
    fn entries_whose_runs_overlap_name_no_winner() {
        let r = rank(
            "tcp 10 KiB",
            "methods",
            Headline::throughput("bits_per_second"),
            &entries(&[
                ("read-write", &[2.0, 9.0, 3.0]),
                ("vectored", &[8.0, 2.5, 9.5]),
            ]),
        )
        .unwrap();
        assert_eq!(r.outcome, Outcome::WithinNoise);
        assert_eq!(r.winner, None);
        assert_eq!(r.entries[0].name, "vectored");
        assert_ne!(r.entries[1].leader_is, Some(Verdict::Faster));
        let s = r.summary(&show);
        assert!(
            s.starts_with("tcp 10 KiB: no fastest method: vectored"),
            "{s}"
        );
        assert!(!s.contains("ahead"), "{s}");
    }

    #[test]
    fn a_single_run_ranks_nothing_and_says_why() {
        let r = rank(
            "tcp 10 KiB",
            "methods",
            Headline::throughput("bits_per_second"),
            &entries(&[("read-write", &[1.0]), ("vectored", &[4.0])]),
        )
        .unwrap();
        assert_eq!((r.outcome, r.winner.as_deref()), (Outcome::SingleRun, None));
        assert!(r.entries.iter().all(|e| e.leader_is.is_none()));
        let s = r.summary(&show);
        assert!(s.contains("single run") && s.contains("--runs 3"), "{s}");
        assert!(!s.contains("fastest method vectored"), "{s}");
        assert_eq!(spread_cell(&[4.0], &show), "1 run");
    }

    #[test]
    fn a_lead_beyond_the_noise_of_every_other_entry_is_the_winner() {
        let r = rank(
            "tcp 64 KiB",
            "engines",
            Headline::throughput("bits_per_second"),
            &entries(&[
                ("blocking", &[10.0, 10.2, 9.9, 10.1, 10.0]),
                ("epoll", &[20.0, 20.3, 19.8, 20.1, 20.2]),
                ("poll", &[15.0, 15.2, 14.9, 15.1, 15.0]),
            ]),
        )
        .unwrap();
        assert_eq!(r.outcome, Outcome::Winner);
        assert_eq!(r.winner.as_deref(), Some("epoll"));
        assert_eq!(r.alpha_per_test, Some(0.025), "two tests");
        let names: Vec<&str> = r.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["epoll", "poll", "blocking"]);
        assert_eq!((r.entries[0].min, r.entries[0].max), (19.8, 20.3));
        let s = r.summary(&show);
        assert!(
            s.starts_with("tcp 64 KiB: fastest engine epoll (20 median of 5 runs, 20-20)"),
            "{s}"
        );
        assert!(s.contains("p < 0.025"), "{s}");
        assert_eq!(spread_cell(&[19.8, 20.3], &|v| format!("{v}")), "19.8-20.3");
        assert_eq!(
            spread_cell(&[20.0, 3.0, 19.0], &|v| format!("{v} Mbit/s")),
            "3-20 Mbit/s"
        );
        assert_eq!(
            spread_cell(&[900.0, 1100.0], &|v| match v < 1000.0 {
                true => format!("{v} ns"),
                false => format!("{} µs", v / 1000.0),
            }),
            "900 ns-1.1 µs"
        );
        assert_eq!(spread_cell(&[], &show), "-");
    }

    #[test]
    fn latency_ranks_the_lowest_first_and_one_entry_within_the_noise_spoils_the_win() {
        let r = rank(
            "udp 64 B",
            "engines",
            Headline::latency("round_trip_p50_ns"),
            &entries(&[
                (
                    "blocking",
                    &[14_000.0, 14_100.0, 13_900.0, 14_050.0, 13_950.0],
                ),
                ("epoll", &[9_000.0, 9_050.0, 8_950.0, 9_020.0, 8_980.0]),
                ("poll", &[9_000.0, 12_000.0, 8_000.0, 9_500.0, 10_500.0]),
                ("failed", &[]),
            ]),
        )
        .unwrap();
        assert_eq!(r.entries.len(), 3, "an entry without runs is left out");
        assert_eq!(r.entries[0].name, "epoll");
        assert_eq!(r.outcome, Outcome::WithinNoise);
        assert_eq!(r.entries[2].leader_is, Some(Verdict::Faster), "{r:?}");
        let s = r.summary(&show);
        assert!(s.contains("cannot tell it from poll ("), "{s}");
        assert!(s.ends_with("; blocking is behind beyond the noise"), "{s}");
    }

    #[test]
    fn fewer_than_two_entries_are_no_ranking() {
        assert!(rank(
            "g",
            "models",
            Headline::rate("x"),
            &entries(&[("a", &[1.0, 2.0])])
        )
        .is_none());
        assert!(rank(
            "g",
            "models",
            Headline::rate("x"),
            &entries(&[("a", &[1.0]), ("b", &[])])
        )
        .is_none());
    }
}
