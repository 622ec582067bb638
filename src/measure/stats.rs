//! Statistics over repeated runs: median, mean, spread, a 95% confidence interval for the
//! mean (Student's t, since `--runs` is usually small) and the coefficient of variation.

use serde::{Deserialize, Serialize};

/// Summary of one figure over the measured runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// Number of runs.
    pub runs: usize,
    /// Median (the headline figure).
    pub median: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Smallest run.
    pub min: f64,
    /// Largest run.
    pub max: f64,
    /// Sample standard deviation; null with one run.
    pub stddev: Option<f64>,
    /// Lower end of the 95% confidence interval of the mean; null with one run.
    pub ci95_low: Option<f64>,
    /// Upper end of the 95% confidence interval of the mean; null with one run.
    pub ci95_high: Option<f64>,
    /// Coefficient of variation (stddev / mean); null with one run or a zero mean.
    pub cv: Option<f64>,
}

/// Two-sided 95% quantiles of Student's t for 1..=30 degrees of freedom
/// (NIST/SEMATECH e-Handbook of Statistical Methods, table 1.3.6.7.2).
const T95: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

fn t95(df: usize) -> f64 {
    match df {
        0 => f64::NAN,
        1..=30 => T95[df - 1],
        // Between table rows, use the value of the row above (a slightly wider interval).
        31..=40 => 2.042,
        41..=60 => 2.021,
        61..=120 => 2.000,
        121..=1000 => 1.980,
        _ => 1.960,
    }
}

/// The median of a slice (mean of the middle two for an even count).
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 0 {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    })
}

impl Summary {
    /// Summarise `values`; `None` for an empty slice.
    pub fn of(values: &[f64]) -> Option<Summary> {
        let n = values.len();
        let median = median(values)?;
        let mean = values.iter().sum::<f64>() / n as f64;
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (stddev, ci, cv) = if n >= 2 {
            let var = values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let sd = var.sqrt();
            let half = t95(n - 1) * sd / (n as f64).sqrt();
            let cv = (mean != 0.0).then(|| sd / mean.abs());
            (Some(sd), Some((mean - half, mean + half)), cv)
        } else {
            (None, None, None)
        };
        Some(Summary {
            runs: n,
            median,
            mean,
            min,
            max,
            stddev,
            ci95_low: ci.map(|c| c.0),
            ci95_high: ci.map(|c| c.1),
            cv,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn single_run_has_no_spread() {
        let s = Summary::of(&[5.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (5.0, 5.0, 5.0));
        assert!(s.stddev.is_none() && s.ci95_low.is_none() && s.cv.is_none());
    }

    proptest::proptest! {
        #[test]
        fn summary_matches_a_brute_force_computation(
            values in proptest::collection::vec(-1e12f64..1e12, 1..40)
        ) {
            let s = Summary::of(&values).unwrap();
            let n = values.len();
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            let median = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
            let mean = values.iter().sum::<f64>() / n as f64;
            let eps = 1e-9 * sorted.iter().fold(1.0f64, |m, v| m.max(v.abs()));
            proptest::prop_assert_eq!(s.runs, n);
            proptest::prop_assert_eq!(s.median, median);
            proptest::prop_assert!((s.mean - mean).abs() <= eps);
            proptest::prop_assert_eq!(s.min, sorted[0]);
            proptest::prop_assert_eq!(s.max, sorted[n - 1]);
            if n == 1 {
                proptest::prop_assert!(s.stddev.is_none() && s.ci95_low.is_none() && s.ci95_high.is_none());
            } else {
                let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
                proptest::prop_assert!((s.stddev.unwrap() - sd).abs() <= eps);
                let half = T95.get(n - 2).copied().unwrap_or(2.042) * sd / (n as f64).sqrt();
                proptest::prop_assert!((s.ci95_low.unwrap() - (mean - half)).abs() <= 10.0 * eps);
                proptest::prop_assert!((s.ci95_high.unwrap() - (mean + half)).abs() <= 10.0 * eps);
                if mean != 0.0 {
                    proptest::prop_assert!((s.cv.unwrap() - sd / mean.abs()).abs() <= 1e-6 * (sd / mean.abs()).max(1.0));
                }
            }
        }
    }

    #[test]
    fn t_quantiles_follow_the_table_and_shrink_with_more_runs() {
        assert_eq!(t95(1), 12.706);
        assert_eq!(t95(30), 2.042);
        assert_eq!(t95(35), 2.042);
        assert_eq!(t95(50), 2.021);
        assert_eq!(t95(100), 2.000);
        assert_eq!(t95(500), 1.980);
        assert_eq!(t95(5000), 1.960);
        assert!(t95(0).is_nan());
        let mut last = f64::INFINITY;
        for df in 1..2000 {
            assert!(t95(df) <= last, "{df}");
            last = t95(df);
        }
    }

    #[test]
    fn confidence_interval_uses_student_t() {
        // mean 2, sample sd 1, n 3: half-width = 4.303 / sqrt(3)
        let s = Summary::of(&[1.0, 2.0, 3.0]).unwrap();
        assert!((s.stddev.unwrap() - 1.0).abs() < 1e-12);
        let half = 4.303 / 3f64.sqrt();
        assert!((s.ci95_low.unwrap() - (2.0 - half)).abs() < 1e-9);
        assert!((s.ci95_high.unwrap() - (2.0 + half)).abs() < 1e-9);
        assert!((s.cv.unwrap() - 0.5).abs() < 1e-12);
    }
}
