//! Latency distributions: HDR histograms (nanoseconds, 3 significant digits) and the
//! percentile summary that reports carry.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::time::Duration;

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

/// One bucket of a latency distribution as reports carry it: the samples above the
/// previous bucket's bound and at most `le_ns` (HDR's resolution: 3 significant digits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Bucket {
    /// Upper bound, inclusive, in nanoseconds.
    pub le_ns: u64,
    /// Samples in this bucket (not cumulative).
    pub count: u64,
}

/// Mantissas of the bucket bounds within a decade: the R10 preferred numbers (ISO 3),
/// about 26% apart, so a distribution reads as a smooth histogram on a log axis and the
/// bounds are round in any unit.
const R10: [u64; 10] = [100, 125, 160, 200, 250, 315, 400, 500, 630, 800];

/// The bucket bounds in nanoseconds, increasing: 10 ns, 12.5 ns, 16 ns, ... (R10 in
/// every decade; the ones under 100 ns are rounded down to whole nanoseconds).
pub fn bucket_bounds() -> impl Iterator<Item = u64> {
    (0..12u32).flat_map(|decade| R10.iter().map(move |m| m * 10u64.pow(decade) / 10))
}

/// A histogram in the fixed R10 buckets, from the bucket that holds its smallest sample
/// to the one that holds its largest (empty buckets between included); the counts sum to
/// the histogram's. Empty for an empty histogram.
pub fn buckets(h: &Histogram<u64>) -> Vec<Bucket> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut below = 0u64;
    for le in bucket_bounds() {
        // Samples in HDR buckets that reach down to values <= le, cumulatively (a sample's
        // HDR bucket may straddle a bound: it counts in the bucket its low end is in).
        let upto = h.count_between(0, le);
        if upto == 0 {
            continue;
        }
        out.push(Bucket {
            le_ns: le,
            count: upto - below,
        });
        below = upto;
        if below == h.len() {
            break;
        }
    }
    if below < h.len() {
        // Beyond the last bound (over 8000 s): one bucket at the largest sample.
        out.push(Bucket {
            le_ns: h.max(),
            count: h.len() - below,
        });
    }
    out
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

/// A histogram for latencies from 1 ns to one hour at 3 significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

/// Record a duration in a latency histogram (clamped to its range).
#[inline]
pub fn record(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record((d.as_nanos() as u64).clamp(1, 3_600_000_000_000));
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
    fn buckets_are_r10_bounds_from_the_smallest_sample_to_the_largest() {
        let bounds: Vec<u64> = bucket_bounds().take(12).collect();
        assert_eq!(bounds, [10, 12, 16, 20, 25, 31, 40, 50, 63, 80, 100, 125]);
        assert_eq!(bucket_bounds().last(), Some(8_000_000_000_000));
        // 14 us, 15 us, 15 us, 75 us: buckets 16 us (three) to 80 us (one), zeros between.
        let b = buckets(&hist(&[14_000, 15_000, 15_000, 75_000]));
        let le: Vec<u64> = b.iter().map(|b| b.le_ns).collect();
        assert_eq!(
            le,
            [16_000, 20_000, 25_000, 31_500, 40_000, 50_000, 63_000, 80_000]
        );
        let counts: Vec<u64> = b.iter().map(|b| b.count).collect();
        assert_eq!(counts, [3, 0, 0, 0, 0, 0, 0, 1]);
        // A sample exactly on a bound is in that bucket, the next one in the next.
        let b = buckets(&hist(&[1000, 1001]));
        assert_eq!(
            b,
            [
                Bucket {
                    le_ns: 1000,
                    count: 1
                },
                Bucket {
                    le_ns: 1250,
                    count: 1
                }
            ]
        );
        assert!(buckets(&hist(&[])).is_empty());
        // An hour (the recording limit) still has a bound of its own.
        let b = buckets(&hist(&[3_000_000_000_000]));
        assert_eq!(b.last().unwrap().count, 1);
        assert_eq!(b.last().unwrap().le_ns, 3_150_000_000_000);
        // Beyond the last bound (8000 s, for a histogram that records that far): one
        // bucket at the largest sample, after the last bound's.
        let mut long = Histogram::new_with_bounds(1, 100_000_000_000_000, 3).unwrap();
        for v in [1_000, 9_000_000_000_000, 9_000_000_000_000] {
            long.record(v).unwrap();
        }
        let b = buckets(&long);
        let tail = b.last().unwrap();
        assert_eq!(tail.count, 2);
        assert!(tail.le_ns >= 9_000_000_000_000, "{tail:?}");
        assert_eq!(b[b.len() - 2].le_ns, 8_000_000_000_000);
        assert_eq!(b.iter().map(|b| b.count).sum::<u64>(), 3);
    }

    proptest::proptest! {
        #[test]
        fn bucket_counts_add_up_to_every_sample(
            samples in proptest::collection::vec(1u64..5_000_000_000, 1..500)
        ) {
            let h = hist(&samples);
            let b = buckets(&h);
            proptest::prop_assert_eq!(b.iter().map(|b| b.count).sum::<u64>(), samples.len() as u64);
            proptest::prop_assert!(b.windows(2).all(|w| w[0].le_ns < w[1].le_ns));
            proptest::prop_assert!(b.first().unwrap().count > 0 && b.last().unwrap().count > 0);
        }
    }

    #[test]
    fn stall_fraction_counts_slow_samples() {
        let h = hist(&[10_000, 20_000, 40_000_000, 41_000_000]);
        assert!((fraction_at_least(&h, 30_000_000) - 0.5).abs() < 1e-9);
    }
}
