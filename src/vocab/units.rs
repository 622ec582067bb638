//! Parsing and printing sizes, durations and rates.
//!
//! Sizes on the command line are binary (`4K` = 4096 bytes, as in iperf3 and dd); rates
//! in tables are SI (`Gbit/s` = 10^9 bit/s, `GB/s` = 10^9 bytes/s), as in iperf3.
//! JSON carries exact base units and never goes through this module's printers.

use std::time::Duration;

/// The most a figure that came from elsewhere (a peer's report, a file) may be before it
/// is refused as no measurement: far beyond any link, CPU or clock of today, so nothing
/// real is refused, and nothing forged prints as a 300-digit number.
pub mod plausible {
    /// Throughput: 1 Pbit/s.
    pub const BITS_PER_SECOND: f64 = 1e15;
    /// Message, request or connection rate: 10 billion per second.
    pub const PER_SECOND: f64 = 1e10;
    /// A latency: one hour, in nanoseconds.
    pub const LATENCY_NS: f64 = 3.6e12;
    /// Round trips (or messages) counted in one test: a billion a second for an hour.
    pub const COUNT: u64 = 3_600_000_000_000;
    /// CPU time over one test, summed over a host's CPUs: a day on 4096 of them.
    pub const CPU_SECONDS: f64 = 86_400.0 * 4096.0;
}

/// Parse one size: a number with an optional binary suffix `K`, `M`, `G` (or `KiB`, `MiB`,
/// `GiB`, any case) and an optional trailing `B`. `1.5M` is allowed if it is whole bytes.
///
/// # Errors
/// A message naming the bad text and the accepted forms.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (num, mult) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 1u64 << 10),
        Some('m') => (&body[..body.len() - 1], 1 << 20),
        Some('g') => (&body[..body.len() - 1], 1 << 30),
        _ => (body, 1),
    };
    let bad = || {
        format!("invalid size '{text}': use a number of bytes with an optional K, M or G suffix (binary), e.g. 64, 4K, 1M")
    };
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    if let Ok(n) = num.parse::<u64>() {
        return n
            .checked_mul(mult)
            .ok_or_else(|| format!("size '{text}' is too large"));
    }
    let f: f64 = num.parse().map_err(|_| bad())?;
    let bytes = f * mult as f64;
    if bytes.fract() != 0.0 || !bytes.is_finite() || bytes > u64::MAX as f64 {
        return Err(format!("size '{text}' is not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// Parse a size list: `1,64,4K` or a range `1..64M` (powers of two from the start,
/// doubling, ending at the end value), or a mix: `1..1K,64K`.
///
/// # Errors
/// A message naming the bad element.
pub fn parse_size_list(text: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((a, b)) = part.split_once("..") {
            let (lo, hi) = (parse_size(a)?, parse_size(b)?);
            if lo == 0 || lo > hi {
                return Err(format!("invalid size range '{part}': write LOW..HIGH with 0 < LOW <= HIGH, e.g. 1..64M"));
            }
            let mut s = lo;
            while s < hi {
                out.push(s);
                s = s.saturating_mul(2);
            }
            out.push(hi);
        } else {
            out.push(parse_size(part)?);
        }
    }
    if out.is_empty() {
        return Err("empty size list: give at least one size, e.g. --size 64K".into());
    }
    out.dedup();
    Ok(out)
}

/// Parse a duration: seconds as a number (`2`, `0.5`) or with a unit (`500ms`, `2s`, `1m`).
///
/// # Errors
/// A message naming the bad text.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        format!("invalid duration '{text}': use seconds (2, 0.5) or a unit (500ms, 2s, 1m)")
    })?;
    if v < 0.0 {
        return Err(format!(
            "invalid duration '{text}': must be positive (2, 0.5, 500ms)"
        ));
    }
    if !v.is_finite() || v * scale > 1e7 {
        return Err(format!(
            "invalid duration '{text}': must be between 0 and 10^7 seconds"
        ));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

/// Parse a rate per second: `50000`, `50k`, `1.5M` (SI multipliers).
///
/// # Errors
/// A message naming the bad text.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('m' | 'M') => (&t[..t.len() - 1], 1e6),
        Some('g' | 'G') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v * mult <= 1e9 => Ok(v * mult),
        _ => Err(format!(
            "invalid rate '{text}': give a positive number per second up to 1G, e.g. 10000, 50k, 1.5M"
        )),
    }
}

/// A byte count for people: `64 B`, `4 KiB`, `1 MiB`, `1.5 MiB`.
pub fn format_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[i])
    } else {
        format!("{} {}", sig3(v), UNITS[i])
    }
}

/// Three significant digits without a trailing `.0`.
fn sig3(v: f64) -> String {
    let s = if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    s
}

fn si(v: f64, unit: &str) -> String {
    const PREFIX: [&str; 5] = ["", "k", "M", "G", "T"];
    let mut x = v;
    let mut i = 0;
    while x.abs() >= 1000.0 && i < PREFIX.len() - 1 {
        x /= 1000.0;
        i += 1;
    }
    format!("{} {}{unit}", sig3(x), PREFIX[i])
}

/// A throughput in the unit the view asks for.
pub fn throughput(bits_per_second: f64, units: crate::vocab::Units) -> String {
    let bits = || format_bits_per_second(bits_per_second);
    let bytes = || format_bytes_per_second(bits_per_second / 8.0);
    match units {
        crate::vocab::Units::Bits => bits(),
        crate::vocab::Units::Bytes => bytes(),
        crate::vocab::Units::Both => format!("{} ({})", bits(), bytes()),
    }
}

/// A bit rate in SI units: `38.2 Gbit/s`.
pub fn format_bits_per_second(bps: f64) -> String {
    si(bps, "bit/s")
}

/// A byte rate in binary units, as sizes are printed: `3.11 GiB/s` (1 GiB = 2^30 B).
pub fn format_bytes_per_second(bps: f64) -> String {
    const UNITS: [&str; 5] = ["B/s", "KiB/s", "MiB/s", "GiB/s", "TiB/s"];
    let (mut v, mut i) = (bps, 0);
    while v.abs() >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{} {}", sig3(v), UNITS[i])
}

/// A count rate in SI units: `1.23 M/s`.
pub fn format_per_second(v: f64) -> String {
    si(v, "/s").replace(" /s", "/s")
}

/// Integer nanoseconds for people: `645 ns`, `21.8 µs`, `1.08 ms`, `2.50 s`.
pub fn format_ns(ns: u64) -> String {
    if ns < 1000 {
        format!("{ns} ns")
    } else {
        format_seconds(ns as f64 / 1e9)
    }
}

/// A duration in seconds for people: `1.50 s`, `250 ms`.
pub fn format_seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{} s", sig3(s))
    } else if s >= 1e-3 {
        format!("{} ms", sig3(s * 1e3))
    } else {
        format!("{} µs", sig3(s * 1e6))
    }
}

/// Seconds since 1970 as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, proleptic Gregorian).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A moment as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (UTC, microseconds).
pub fn utc_micros(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let whole = utc(d.as_secs());
    format!("{}.{:06}Z", whole.trim_end_matches('Z'), d.subsec_micros())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_printed_in_utc() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_795_000_000), "2026-11-18T11:06:40Z");
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_micros(1_795_000_000_000_042);
        assert_eq!(utc_micros(t), "2026-11-18T11:06:40.000042Z");
    }

    #[test]
    fn sizes_are_binary_with_any_case_suffix() {
        assert_eq!(parse_size("64").unwrap(), 64);
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("4kib").unwrap(), 4096);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("64MB").unwrap(), 64 << 20);
        assert_eq!(parse_size("1.5K").unwrap(), 1536);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
    }

    #[test]
    fn bad_sizes_are_rejected_with_the_text() {
        for bad in ["abc", "", "K", "-1", "1.3", "4X", "99999999999999999999G"] {
            let e = parse_size(bad).unwrap_err();
            assert!(e.contains(bad) || bad.is_empty(), "{e}");
        }
    }

    #[test]
    fn ranges_double_from_low_to_high() {
        assert_eq!(parse_size_list("1..8").unwrap(), vec![1, 2, 4, 8]);
        assert_eq!(parse_size_list("1K..3K").unwrap(), vec![1024, 2048, 3072]);
        assert_eq!(parse_size_list("1,64,4K").unwrap(), vec![1, 64, 4096]);
        assert_eq!(parse_size_list("1..64M").unwrap().len(), 27);
        assert!(parse_size_list("8..1").is_err());
        assert!(parse_size_list("0..8").is_err());
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("0.25s").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert!(parse_duration("fast").is_err());
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("0ms").unwrap(), Duration::ZERO);
        for negative in ["-1", "-0.5s", "-3ms"] {
            let e = parse_duration(negative).unwrap_err();
            assert!(e.contains("must be positive"), "{e}");
        }
        // At most 10^7 seconds, whatever the unit says.
        assert_eq!(
            parse_duration("1e7").unwrap(),
            Duration::from_secs(10_000_000)
        );
        assert_eq!(
            parse_duration("166666m").unwrap(),
            Duration::from_secs(9_999_960)
        );
        for huge in ["10000001", "166667m", "1.1e10ms", "inf", "NaN"] {
            let e = parse_duration(huge).unwrap_err();
            assert!(e.contains("between 0 and 10^7 seconds"), "{huge}: {e}");
        }
    }

    #[test]
    fn human_units() {
        assert_eq!(format_bytes(64), "64 B");
        assert_eq!(format_bytes(4096), "4 KiB");
        assert_eq!(format_bytes(1 << 20), "1 MiB");
        assert_eq!(format_bytes(1536), "1.50 KiB");
        assert_eq!(format_bits_per_second(38_212_000_000.0), "38.2 Gbit/s");
        assert_eq!(format_bytes_per_second(999.0), "999 B/s");
        assert_eq!(format_bytes_per_second(1e9), "954 MiB/s");
        assert_eq!(
            format_bytes_per_second(3.0 * (1u64 << 30) as f64),
            "3.00 GiB/s"
        );
        assert_eq!(format_bytes_per_second(1536.0), "1.50 KiB/s");
        assert_eq!(format_per_second(1_230_000.0), "1.23 M/s");
        assert_eq!(format_seconds(0.25), "250 ms");
    }
}
