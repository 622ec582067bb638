//! Latency distributions: HDR histograms (nanoseconds, 3 significant digits) and the
//! percentile summary that reports carry.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Percentiles of a latency distribution, in integer nanoseconds.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
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

    #[test]
    fn stall_fraction_counts_slow_samples() {
        let h = hist(&[10_000, 20_000, 40_000_000, 41_000_000]);
        assert!((fraction_at_least(&h, 30_000_000) - 0.5).abs() < 1e-9);
    }
}
