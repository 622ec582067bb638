//! Whether two sets of runs differ beyond their noise: the test `compare` makes between
//! a scenario in two reports, and the rankings make between the entries of one (relay's
//! copy methods, the models, `-e all`'s engines; see [`super::ranking`]). One place, so
//! both say "faster" on the same evidence.
//!
//! Rates and latencies vary by factors, not by amounts, so when every figure is positive
//! the test is made on their logarithms. Welch's t-test when both sides have 3 runs or
//! more without an outlier ([`stats::has_outlier`]); otherwise Mann-Whitney U with the
//! Hodges-Lehmann interval; with fewer than 2 runs on a side, no test (`too few runs`).
//! When the test cannot tell, the verdict is `no significant difference` only if the
//! ratio's interval lies within ±[`EQUIVALENCE`] of 1, and `too noisy to tell` otherwise.
//! The module doc of `mode::compare` gives the details and sources.

use serde::{Deserialize, Serialize};

use super::stats;

/// How close to 1 the ratio's whole interval must lie for `no significant difference`:
/// within 5% either way. A wider interval is `too noisy to tell`.
pub const EQUIVALENCE: f64 = 0.05;

/// The outcome for one matched scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Verdict {
    /// Significantly better than the baseline.
    #[serde(rename = "faster")]
    Faster,
    /// Significantly worse than the baseline.
    #[serde(rename = "slower")]
    Slower,
    /// The test cannot tell the runs apart at `--alpha`, and the ratio's interval lies
    /// within ±5% of 1: any change is smaller than that.
    #[serde(rename = "no significant difference")]
    NoSignificantDifference,
    /// The test cannot tell the runs apart at `--alpha`, but the ratio's interval is too
    /// wide to say there is no change: the runs are noisier than any change they could
    /// show.
    #[serde(rename = "too noisy to tell")]
    TooNoisy,
    /// Too few runs on a side for a test to decide anything.
    #[serde(rename = "too few runs")]
    TooFewRuns,
    /// The figures are beyond what the test can compute with (their variance overflows):
    /// no test, no verdict either way.
    #[serde(rename = "no test")]
    NoTest,
    /// The scenario failed on a side.
    #[serde(rename = "failed")]
    Failed,
}

impl Verdict {
    /// The words the tables print (and JSON holds).
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::NoSignificantDifference => "no significant difference",
            Verdict::TooNoisy => "too noisy to tell",
            Verdict::TooFewRuns => "too few runs",
            Verdict::NoTest => "no test",
            Verdict::Failed => "failed",
        }
    }
}

/// The test a comparison used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum TestKind {
    /// Welch's unequal-variances t-test on the figures.
    #[serde(rename = "welch")]
    Welch,
    /// Welch's unequal-variances t-test on the figures' logarithms (a change as a ratio).
    #[serde(rename = "welch-log")]
    WelchLog,
    /// Mann-Whitney U with its exact distribution.
    #[serde(rename = "mann-whitney-exact")]
    MannWhitneyExact,
    /// Mann-Whitney U with the normal approximation.
    #[serde(rename = "mann-whitney-normal")]
    MannWhitneyNormal,
}

/// What the test found between two sets of runs: the verdict for `new` against `base`,
/// the test made, its p-value and the interval of the ratio new / base.
#[derive(Clone, Debug, PartialEq)]
pub struct Judgement {
    /// `faster` or `slower` (new against base) when p < alpha; else `no significant
    /// difference` (the interval within ±5% of 1), `too noisy to tell`, `too few runs`
    /// or `no test`.
    pub verdict: Verdict,
    /// The test made; null if none.
    pub test: Option<TestKind>,
    /// Its two-sided p-value.
    pub p_value: Option<f64>,
    /// Lower end of the ratio's confidence interval.
    pub ratio_ci_low: Option<f64>,
    /// Upper end of the ratio's confidence interval.
    pub ratio_ci_high: Option<f64>,
    /// The interval's confidence.
    pub ci_confidence: Option<f64>,
    /// Why the verdict is what it is, when that needs saying.
    pub note: Option<String>,
}

/// Judge `new` against `base` (each run's figure; `higher_is_better` false for latency)
/// at significance `alpha`.
pub fn judge(base: &[f64], new: &[f64], higher_is_better: bool, alpha: f64) -> Judgement {
    let mut j = Judgement {
        verdict: Verdict::TooFewRuns,
        test: None,
        p_value: None,
        ratio_ci_low: None,
        ratio_ci_high: None,
        ci_confidence: None,
        note: None,
    };
    let (b, n) = (base, new);
    if b.len() < 2 || n.len() < 2 {
        j.verdict = Verdict::TooFewRuns;
        j.note = Some(format!(
            "{} run(s) in BASE and {} in NEW: no test can tell a change from noise; \
             measure both with --runs 3 or more",
            b.len(),
            n.len()
        ));
        return j;
    }
    // Changes are ratios: test the logarithms when every figure has one.
    let logs = b.iter().chain(n).all(|&v| v > 0.0);
    let ln = |v: &[f64]| -> Vec<f64> { v.iter().map(|x| x.ln()).collect() };
    let (tb, tn) = match logs {
        true => (ln(b), ln(n)),
        false => (b.to_vec(), n.to_vec()),
    };
    // The outlier check reads the figures themselves: its floor (a value within 1% of
    // the median's size is never an outlier) is a floor on figures, not on logarithms.
    let welch_fits =
        b.len() >= 3 && n.len() >= 3 && !stats::has_outlier(b) && !stats::has_outlier(n);
    let new_higher;
    if welch_fits {
        let Some(w) = stats::welch(&tb, &tn) else {
            j.verdict = Verdict::NoTest;
            j.note = Some(
                "the figures are too large for Welch's t-test (their variance overflows): \
                 no test; compare the medians by eye"
                    .into(),
            );
            return j;
        };
        j.test = Some(match logs {
            true => TestKind::WelchLog,
            false => TestKind::Welch,
        });
        j.p_value = Some(w.p_value);
        let interval = match logs {
            true => {
                let (lo, hi) = w.difference_interval(alpha);
                Some((lo.exp(), hi.exp())).filter(|(l, h)| l.is_finite() && h.is_finite())
            }
            false => w.ratio_interval(alpha),
        };
        if let Some((lo, hi)) = interval {
            j.ratio_ci_low = Some(lo);
            j.ratio_ci_high = Some(hi);
            j.ci_confidence = Some(1.0 - alpha);
        }
        new_higher = w.t > 0.0;
    } else {
        let Some(mw) = stats::mann_whitney(b, n) else {
            j.verdict = Verdict::NoTest;
            j.note = Some("the Mann-Whitney test could not be computed: no test".into());
            return j;
        };
        j.test = Some(match mw.exact {
            true => TestKind::MannWhitneyExact,
            false => TestKind::MannWhitneyNormal,
        });
        j.p_value = Some(mw.p_value);
        new_higher = mw.u > (b.len() * n.len()) as f64 / 2.0;
        if logs {
            if let Some(s) = stats::hodges_lehmann(&tb, &tn, alpha) {
                j.ratio_ci_low = Some(s.low.exp());
                j.ratio_ci_high = Some(s.high.exp());
                j.ci_confidence = Some(s.confidence);
            }
        }
        let why = match b.len() < 3 || n.len() < 3 {
            true => "fewer than 3 runs on a side",
            false => "the runs have an outlier",
        };
        // Ties (the same figure on both sides) only make the exact distribution coarser:
        // its floor holds for the normal approximation a tie falls back to as well. A
        // floor equal to alpha is out of reach too: significance is p < alpha.
        if stats::mann_whitney_min_p(b.len(), n.len()) >= alpha {
            j.verdict = Verdict::TooFewRuns;
            j.note = Some(format!(
                "{} and {} runs: the Mann-Whitney test ({why}) cannot reach p < {alpha} \
                 with so few: measure both with --runs {} or more",
                b.len(),
                n.len(),
                runs_needed(alpha)
            ));
            return j;
        }
    }
    let significant = j.p_value.is_some_and(|p| p < alpha);
    j.verdict = match (significant, new_higher == higher_is_better) {
        (false, _) if within_equivalence(j.ratio_ci_low, j.ratio_ci_high) => {
            Verdict::NoSignificantDifference
        }
        (false, _) => {
            j.note = Some(match (j.ratio_ci_low, j.ratio_ci_high) {
                (Some(lo), Some(hi)) => format!(
                    "the ratio lies anywhere from {lo:.3} to {hi:.3}: too wide to tell a change \
                     from noise, or to rule one out; measure both with more --runs, on a \
                     quieter machine"
                ),
                _ => "no interval for the ratio: too noisy to tell a change from noise; \
                      measure both with more --runs"
                    .to_string(),
            });
            Verdict::TooNoisy
        }
        (true, true) => Verdict::Faster,
        (true, false) => Verdict::Slower,
    };
    j
}

/// The smallest run count per side with which the exact Mann-Whitney test can go below
/// `alpha` (what significance asks).
pub fn runs_needed(alpha: f64) -> usize {
    (2..=50)
        .find(|&k| stats::mann_whitney_min_p(k, k) < alpha)
        .unwrap_or(50)
}

/// Whether a ratio interval lies within ±[`EQUIVALENCE`] of 1.
pub fn within_equivalence(low: Option<f64>, high: Option<f64>) -> bool {
    matches!((low, high), (Some(lo), Some(hi))
        if lo >= 1.0 - EQUIVALENCE && hi <= 1.0 + EQUIVALENCE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_runs_a_side_with_an_outlier_are_too_few_even_when_the_sides_tie() {
        // A rate document compared with itself: the same three runs on both sides, one
        // an outlier (Mann-Whitney, not Welch), every value tied across the sides (the
        // normal approximation, not the exact test). No test of 3 and 3 can reach
        // p < 0.05 (the exact floor is 0.1): too few runs, not "too noisy".
        let runs = [120_534.6, 114_510.5, 120_375.1];
        let j = judge(&runs, &runs, true, 0.05);
        assert_eq!(j.verdict, Verdict::TooFewRuns, "{j:?}");
        assert!(j.note.unwrap().contains("cannot reach p < 0.05"));
        // Without ties, the same floor by the exact test.
        let j = judge(&runs, &[120_534.7, 114_510.6, 120_375.2], true, 0.05);
        assert_eq!(j.verdict, Verdict::TooFewRuns, "{j:?}");
    }

    #[test]
    fn a_floor_equal_to_alpha_is_out_of_reach() {
        // 3 and 3 runs: the exact test's smallest p is 2 / C(6, 3) = 0.1, exactly. At
        // --alpha 0.1 no outcome is significant (p < 0.1), however far apart the sides:
        // too few runs, and the advice is 4 a side, not 3.
        assert_eq!(stats::mann_whitney_min_p(3, 3), 0.1);
        assert_eq!(runs_needed(0.1), 4);
        assert_eq!(runs_needed(0.05), 4);
        assert_eq!(runs_needed(0.01), 5);
        let base = [100.0, 101.0, 180.0]; // an outlier: Mann-Whitney, not Welch
        let j = judge(&base, &[200.0, 202.0, 360.0], true, 0.1);
        assert_eq!(j.verdict, Verdict::TooFewRuns, "{j:?}");
        assert!(j.note.unwrap().contains("--runs 4 or more"));
        // One run more on a side goes below 0.1 (2 / C(7, 3) = 0.057): a verdict.
        let j = judge(
            &[100.0, 101.0, 180.0, 99.0],
            &[200.0, 202.0, 360.0],
            true,
            0.1,
        );
        assert_eq!(j.verdict, Verdict::Faster, "{j:?}");
    }

    #[test]
    fn identical_quiet_runs_show_no_significant_difference() {
        let runs = [100.0, 100.5, 101.0, 100.2, 100.8];
        let j = judge(&runs, &runs, true, 0.05);
        assert_eq!(j.verdict, Verdict::NoSignificantDifference, "{j:?}");
        assert_eq!(j.p_value, Some(1.0));
    }
}
