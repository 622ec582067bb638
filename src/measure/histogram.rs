//! Latency distributions: HDR histograms (nanoseconds, 3 significant digits) and the
//! percentile summary that reports carry.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Percentiles of a latency distribution, in integer nanoseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Latency {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample.
    pub min_ns: u64,
    /// Mean.
    pub mean_ns: u64,
    /// Standard deviation.
    pub stddev_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p99_9_ns: u64,
    /// 99.99th percentile.
    pub p99_99_ns: u64,
    /// Largest sample.
    pub max_ns: u64,
}

impl Latency {
    /// Summarise a histogram; `None` if it is empty.
    pub fn of(h: &Histogram<u64>) -> Option<Latency> {
        if h.is_empty() {
            return None;
        }
        Some(Latency {
            count: h.len(),
            min_ns: h.min(),
            mean_ns: h.mean().round() as u64,
            stddev_ns: h.stdev().round() as u64,
            p50_ns: h.value_at_quantile(0.50),
            p90_ns: h.value_at_quantile(0.90),
            p99_ns: h.value_at_quantile(0.99),
            p99_9_ns: h.value_at_quantile(0.999),
            p99_99_ns: h.value_at_quantile(0.9999),
            max_ns: h.max(),
        })
    }
}

/// Fraction of samples at or above `ns`.
pub fn fraction_at_least(h: &Histogram<u64>, ns: u64) -> f64 {
    if h.is_empty() {
        return 0.0;
    }
    let above: u64 = h
        .iter_recorded()
        .filter(|v| v.value_iterated_to() >= ns)
        .map(|v| v.count_at_value())
        .sum();
    above as f64 / h.len() as f64
}

/// Merge `more` into `into` (same bounds, so it cannot fail except on overflow, which
/// saturates).
pub fn merge(into: &mut Histogram<u64>, more: &Histogram<u64>) {
    let _ = into.add(more);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for &v in values {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn percentiles_come_from_the_recorded_values() {
        let h = hist(&(1..=1000).map(|i| i * 1000).collect::<Vec<_>>());
        let l = Latency::of(&h).unwrap();
        assert_eq!(l.count, 1000);
        assert_eq!(l.min_ns, 1000);
        assert!((l.p50_ns as i64 - 500_000).abs() <= 500, "{}", l.p50_ns);
        assert!((l.p99_ns as i64 - 990_000).abs() <= 1000, "{}", l.p99_ns);
        assert!(l.max_ns >= 999_500);
        assert!(Latency::of(&hist(&[])).is_none());
    }

    /// The nearest-rank percentile of sorted samples: the smallest value with at least
    /// q of the samples at or below it.
    fn nearest_rank(sorted: &[u64], q: f64) -> u64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
        sorted[rank - 1]
    }

    /// Within HDR's precision (3 significant digits: a bucket is at most 1/1024 wide).
    fn close(hdr: u64, exact: u64) -> bool {
        hdr.abs_diff(exact) <= exact / 500 + 1
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

        #[test]
        fn every_figure_matches_a_brute_force_computation_on_the_same_samples(
            samples in proptest::collection::vec(1u64..5_000_000_000, 1..3000)
        ) {
            let l = Latency::of(&hist(&samples)).unwrap();
            let mut sorted = samples.clone();
            sorted.sort_unstable();
            let n = sorted.len() as f64;
            proptest::prop_assert_eq!(l.count, samples.len() as u64);
            proptest::prop_assert!(close(l.min_ns, sorted[0]));
            proptest::prop_assert!(close(l.max_ns, *sorted.last().unwrap()));
            for (got, q) in [
                (l.p50_ns, 0.50),
                (l.p90_ns, 0.90),
                (l.p99_ns, 0.99),
                (l.p99_9_ns, 0.999),
                (l.p99_99_ns, 0.9999),
            ] {
                let want = nearest_rank(&sorted, q);
                proptest::prop_assert!(close(got, want), "p{}: {} vs {}", q * 100.0, got, want);
            }
            let mean = sorted.iter().map(|&v| v as f64).sum::<f64>() / n;
            proptest::prop_assert!((l.mean_ns as f64 - mean).abs() <= mean / 500.0 + 1.0, "mean {} vs {mean}", l.mean_ns);
            // Population standard deviation, as HdrHistogram defines it.
            let sd = (sorted.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n).sqrt();
            let max = *sorted.last().unwrap() as f64;
            proptest::prop_assert!((l.stddev_ns as f64 - sd).abs() <= max / 500.0 + 1.0, "sd {} vs {sd}", l.stddev_ns);
        }

        #[test]
        fn merged_runs_are_the_histogram_of_all_their_samples(
            runs in proptest::collection::vec(proptest::collection::vec(1u64..1_000_000_000, 0..500), 1..5)
        ) {
            let mut merged = hist(&[]);
            for run in &runs {
                merge(&mut merged, &hist(run));
            }
            let all: Vec<u64> = runs.concat();
            let direct = hist(&all);
            proptest::prop_assert_eq!(merged.len(), all.len() as u64);
            proptest::prop_assert_eq!(Latency::of(&merged), Latency::of(&direct));
        }
    }

    #[test]
    fn stall_fraction_counts_slow_samples() {
        let h = hist(&[10_000, 20_000, 40_000_000, 41_000_000]);
        assert!((fraction_at_least(&h, 30_000_000) - 0.5).abs() < 1e-9);
    }
}
