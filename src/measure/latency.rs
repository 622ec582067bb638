//! The latency distributions sockbench records, by name: one closed set, so a figure is
//! found by what it is ([`LatencyKind::RoundTrip`]), never by a string that could be
//! misspelled. In documents each is a key of `latencies` and `latency_buckets`, spelled
//! as [`LatencyKind::name`] says.

use serde::{Deserialize, Serialize};

/// One latency distribution a workload records. Declared in the order of their names,
/// so that a map keyed by them lists them as a map keyed by their names would.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum LatencyKind {
    /// connect: the listener's `accept`.
    Accept,
    /// connect: the client's `close`.
    Close,
    /// connect: the client's `connect`.
    Connect,
    /// connect: from the connection to the first byte of the server's answer.
    FirstResponse,
    /// A message from its write to its read, on one clock (relay pingpong,
    /// `--timestamps` one-way).
    OneWay,
    /// pingpong: a request out and its answer back.
    RoundTrip,
}

impl LatencyKind {
    /// Every kind, in the order pages show them.
    pub const ALL: [LatencyKind; 6] = [
        LatencyKind::RoundTrip,
        LatencyKind::Connect,
        LatencyKind::Accept,
        LatencyKind::FirstResponse,
        LatencyKind::Close,
        LatencyKind::OneWay,
    ];

    /// Its name in documents, metrics and on the wire.
    pub fn name(self) -> &'static str {
        match self {
            LatencyKind::Accept => "accept",
            LatencyKind::Close => "close",
            LatencyKind::Connect => "connect",
            LatencyKind::FirstResponse => "first_response",
            LatencyKind::OneWay => "one_way",
            LatencyKind::RoundTrip => "round_trip",
        }
    }

    /// The kind named `name`, if it is one.
    pub fn parse(name: &str) -> Option<LatencyKind> {
        LatencyKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Its title for people (a chart's).
    pub fn title(self) -> &'static str {
        match self {
            LatencyKind::Accept => "accept() latency",
            LatencyKind::Close => "close() latency",
            LatencyKind::Connect => "connect() latency",
            LatencyKind::FirstResponse => "Time to first response",
            LatencyKind::OneWay => "One-way latency",
            LatencyKind::RoundTrip => "Round-trip latency",
        }
    }
}

impl std::fmt::Display for LatencyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_is_its_serde_name_and_parses_back_and_the_order_is_the_names() {
        let mut names = Vec::new();
        for k in LatencyKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), k.name());
            assert_eq!(LatencyKind::parse(k.name()), Some(k));
            names.push((k, k.name()));
        }
        let mut by_kind = names.clone();
        by_kind.sort_by_key(|(k, _)| *k);
        names.sort_by_key(|(_, n)| *n);
        assert_eq!(by_kind, names, "a map keyed by kind lists them as by name");
        assert_eq!(LatencyKind::parse("rtt"), None);
    }

    #[test]
    fn each_kind_has_a_title_of_its_own_for_its_chart() {
        let titles: std::collections::BTreeSet<&str> =
            LatencyKind::ALL.iter().map(|k| k.title()).collect();
        assert_eq!(titles.len(), LatencyKind::ALL.len(), "{titles:?}");
        assert_eq!(LatencyKind::RoundTrip.title(), "Round-trip latency");
        assert_eq!(LatencyKind::FirstResponse.title(), "Time to first response");
        assert!(titles
            .iter()
            .all(|t| t.contains("latency") || t.contains("response")));
    }
}
