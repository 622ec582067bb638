//! Statistics over repeated runs: median, mean, spread, a 95% confidence interval for the
//! mean (Student's t, since `--runs` is usually small) and the coefficient of variation;
//! and the two-sample tests `compare` makes: Welch's t-test (with the t distribution's CDF
//! and quantile) and Fieller's interval for a ratio of means, the Mann-Whitney U test
//! (exact for small samples without ties) and the Hodges-Lehmann interval that goes with
//! it, and a robust outlier check (modified z-scores). All pure functions of their input.

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

/// Which of several runs stands for them: the index of the median of `values` (the
/// lower middle of an even count, so it is a run that happened, not an average of two);
/// `None` for none.
pub fn median_index(values: &[f64]) -> Option<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    order.get(values.len().checked_sub(1)? / 2).copied()
}

/// Which of several runs a report of them is: the last when it stopped the others
/// (`last_stopped`: it failed, was interrupted, or its counts disagree), else the median
/// run by `values` ([`median_index`]); `None` for none.
pub fn standing_run(values: &[f64], last_stopped: bool) -> Option<usize> {
    let last = values.len().checked_sub(1)?;
    match last_stopped {
        true => Some(last),
        false => median_index(values),
    }
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

/// The natural log of the gamma function for `x > 0` (Lanczos' approximation, g = 7 with
/// nine coefficients: about 15 significant digits).
pub fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 - x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    let t = x + G + 0.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Smallest magnitude the continued fractions below let a denominator take.
const TINY: f64 = 1e-300;

/// The regularized incomplete beta function I_x(a, b), by its continued fraction
/// (Abramowitz & Stegun 26.5.8, evaluated with Lentz's method), on the side of `x` where
/// it converges fast.
pub fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// The continued fraction of [`incomplete_beta`].
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    let floor = |v: f64| if v.abs() < TINY { TINY } else { v };
    let mut c = 1.0;
    let mut d = 1.0 / floor(1.0 - (a + b) * x / (a + 1.0));
    let mut h = d;
    for m in 1..=500 {
        let m = f64::from(m);
        let even = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        d = 1.0 / floor(1.0 + even * d);
        c = floor(1.0 + even / c);
        h *= d * c;
        let odd = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        d = 1.0 / floor(1.0 + odd * d);
        c = floor(1.0 + odd / c);
        let step = d * c;
        h *= step;
        if (step - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// The upper regularized incomplete gamma function Q(a, x) = 1 - P(a, x): by its series
/// below `a + 1`, by its continued fraction above (A&S 6.5.29 and 6.5.31).
pub fn incomplete_gamma_upper(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    let front = (-x + a * x.ln() - ln_gamma(a)).exp();
    if x < a + 1.0 {
        let (mut term, mut sum, mut ap) = (1.0 / a, 1.0 / a, a);
        for _ in 0..1000 {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * 1e-16 {
                break;
            }
        }
        1.0 - front * sum
    } else {
        let floor = |v: f64| if v.abs() < TINY { TINY } else { v };
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / TINY;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..=1000 {
            let i = f64::from(i);
            let an = -i * (i - a);
            b += 2.0;
            d = 1.0 / floor(an * d + b);
            c = floor(b + an / c);
            let step = d * c;
            h *= step;
            if (step - 1.0).abs() < 1e-16 {
                break;
            }
        }
        front * h
    }
}

/// The standard normal distribution's CDF Φ(z), from erfc(x) = Q(1/2, x²).
pub fn normal_cdf(z: f64) -> f64 {
    let tail = 0.5 * incomplete_gamma_upper(0.5, z * z / 2.0);
    if z < 0.0 {
        tail
    } else {
        1.0 - tail
    }
}

/// The standard normal quantile Φ⁻¹(p) for 0 < p < 1 (bisection on [`normal_cdf`]).
pub fn normal_quantile(p: f64) -> f64 {
    bisect(normal_cdf, p, -40.0, 40.0)
}

/// The CDF of Student's t distribution with `df` > 0 degrees of freedom:
/// P(T ≤ t) from I_{df/(df+t²)}(df/2, 1/2) (A&S 26.7.1).
pub fn t_cdf(t: f64, df: f64) -> f64 {
    if t.is_infinite() {
        return if t > 0.0 { 1.0 } else { 0.0 };
    }
    let tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t));
    if t > 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// The quantile of Student's t with `df` > 0 degrees of freedom: the t with
/// P(T ≤ t) = p, for 0 < p < 1.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    if p < 0.5 {
        return -t_quantile(1.0 - p, df);
    }
    let mut hi = 1.0;
    while t_cdf(hi, df) < p && hi < 1e300 {
        hi *= 2.0;
    }
    bisect(|t| t_cdf(t, df), p, 0.0, hi)
}

/// The x in [lo, hi] where the increasing `f` reaches `p`.
fn bisect(f: impl Fn(f64) -> f64, p: f64, mut lo: f64, mut hi: f64) -> f64 {
    for _ in 0..300 {
        let mid = lo + (hi - lo) / 2.0;
        if mid <= lo || mid >= hi {
            break;
        }
        if f(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo + (hi - lo) / 2.0
}

/// Mean and sample variance (n - 1 in the denominator) of at least two values.
fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var)
}

/// Welch's two-sample t-test of `new` against `base`, unequal variances (B. L. Welch,
/// "The generalization of 'Student's' problem when several different population
/// variances are involved", Biometrika 34, 1947), with the Welch-Satterthwaite degrees of
/// freedom.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Welch {
    /// t = (mean(new) - mean(base)) / standard error; ±infinity when both samples are
    /// constant and their means differ, 0 when they are constant and equal.
    pub t: f64,
    /// Welch-Satterthwaite degrees of freedom (n_base + n_new - 2 when both are constant).
    pub df: f64,
    /// Two-sided p-value.
    pub p_value: f64,
    /// Mean of the baseline.
    pub mean_base: f64,
    /// Mean of the new sample.
    pub mean_new: f64,
    /// Squared standard error of the baseline's mean (variance / n).
    pub se2_base: f64,
    /// Squared standard error of the new sample's mean.
    pub se2_new: f64,
}

/// [`Welch`]'s test; `None` unless both samples have at least two values, or when the
/// arithmetic overflows (values so large, near `f64::MAX`, that a mean, a variance or the
/// degrees of freedom is not finite, or the p-value is NaN).
pub fn welch(base: &[f64], new: &[f64]) -> Option<Welch> {
    if base.len() < 2 || new.len() < 2 {
        return None;
    }
    let (mb, vb) = mean_var(base);
    let (mn, vn) = mean_var(new);
    let (sb, sn) = (vb / base.len() as f64, vn / new.len() as f64);
    let se2 = sb + sn;
    let diff = mn - mb;
    let (t, df, p_value) = if se2 > 0.0 {
        let t = diff / se2.sqrt();
        let df = se2 * se2 / (sb * sb / (base.len() - 1) as f64 + sn * sn / (new.len() - 1) as f64);
        let p = incomplete_beta(df / 2.0, 0.5, df / (df + t * t));
        (t, df, p.clamp(0.0, 1.0))
    } else {
        let df = (base.len() + new.len() - 2) as f64;
        if diff == 0.0 {
            (0.0, df, 1.0)
        } else {
            (diff.signum() * f64::INFINITY, df, 0.0)
        }
    };
    let finite = [mb, mn, sb, sn, df].iter().all(|x| x.is_finite());
    if !finite || p_value.is_nan() || t.is_nan() {
        return None;
    }
    Some(Welch {
        t,
        df,
        p_value,
        mean_base: mb,
        mean_new: mn,
        se2_base: sb,
        se2_new: sn,
    })
}

impl Welch {
    /// The confidence interval at level 1 - `alpha` for the difference of means
    /// mean(new) - mean(base), with Welch's degrees of freedom: on logarithms, the
    /// logarithm of the ratio of geometric means. It excludes 0 exactly when the test
    /// rejects at `alpha`.
    pub fn difference_interval(&self, alpha: f64) -> (f64, f64) {
        let t = t_quantile(1.0 - alpha / 2.0, self.df);
        let half = t * (self.se2_base + self.se2_new).sqrt();
        let diff = self.mean_new - self.mean_base;
        (diff - half, diff + half)
    }

    /// Fieller's confidence interval at level 1 - `alpha` for the ratio of means
    /// mean(new) / mean(base) (E. C. Fieller, "Some problems in interval estimation",
    /// JRSS B 16, 1954; for two independent samples, with Welch's degrees of freedom).
    /// The set of ratios ρ with (mean_new - ρ mean_base)² ≤ t² (se²_new + ρ² se²_base):
    /// it excludes 1 exactly when the t-test rejects at `alpha`, and unlike dividing the
    /// difference's interval by the baseline's mean it counts the baseline's own noise.
    /// `None` when the interval is unbounded (the baseline's mean is not itself
    /// significantly away from zero) or its arithmetic overflows.
    pub fn ratio_interval(&self, alpha: f64) -> Option<(f64, f64)> {
        let t = t_quantile(1.0 - alpha / 2.0, self.df);
        let t2 = t * t;
        let a = self.mean_base * self.mean_base - t2 * self.se2_base;
        let b = -2.0 * self.mean_new * self.mean_base;
        let c = self.mean_new * self.mean_new - t2 * self.se2_new;
        if a <= 0.0 {
            return None;
        }
        let disc = (b * b - 4.0 * a * c).max(0.0).sqrt();
        let (lo, hi) = ((-b - disc) / (2.0 * a), (-b + disc) / (2.0 * a));
        (lo.is_finite() && hi.is_finite()).then_some((lo, hi))
    }
}

/// The Mann-Whitney U test of `new` against `base` (H. B. Mann and D. R. Whitney, "On a
/// test of whether one of two random variables is stochastically larger than the other",
/// Ann. Math. Statist. 18, 1947).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MannWhitney {
    /// U of the new sample: the pairs (base, new) where new is larger, ties counting one
    /// half. n_base × n_new / 2 when neither side tends to be larger.
    pub u: f64,
    /// Two-sided p-value.
    pub p_value: f64,
    /// Whether the p-value is from U's exact distribution (no value in both samples,
    /// n_base × n_new at most [`EXACT_PAIRS`]; as SciPy's `method="exact"`) or from the
    /// normal approximation (tie and continuity corrected).
    pub exact: bool,
}

/// Up to this many pairs (n_base × n_new), the Mann-Whitney p-value and the
/// Hodges-Lehmann interval use U's exact distribution.
pub const EXACT_PAIRS: usize = 2500;

/// How many of the C(m+n, m) orderings of m and n distinct values give each U = 0..=m·n
/// (the count of pairs where one of the n is above one of the m). Counts as f64: they
/// only add, so the relative error stays at rounding.
fn u_counts(m: usize, n: usize) -> Vec<f64> {
    let size = m * n + 1;
    // prev[j]: the counts for (i - 1, j); the largest value either belongs to the n side
    // (it is above all i of the m side: U grows by i) or to the m side (U unchanged).
    let mut prev: Vec<Vec<f64>> = (0..=n)
        .map(|_| {
            let mut v = vec![0.0; size];
            v[0] = 1.0;
            v
        })
        .collect();
    for i in 1..=m {
        let mut cur: Vec<Vec<f64>> = Vec::with_capacity(n + 1);
        let mut first = vec![0.0; size];
        first[0] = 1.0;
        cur.push(first);
        for j in 1..=n {
            let mut v = prev[j].clone();
            for u in i..size {
                v[u] += cur[j - 1][u - i];
            }
            cur.push(v);
        }
        prev = cur;
    }
    prev.pop().unwrap_or_default()
}

/// [`MannWhitney`]'s test; `None` if either sample is empty.
pub fn mann_whitney(base: &[f64], new: &[f64]) -> Option<MannWhitney> {
    let (m, n) = (base.len(), new.len());
    if m == 0 || n == 0 {
        return None;
    }
    let (mut u, mut cross_ties) = (0.0, false);
    for b in base {
        for x in new {
            u += match x.total_cmp(b) {
                std::cmp::Ordering::Greater => 1.0,
                std::cmp::Ordering::Equal => {
                    cross_ties = true;
                    0.5
                }
                std::cmp::Ordering::Less => 0.0,
            };
        }
    }
    let mut pooled: Vec<f64> = base.iter().chain(new).copied().collect();
    pooled.sort_by(f64::total_cmp);
    let mut tie_sum = 0.0;
    let mut i = 0;
    while i < pooled.len() {
        let j = pooled[i..].iter().take_while(|&&v| v == pooled[i]).count();
        let t = j as f64;
        tie_sum += t * t * t - t;
        i += j;
    }
    let mn = (m * n) as f64;
    if !cross_ties && m * n <= EXACT_PAIRS {
        let counts = u_counts(m, n);
        let total: f64 = counts.iter().sum();
        let k = u as usize;
        let below: f64 = counts[..=k].iter().sum::<f64>() / total;
        let above: f64 = counts[k..].iter().sum::<f64>() / total;
        return Some(MannWhitney {
            u,
            p_value: (2.0 * below.min(above)).min(1.0),
            exact: true,
        });
    }
    let big_n = (m + n) as f64;
    let var = mn / 12.0 * ((big_n + 1.0) - tie_sum / (big_n * (big_n - 1.0)));
    let p_value = if var > 0.0 {
        let z = ((u - mn / 2.0).abs() - 0.5).max(0.0) / var.sqrt();
        (2.0 * (1.0 - normal_cdf(z))).min(1.0)
    } else {
        1.0
    };
    Some(MannWhitney {
        u,
        p_value,
        exact: false,
    })
}

/// The smallest two-sided p-value the exact Mann-Whitney test can give with `m` and `n`
/// values: 2 / C(m+n, m), at most 1. Below `alpha`, no difference can be significant.
pub fn mann_whitney_min_p(m: usize, n: usize) -> f64 {
    // C(m+n, m) as a product of ratios, in f64 (it only needs to be compared with alpha).
    let k = m.min(n);
    let mut c = 1.0;
    for i in 1..=k {
        c *= (m + n + 1 - i) as f64 / i as f64;
    }
    (2.0 / c).min(1.0)
}

/// A confidence interval for a shift between two samples, with its point estimate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShiftInterval {
    /// The Hodges-Lehmann estimate: the median of the pairwise differences new - base.
    pub estimate: f64,
    /// Lower end.
    pub low: f64,
    /// Upper end.
    pub high: f64,
    /// The confidence the interval has: exactly 1 - 2 P(U < k) from U's exact
    /// distribution (at least 1 - alpha), or the nominal 1 - alpha from the normal one.
    pub confidence: f64,
}

/// The distribution-free confidence interval for the shift of `new` against `base` that
/// goes with the Mann-Whitney test (J. L. Hodges and E. L. Lehmann, "Estimates of
/// location based on rank tests", Ann. Math. Statist. 34, 1963; D. F. Bauer, JASA 67,
/// 1972): order the m·n differences new_j - base_i; the interval runs from the k-th
/// smallest to the k-th largest, k the largest with P(U < k) ≤ alpha/2. `None` if a
/// sample is empty or even the widest interval (k = 1) has less than 1 - alpha.
pub fn hodges_lehmann(base: &[f64], new: &[f64], alpha: f64) -> Option<ShiftInterval> {
    let (m, n) = (base.len(), new.len());
    if m == 0 || n == 0 {
        return None;
    }
    let mut d: Vec<f64> = base
        .iter()
        .flat_map(|b| new.iter().map(move |x| x - b))
        .collect();
    d.sort_by(f64::total_cmp);
    let pairs = d.len();
    let (k, confidence) = if pairs <= EXACT_PAIRS {
        let counts = u_counts(m, n);
        let total: f64 = counts.iter().sum();
        // P(U < k) for k = 1, 2, ...: the largest k with P(U < k) <= alpha / 2.
        let mut below = 0.0;
        let mut k = 0;
        for c in &counts {
            if (below + c) / total > alpha / 2.0 {
                break;
            }
            below += c;
            k += 1;
        }
        (k, 1.0 - 2.0 * below / total)
    } else {
        let mn = pairs as f64;
        let z = normal_quantile(1.0 - alpha / 2.0);
        let k = (mn / 2.0 - z * (mn * (m + n + 1) as f64 / 12.0).sqrt()).floor();
        (k.max(0.0) as usize, 1.0 - alpha)
    };
    if k == 0 {
        return None;
    }
    let k = k.min(pairs.div_ceil(2));
    Some(ShiftInterval {
        estimate: median(&d)?,
        low: d[k - 1],
        high: d[pairs - k],
        confidence,
    })
}

/// Dixon's Q at the 95% level for 3..=10 values: the critical r10 ratio (gap of the
/// extreme value to its neighbour over the range), index n - 3 (R. B. Dean and W. J.
/// Dixon, "Simplified statistics for small numbers of observations", Anal. Chem. 23,
/// 1951; the values from D. B. Rorabacher, "Statistical treatment for rejection of deviant
/// values: critical values of Dixon's 'Q' parameter and related subrange ratios at the 95%
/// confidence level", Anal. Chem. 63, 1991, table II).
const DIXON_Q95: [f64; 8] = [0.970, 0.829, 0.710, 0.625, 0.568, 0.526, 0.493, 0.466];

/// A value closer to the rest than this fraction of the median's magnitude is never an
/// outlier: quantized figures (HDR percentiles, 3 significant digits) repeat exactly and
/// step by a fraction of a percent, and such a step is no sign of a second lump.
pub const OUTLIER_MIN_RELATIVE: f64 = 0.01;

/// Whether the values have an outlier: a sign that they are not one normal-looking lump.
/// For 3 to 10 values, Dixon's Q test at 95% ([`DIXON_Q95`]), which a normal sample fails
/// 5% of the time; for more, a modified z-score 0.6745 |x - median| / MAD over 3.5 (B.
/// Iglewicz and D. C. Hoaglin, "How to detect and handle outliers", 1993). Either way the
/// value must also stand more than [`OUTLIER_MIN_RELATIVE`] of the median away (from its
/// neighbour for Dixon, from the median otherwise), so a MAD or a range of zero is no
/// outlier by itself. Fewer than three values have none; non-finite values are ignored.
pub fn has_outlier(values: &[f64]) -> bool {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    let n = v.len();
    if n < 3 {
        return false;
    }
    v.sort_by(f64::total_cmp);
    let Some(med) = median(&v) else {
        return false;
    };
    let tolerance = OUTLIER_MIN_RELATIVE * med.abs();
    if n <= 10 {
        let range = v[n - 1] - v[0];
        if !(range > 0.0 && range.is_finite()) {
            return false;
        }
        let critical = DIXON_Q95[n - 3];
        let gaps = [v[1] - v[0], v[n - 1] - v[n - 2]];
        return gaps.iter().any(|&g| g / range > critical && g > tolerance);
    }
    let dev: Vec<f64> = v.iter().map(|x| (x - med).abs()).collect();
    let mad = median(&dev).unwrap_or(0.0);
    dev.iter()
        .any(|&d| d > tolerance && (mad == 0.0 || 0.6745 * d / mad > 3.5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_that_stands_for_several_is_the_lower_middle_one() {
        use super::median_index;
        assert_eq!(median_index(&[]), None);
        assert_eq!(median_index(&[5.0]), Some(0));
        assert_eq!(median_index(&[3.0, 1.0, 2.0]), Some(2));
        // An even count: the lower of the two middle runs, never their average.
        assert_eq!(median_index(&[4.0, 1.0, 3.0, 2.0]), Some(3));
        assert_eq!(median_index(&[9.0, 7.0]), Some(1));
    }

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

    // Reference values below come from SciPy 1.17 (scipy.stats: t.cdf, t.ppf, norm.cdf,
    // norm.ppf, ttest_ind(equal_var=False), mannwhitneyu(method="exact"/"asymptotic")).
    fn close(got: f64, want: f64, rel: f64) -> bool {
        (got - want).abs() <= rel * want.abs().max(1e-300)
    }

    #[test]
    fn the_t_and_normal_distributions_match_scipy() {
        assert!(close(t_cdf(-2.1, 3.3), 0.059_143_040_145_953_88, 1e-9));
        assert!(close(t_cdf(1.0, 1.0), 0.75, 1e-12));
        assert!(close(t_quantile(0.975, 4.0), 2.776_445_105_197_793_4, 1e-9));
        assert!(close(t_quantile(0.975, 7.5), 2.333_039_626_864_974, 1e-9));
        assert!(close(t_quantile(0.995, 2.2), 8.534_715_279_807_727, 1e-9));
        assert!(close(
            t_quantile(0.025, 4.0),
            -2.776_445_105_197_793_4,
            1e-9
        ));
        assert!(close(normal_cdf(1.96), 0.975_002_104_851_779_5, 1e-12));
        assert!(close(normal_cdf(-3.2), 0.000_687_137_937_915_847_1, 1e-9));
        assert!(close(normal_quantile(0.975), 1.959_963_984_540_054, 1e-9));
        assert!(close(
            ln_gamma(0.5),
            std::f64::consts::PI.sqrt().ln(),
            1e-12
        ));
        assert!(close(ln_gamma(10.0), 362_880f64.ln(), 1e-12));
        // Far in the tail the t quantile approaches the table row's normal one.
        assert!((t_quantile(0.975, 1e7) - 1.959_963_984_540_054).abs() < 1e-5);
        // The table of two-sided 95% quantiles agrees with the function to its digits.
        for (i, &q) in T95.iter().enumerate() {
            assert!((t_quantile(0.975, (i + 1) as f64) - q).abs() < 6e-4, "{i}");
        }
    }

    #[test]
    fn welch_matches_scipy_on_a_worked_example() {
        let base = [19.1, 21.4, 20.3, 22.5, 18.9, 20.7];
        let new = [23.2, 24.1, 21.9, 25.3, 22.8];
        let w = welch(&base, &new).unwrap();
        assert!(close(w.t, 3.691_501_173_723_239, 1e-12), "{w:?}");
        assert!(close(w.df, 8.808_668_810_495_634, 1e-12), "{w:?}");
        assert!(close(w.p_value, 0.005_173_859_408_280_934, 1e-8), "{w:?}");
        // Swapping the samples flips t and keeps p.
        let back = welch(&new, &base).unwrap();
        assert!(close(back.t, -w.t, 1e-12) && close(back.p_value, w.p_value, 1e-12));
        assert!(welch(&[1.0], &new).is_none());
    }

    #[test]
    fn fiellers_interval_solves_its_equation_and_agrees_with_the_test() {
        let base = [19.1, 21.4, 20.3, 22.5, 18.9, 20.7];
        let new = [23.2, 24.1, 21.9, 25.3, 22.8];
        let w = welch(&base, &new).unwrap();
        let (lo, hi) = w.ratio_interval(0.05).unwrap();
        assert!(close(lo, 1.053_630_056_500_960_2, 1e-9), "{lo}");
        assert!(close(hi, 1.245_866_920_097_856_5, 1e-9), "{hi}");
        let ratio = w.mean_new / w.mean_base;
        assert!(lo < ratio && ratio < hi);
        // The ends are where (mean_new - r mean_base)^2 = t^2 (se2_new + r^2 se2_base).
        let t = t_quantile(0.975, w.df);
        for r in [lo, hi] {
            let lhs = (w.mean_new - r * w.mean_base).powi(2);
            let rhs = t * t * (w.se2_new + r * r * w.se2_base);
            assert!(close(lhs, rhs, 1e-9), "{lhs} {rhs}");
        }
        // At alpha = p the interval touches 1; wider alpha excludes it, smaller includes it.
        let (lo, _) = w.ratio_interval(w.p_value * 1.01).unwrap();
        assert!(lo > 1.0);
        let (lo, _) = w.ratio_interval(w.p_value * 0.99).unwrap();
        assert!(lo < 1.0);
        // A baseline indistinguishable from zero gives no bounded interval.
        let w = welch(&[-1.0, 1.0, 0.5], &[3.0, 4.0, 5.0]).unwrap();
        assert!(w.ratio_interval(0.05).is_none());
    }

    #[test]
    fn constant_samples_are_certain_either_way() {
        let w = welch(&[2.0, 2.0, 2.0], &[1.0, 1.0, 1.0]).unwrap();
        assert_eq!((w.t, w.p_value), (f64::NEG_INFINITY, 0.0));
        assert_eq!(w.ratio_interval(0.05), Some((0.5, 0.5)));
        let w = welch(&[2.0, 2.0], &[2.0, 2.0, 2.0]).unwrap();
        assert_eq!((w.t, w.p_value), (0.0, 1.0));
    }

    #[test]
    #[allow(clippy::approx_constant)] // 3.14 is a sample value, not pi
    fn mann_whitney_matches_scipy_exact_and_asymptotic() {
        let x = [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30];
        let y = [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29];
        // scipy's U is of its first sample: here the new one.
        let t = mann_whitney(&y, &x).unwrap();
        assert!(t.exact);
        assert_eq!(t.u, 58.0);
        assert!(close(t.p_value, 0.135_911_147_675_853_55, 1e-10), "{t:?}");
        let t = mann_whitney(&[4.0, 5.0, 6.0], &[1.0, 2.0, 3.0]).unwrap();
        assert_eq!((t.u, t.exact), (0.0, true));
        assert!(close(t.p_value, 0.1, 1e-12));
        let t = mann_whitney(&[5.0, 6.0, 7.0, 11.5, 4.0], &[10.0, 12.0, 11.0, 13.0, 9.0]).unwrap();
        assert_eq!(t.u, 22.0);
        assert!(close(t.p_value, 0.055_555_555_555_555_55, 1e-10), "{t:?}");
        // Ties: the normal approximation with tie and continuity corrections.
        let t = mann_whitney(
            &[3.0, 3.0, 4.0, 6.0, 7.0, 8.0, 8.0],
            &[1.0, 2.0, 2.0, 3.0, 4.0, 5.0],
        )
        .unwrap();
        assert_eq!((t.u, t.exact), (6.5, false));
        assert!(close(t.p_value, 0.043_433_963_105_760_19, 1e-8), "{t:?}");
        assert!(mann_whitney(&[], &[1.0]).is_none());
    }

    #[test]
    fn the_exact_u_distribution_is_the_count_of_orderings() {
        // 5 and 5: C(10, 5) = 252 orderings, symmetric, starting 1, 1, 2, 3, 5.
        let c = u_counts(5, 5);
        assert_eq!(c.len(), 26);
        assert_eq!(c.iter().sum::<f64>(), 252.0);
        assert_eq!(&c[..5], &[1.0, 1.0, 2.0, 3.0, 5.0]);
        for u in 0..26 {
            assert_eq!(c[u], c[25 - u]);
        }
        // By brute force over every way to pick which 2 of 5 values are the n side.
        let c = u_counts(3, 2);
        let mut brute = [0.0; 7];
        for a in 0..5 {
            for b in a + 1..5 {
                // Values 0..5; the n side holds a and b; U counts m-side values below them.
                let below = |v: usize| (0..v).filter(|&w| w != a && w != b).count();
                brute[below(a) + below(b)] += 1.0;
            }
        }
        assert_eq!(c, brute);
        assert!(close(mann_whitney_min_p(3, 3), 0.1, 1e-12));
        assert!(close(mann_whitney_min_p(5, 5), 2.0 / 252.0, 1e-12));
        assert_eq!(mann_whitney_min_p(1, 1), 1.0);
    }

    #[test]
    fn the_hodges_lehmann_interval_takes_the_right_order_statistics() {
        // 5 and 5 at alpha 0.05: P(U <= 2) = 4/252 <= 0.025 < P(U <= 3) = 7/252, so the
        // interval runs from the 3rd smallest to the 3rd largest of the 25 differences.
        let base = [10.0, 20.0, 30.0, 40.0, 50.0];
        let new = [1.0, 2.0, 3.0, 4.0, 5.0];
        let s = hodges_lehmann(&base, &new, 0.05).unwrap();
        let mut d: Vec<f64> = base
            .iter()
            .flat_map(|b| new.iter().map(move |x| x - b))
            .collect();
        d.sort_by(f64::total_cmp);
        assert_eq!((s.low, s.high, s.estimate), (d[2], d[22], d[12]));
        assert!(close(s.confidence, 1.0 - 8.0 / 252.0, 1e-12));
        // 3 and 3 cannot reach 95%: no interval.
        assert!(hodges_lehmann(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], 0.05).is_none());
        // ... but can reach 90% (the full range).
        let s = hodges_lehmann(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], 0.1).unwrap();
        assert_eq!((s.low, s.high), (1.0, 5.0));
    }

    /// A deterministic generator of normal deviates (xorshift64* and Box-Muller).
    struct Normal(u64);
    impl Normal {
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            ((self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }
        fn next(&mut self, mean: f64, sd: f64) -> f64 {
            let (u, v) = (self.uniform(), self.uniform());
            mean + sd * (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        }
    }

    #[test]
    fn the_intervals_cover_the_true_ratio_as_often_as_they_claim() {
        let mut g = Normal(0x9e37_79b9_7f4a_7c15);
        let trials = 4000;
        let (mut fieller, mut hl, mut hl_claim) = (0, 0, 0.0);
        for _ in 0..trials {
            // Means 100 and 80 (ratio 0.8), unequal spreads, 5 and 6 runs.
            let base: Vec<f64> = (0..5).map(|_| g.next(100.0, 6.0)).collect();
            let new: Vec<f64> = (0..6).map(|_| g.next(80.0, 2.0)).collect();
            let (lo, hi) = welch(&base, &new).unwrap().ratio_interval(0.05).unwrap();
            fieller += usize::from(lo <= 0.8 && 0.8 <= hi);
            // A pure shift of log values (log-normal runs): true ratio 0.8.
            let lb: Vec<f64> = (0..5).map(|_| g.next(0.0, 0.05)).collect();
            let ln: Vec<f64> = (0..6).map(|_| g.next(0.8f64.ln(), 0.05)).collect();
            let s = hodges_lehmann(&lb, &ln, 0.05).unwrap();
            hl += usize::from(s.low <= 0.8f64.ln() && 0.8f64.ln() <= s.high);
            hl_claim = s.confidence;
        }
        let fieller = fieller as f64 / trials as f64;
        let hl = hl as f64 / trials as f64;
        // Binomial standard error at 4000 trials is about 0.0035.
        assert!(
            (0.935..=0.965).contains(&fieller),
            "Fieller covered {fieller}"
        );
        assert!(hl_claim >= 0.95);
        assert!(
            (hl_claim - 0.015..=hl_claim + 0.015).contains(&hl),
            "HL covered {hl} of {hl_claim}"
        );
    }

    #[test]
    fn outliers_are_found_by_dixons_q_up_to_ten_values() {
        assert!(!has_outlier(&[10.0, 10.5, 9.8, 10.2, 9.9]));
        assert!(has_outlier(&[10.0, 10.5, 9.8, 10.2, 30.0]));
        assert!(!has_outlier(&[1.0, 100.0]));
        assert!(!has_outlier(&[3.0, 3.0, 3.0]));
        // Three values: the gap must exceed 97% of the range.
        assert!(!has_outlier(&[10.0, 10.4, 20.0])); // Q = 0.96
        assert!(has_outlier(&[10.0, 10.2, 20.0])); // Q = 0.98
        assert!(has_outlier(&[20.0, 10.2, 10.0]));
        assert!(!has_outlier(&[10.0, 10.3, 10.7])); // an even spread
                                                    // Five values: 0.710.
        assert!(!has_outlier(&[10.0, 10.1, 10.2, 10.3, 10.96])); // Q = 0.69
        assert!(has_outlier(&[10.0, 10.1, 10.2, 10.3, 11.1])); // Q = 0.73
                                                               // Ten values: 0.466.
        let mut ten: Vec<f64> = (0..9).map(|i| 100.0 + f64::from(i)).collect();
        ten.push(115.0); // gap 7 of range 15: 0.467
        assert!(has_outlier(&ten));
        ten[9] = 114.9; // 6.9 of 14.9: 0.463
        assert!(!has_outlier(&ten));
    }

    #[test]
    fn a_step_within_the_relative_tolerance_is_no_outlier() {
        // HDR-quantized p50s repeat: two equal and one a step (0.8%) away.
        assert!(!has_outlier(&[1000.0, 1000.0, 1008.0]));
        assert!(!has_outlier(&[1000.0, 1000.0, 1000.0, 1000.0, 992.0]));
        assert!(has_outlier(&[1000.0, 1000.0, 1100.0]));
        // Beyond ten values, the modified z-score; a MAD of zero flags only a value more
        // than the tolerance away.
        let mut many = vec![5000.0; 12];
        many[3] = 5040.0;
        assert!(!has_outlier(&many));
        many[3] = 5100.0;
        assert!(has_outlier(&many));
        let mut spread: Vec<f64> = (0..15).map(|i| 100.0 + f64::from(i % 5)).collect();
        assert!(!has_outlier(&spread));
        spread[0] = 140.0;
        assert!(has_outlier(&spread));
    }

    #[test]
    fn non_finite_or_huge_values_do_not_make_an_outlier_test_panic() {
        assert!(!has_outlier(&[f64::MAX, -f64::MAX, 0.0]));
        assert!(!has_outlier(&[f64::NAN, 1.0, 2.0]));
        assert!(!has_outlier(&[1e308, 1.5e308, 1.7e308]));
    }

    #[test]
    fn normal_samples_are_rarely_called_outliers() {
        // Dixon's Q at 95%: 5% of normal samples of 3..=10 (this checks the table); the
        // modified z-score beyond that, about 9% to 13%.
        let mut g = Normal(0x2545_f491_4f6c_dd1d);
        let trials = 20_000;
        for n in [3usize, 4, 5, 6, 8, 10, 11, 15, 20, 30] {
            let flagged = (0..trials)
                .filter(|_| {
                    let v: Vec<f64> = (0..n).map(|_| g.next(1000.0, 20.0)).collect();
                    has_outlier(&v)
                })
                .count() as f64
                / trials as f64;
            // Binomial standard error at 20000 trials: about 0.0015.
            if n <= 10 {
                assert!((0.04..=0.06).contains(&flagged), "n = {n}: {flagged}");
            } else {
                assert!(flagged <= 0.15, "n = {n}: {flagged}");
            }
        }
    }

    #[test]
    fn the_standing_run_is_the_last_that_stopped_the_others_else_the_median() {
        assert_eq!(standing_run(&[], false), None);
        assert_eq!(standing_run(&[5.0, 1.0, 3.0], false), Some(2));
        assert_eq!(
            standing_run(&[5.0, 1.0, 3.0, 9.0], false),
            Some(2),
            "the lower middle"
        );
        assert_eq!(standing_run(&[5.0, 1.0, 3.0], true), Some(2));
        assert_eq!(
            standing_run(&[5.0, 3.0, 1.0], true),
            Some(2),
            "the last, not the median"
        );
        assert_eq!(standing_run(&[5.0, 3.0, 1.0], false), Some(1));
    }
}
