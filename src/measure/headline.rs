//! A result's headline figure, typed: the one number `compare` tests, the rankings rank
//! and a summary leads with. Each kind of result names its own ([`crate::workload::Spec`]
//! for the measuring workloads), so nothing else needs to know which kind it reads.

use crate::vocab::units::plausible;

/// What a headline figure counts, and so how it reads and how large it can be.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Quantity {
    /// Payload bits per second.
    Throughput,
    /// Events (messages, round trips, connections, requests) per second.
    Rate,
    /// A latency, in nanoseconds.
    Latency,
}

impl Quantity {
    /// A value of this quantity as a table shows it: throughput in `units`, latency in
    /// time units, rates per second.
    pub fn format(self, v: f64, units: crate::vocab::Units) -> String {
        match self {
            Quantity::Throughput => crate::vocab::units::throughput(v, units),
            Quantity::Latency => crate::vocab::units::format_ns(v.round().max(0.0) as u64),
            Quantity::Rate => crate::vocab::units::format_per_second(v),
        }
    }
}

/// A headline figure: its name in the JSON document (with its unit), what it counts, and
/// which way is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Headline {
    /// The figure's key, with its unit: `bits_per_second`, `messages_per_second`,
    /// `round_trip_p50_ns`, `requests_per_second`, ...
    pub name: &'static str,
    /// What it counts.
    pub quantity: Quantity,
    /// Whether a larger value is better (throughput and rates: yes; latency: no).
    pub higher_is_better: bool,
}

impl Headline {
    /// A throughput figure (more is better).
    pub const fn throughput(name: &'static str) -> Headline {
        Headline {
            name,
            quantity: Quantity::Throughput,
            higher_is_better: true,
        }
    }

    /// A rate of events (more is better).
    pub const fn rate(name: &'static str) -> Headline {
        Headline {
            name,
            quantity: Quantity::Rate,
            higher_is_better: true,
        }
    }

    /// A latency (less is better).
    pub const fn latency(name: &'static str) -> Headline {
        Headline {
            name,
            quantity: Quantity::Latency,
            higher_is_better: false,
        }
    }

    /// The most a measurement of this figure can be: a value beyond it is not one (a
    /// file edited by hand, or broken).
    pub fn most(self) -> f64 {
        match self.quantity {
            Quantity::Throughput => plausible::BITS_PER_SECOND,
            Quantity::Rate => plausible::PER_SECOND,
            Quantity::Latency => plausible::LATENCY_NS,
        }
    }

    /// Why `values` (one per run) cannot be measurements of this figure: the first one
    /// that is negative, not a number or beyond [`Headline::most`].
    pub fn implausible(self, values: &[f64]) -> Option<String> {
        let most = self.most();
        values
            .iter()
            .find(|&&v| !(0.0..=most).contains(&v))
            .map(|v| {
                format!(
                    "a run's figure is out of range ({v:e}, beyond {most:e}): not a measurement"
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_quantity_has_its_own_ceiling_and_direction() {
        let t = Headline::throughput("bits_per_second");
        let r = Headline::rate("messages_per_second");
        let l = Headline::latency("round_trip_p50_ns");
        assert!(t.higher_is_better && r.higher_is_better && !l.higher_is_better);
        assert_eq!(t.most(), 1e15);
        assert_eq!(r.most(), 1e10);
        assert_eq!(l.most(), 3.6e12);
        assert_eq!(t.implausible(&[1e9, 1e15]), None);
        let wild = t.implausible(&[1e9, 2e15]).unwrap();
        assert!(wild.contains("2e15") && wild.contains("1e15"), "{wild}");
        assert!(l.implausible(&[-1.0]).is_some());
        assert!(r.implausible(&[f64::NAN]).is_some());
        assert_eq!(r.implausible(&[]), None);
    }
}
