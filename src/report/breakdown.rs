//! The `--timestamps` breakdown printed under the latency or throughput table: for each
//! scenario and direction, the mean and median of each part of the one-way time, their
//! sum, and what was measured without the stamps (pingpong: the client's round trip;
//! rate: the one-way time from the send time each message carries).

use crate::measure::histogram::Latency;
use crate::measure::timestamps::{StampedDirection, Timestamps};
use crate::report::grid::{Align, Grid};
use crate::report::Report;
use crate::results::ScenarioResult;
use crate::vocab::units::format_ns;

const HEADERS: [&str; 8] = [
    "scenario",
    "way",
    "stat",
    "user→kernel",
    "kernel→kernel",
    "kernel→user",
    "sum",
    "measured",
];

/// One statistic of a distribution.
type Stat = fn(&Latency) -> u64;

fn cell(l: &Option<Latency>, f: Stat) -> String {
    l.as_ref().map_or_else(|| "-".into(), |l| format_ns(f(l)))
}

/// A direction's two rows: mean and p50.
fn direction_rows(
    label: &str,
    d: &StampedDirection,
    measured: Option<&Latency>,
) -> Vec<Vec<String>> {
    let stats: [(&str, Stat); 2] = [("mean", |l| l.mean_ns), ("p50", |l| l.p50_ns)];
    stats
        .into_iter()
        .map(|(name, f)| {
            let parts = [&d.user_to_kernel, &d.kernel_to_kernel, &d.kernel_to_user];
            let sum = parts
                .iter()
                .map(|p| p.as_ref().map(f))
                .sum::<Option<u64>>()
                .map_or_else(|| "-".into(), format_ns);
            vec![
                label.to_string(),
                d.direction.clone(),
                name.into(),
                cell(parts[0], f),
                cell(parts[1], f),
                cell(parts[2], f),
                sum,
                measured.map_or_else(|| cell(&d.one_way, f), |m| format_ns(f(m))),
            ]
        })
        .collect()
}

/// The rows of one scenario: each direction; for pingpong also the server's turnaround
/// and the round trip (means: the parts' sum against the client's own round trip).
fn scenario_rows(r: &ScenarioResult, t: &Timestamps) -> Vec<Vec<String>> {
    let label = r.label();
    let one_way = r
        .latencies
        .get(&crate::measure::latency::LatencyKind::OneWay);
    let mut rows = Vec::new();
    for d in &t.directions {
        rows.extend(direction_rows(&label, d, one_way));
    }
    if let Some(turn) = &t.turnaround {
        let mut row = |stat: &str, v: u64| {
            let mut cells = vec![label.clone(), "server".into(), stat.into()];
            cells.extend(["-", "-", "-"].map(String::from));
            cells.extend([format_ns(v), "-".into()]);
            rows.push(cells);
        };
        row("mean", turn.mean_ns);
        row("p50", turn.p50_ns);
        let means = t
            .directions
            .iter()
            .flat_map(|d| [&d.user_to_kernel, &d.kernel_to_kernel, &d.kernel_to_user])
            .map(|p| p.as_ref().map(|l| l.mean_ns))
            .sum::<Option<u64>>();
        if let (Some(sum), Some(rtt)) = (
            means,
            r.latencies
                .get(&crate::measure::latency::LatencyKind::RoundTrip),
        ) {
            let mut cells = vec![label.clone(), "round trip".into(), "mean".into()];
            cells.extend(["-", "-", "-"].map(String::from));
            cells.extend([format_ns(sum + turn.mean_ns), format_ns(rtt.mean_ns)]);
            rows.push(cells);
        }
    }
    rows
}

/// The breakdown table, if any scenario has timestamps.
pub fn timestamps(report: &Report) -> Option<Grid> {
    let with: Vec<_> = report
        .results
        .iter()
        .filter_map(|r| Some((r, r.timestamps.as_ref()?)))
        .collect();
    let (_, first) = with.first()?;
    let rows: Vec<Vec<String>> = with.iter().flat_map(|(r, t)| scenario_rows(r, t)).collect();
    let pingpong = with.iter().any(|(r, _)| {
        r.latencies
            .contains_key(&crate::measure::latency::LatencyKind::RoundTrip)
    });
    let measured = if pingpong {
        "each message's own sum; round trip: the client's own clock"
    } else {
        "from the send time each message carries"
    };
    let notes = vec![
        "user→kernel: send call to transmit stamp, kernel→kernel: to receive stamp, kernel→user: \
         to return."
            .into(),
        format!("{}; each stamp costs one error-queue read.", first.note),
        format!("measured: {measured}."),
        coverage(&with, if pingpong { "round trips" } else { "messages" }),
        missing(&with),
    ];
    Some(Grid {
        title: Some("Kernel timestamps: where the one-way time goes".into()),
        headers: HEADERS.map(String::from).to_vec(),
        align: [Align::Left, Align::Left, Align::Left]
            .into_iter()
            .chain([Align::Right; 5])
            .collect(),
        rows,
        notes,
    })
}

/// What the breakdown covers: the first direction's messages kept (pingpong: requests,
/// one per round trip) out of those sent, and the sampling that left the others out
/// (each stream's step, which differs between streams that sent more and fewer).
fn coverage(with: &[(&ScenarioResult, &Timestamps)], what: &str) -> String {
    let first = || with.iter().filter_map(|(_, t)| t.directions.first());
    let covered: u64 = first().map(|d| d.messages).sum();
    let sent: u64 = first().map(|d| d.messages_sent).sum();
    let steps: Vec<u64> = (with.iter())
        .flat_map(|(_, t)| match t.streams.is_empty() {
            true => vec![t.sampled_every],
            false => t.streams.iter().map(|s| s.sampled_every).collect(),
        })
        .collect();
    let (least, most) = (
        steps.iter().copied().min().unwrap_or(1),
        steps.iter().copied().max().unwrap_or(1),
    );
    let kept = match (least, most) {
        (_, 1) => String::new(),
        (l, m) if l == m => format!(" (1 in {m} kept: at most 16384 per role and run)"),
        (l, m) => {
            format!(" (1 in {l} to 1 in {m} kept, by stream: at most 16384 per role and run)")
        }
    };
    match sent {
        // A report from before the counts were kept.
        0 => format!("Covers {covered} {what}{kept}."),
        s if s == covered => format!("Covers all {s} {what}."),
        s => format!("Covers {covered} of {s} {what}{kept}."),
    }
}

/// The kept messages that lack a stamp, every direction (what sampling left out is not
/// missing: [`coverage`] says how much that is).
fn missing(with: &[(&ScenarioResult, &Timestamps)]) -> String {
    let dirs = || with.iter().flat_map(|(_, t)| &t.directions);
    let missing: u64 = dirs().map(|d| d.missing).sum();
    let kept: u64 = dirs().map(|d| d.messages).sum();
    format!("{missing} of the {kept} messages kept lack a stamp.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::timestamps::{join_pingpong, report, Record, StampLog};
    use crate::report::sample;
    use crate::scenario::WorkloadKind;
    use crate::transport::TransportKind;

    fn stamped(n: u64) -> Timestamps {
        const T: u64 = 1_700_000_000_000_000_000;
        let (mut c, mut s) = (StampLog::new(T), StampLog::new(T));
        for seq in 0..n {
            let t = T + seq * 100_000;
            c.push(&Record {
                seq,
                tx_user: t,
                tx_kernel: t + 1_000,
                rx_kernel: t + 9_000,
                rx_user: t + 15_000,
                carried: 0,
            });
            s.push(&Record {
                seq,
                rx_kernel: t + 1_200,
                rx_user: t + 7_000,
                tx_user: t + 7_100,
                tx_kernel: t + 8_800,
                carried: 0,
            });
        }
        let mut t = report(&join_pingpong(&c, &s), Some("lo"));
        for d in &mut t.directions {
            d.messages_sent = n;
        }
        t
    }

    #[test]
    fn a_sampled_run_says_which_share_of_messages_it_kept() {
        let mut r = sample::scenario(WorkloadKind::Rate, TransportKind::Udp, 64, 0.0);
        let mut t = stamped(4);
        t.sampled_every = 2;
        t.directions[0].messages_sent = 8;
        r.timestamps = Some(t);
        let g = timestamps(&sample::report(vec![r], crate::scenario::Layout::List)).unwrap();
        assert!(
            g.notes[3].starts_with("Covers 4 of 8 messages (1 in 2 kept"),
            "{:?}",
            g.notes
        );
    }

    /// Issue 29: merged over streams, the breakdown said `missing: 0` of half the round
    /// trips and dropped the sampling note. It says what it covers of what was sent,
    /// and each stream's step where they differ.
    #[test]
    fn a_breakdown_over_streams_sampled_differently_says_what_it_covers() {
        use crate::measure::timestamps::StampedStream;
        let mut r = sample::scenario(WorkloadKind::Pingpong, TransportKind::Udp, 64, 0.0);
        let mut t = stamped(6);
        // Two streams: one sent 4 and kept all, the other 8 and kept 1 in 4.
        t.streams = vec![
            StampedStream {
                sampled_every: 1,
                messages_sent: 4,
                messages: 4,
            },
            StampedStream {
                sampled_every: 4,
                messages_sent: 8,
                messages: 2,
            },
        ];
        t.sampled_every = 4;
        for d in &mut t.directions {
            d.messages_sent = 12;
        }
        r.latencies.insert(
            crate::measure::latency::LatencyKind::RoundTrip,
            t.directions[0].one_way.clone().unwrap(),
        );
        r.timestamps = Some(t);
        let g = timestamps(&sample::report(vec![r], crate::scenario::Layout::List)).unwrap();
        assert!(
            g.notes.contains(
                &"Covers 6 of 12 round trips (1 in 1 to 1 in 4 kept, by stream: at most 16384 per \
                  role and run)."
                    .to_string()
            ),
            "{:?}",
            g.notes
        );
        assert!(
            g.notes
                .contains(&"0 of the 12 messages kept lack a stamp.".to_string()),
            "{:?}",
            g.notes
        );
    }

    #[test]
    fn the_breakdown_adds_the_parts_and_the_turnaround_against_the_round_trip() {
        let mut r = sample::scenario(WorkloadKind::Pingpong, TransportKind::Udp, 64, 0.0);
        assert!(
            timestamps(&sample::report(
                vec![r.clone()],
                crate::scenario::Layout::List
            ))
            .is_none(),
            "no table without --timestamps"
        );
        r.timestamps = Some(stamped(10));
        let mut rtt = r.timestamps.as_ref().unwrap().directions[0]
            .one_way
            .clone()
            .unwrap();
        rtt.mean_ns = 15_500;
        r.latencies
            .insert(crate::measure::latency::LatencyKind::RoundTrip, rtt);
        let g = timestamps(&sample::report(vec![r], crate::scenario::Layout::List)).unwrap();
        // request (mean, p50), reply (mean, p50), server (mean, p50), round trip.
        assert_eq!(g.rows.len(), 7);
        let req = &g.rows[0];
        assert_eq!(
            &req[1..8],
            ["request", "mean", "1.00 µs", "200 ns", "5.80 µs", "7.00 µs", "7.00 µs"]
        );
        let rt = g.rows.last().unwrap();
        // 7.0 request + 0.1 turnaround + 7.9 reply = 15.0 µs, against 15.5 measured.
        assert_eq!(
            &rt[1..],
            ["round trip", "mean", "-", "-", "-", "15.0 µs", "15.5 µs"]
        );
        assert!(g.width() <= crate::report::grid::MAX_WIDTH, "{}", g.width());
        assert!(
            g.notes[1].contains("lo: no hardware timestamps"),
            "{:?}",
            g.notes
        );
        assert_eq!(g.notes[3], "Covers all 10 round trips.", "{:?}", g.notes);
        assert_eq!(
            g.notes[4], "0 of the 20 messages kept lack a stamp.",
            "{:?}",
            g.notes
        );
        assert!(
            g.notes.iter().all(|n| n.chars().count() <= 100),
            "{:?}",
            g.notes
        );
    }
}
